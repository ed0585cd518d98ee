/// Every frame of an animated GIF or WebP, decoded to bitmaps of one size,
/// with the animation's timing.
public struct AnimatedBitmap: Sendable {
    /// The frames in order, all the same size and channel count.
    public let frames: [Bitmap]
    /// How long each frame shows, in milliseconds (one per frame).
    public let delays: [Int]
    /// How many times the animation plays; 0 is forever.
    public let loopCount: Int

    /// - Throws: `.invalidArgument` unless there is at least one frame, all
    ///   frames share one size and channel count, and there is one
    ///   non-negative delay per frame.
    public init(frames: [Bitmap], delays: [Int], loopCount: Int = 0) throws(VipsError) {
        guard let first = frames.first, delays.count == frames.count, delays.allSatisfy({ $0 >= 0 }), loopCount >= 0,
            frames.allSatisfy({ $0.width == first.width && $0.height == first.height && $0.channels == first.channels })
        else {
            throw VipsError(.invalidArgument, "an animation needs frames of one size with one non-negative delay each")
        }
        self.frames = frames
        self.delays = delays
        self.loopCount = loopCount
    }

    /// Frames in the animation.
    public var frameCount: Int { frames.count }
    /// Width of every frame in pixels.
    public var width: Int { frames[0].width }
    /// Height of every frame in pixels.
    public var height: Int { frames[0].height }
}
