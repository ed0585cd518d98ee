import Foundation

/// imgproxy's security limits on a source: the server's
/// (`IMGPROXY_MAX_SRC_RESOLUTION`, `IMGPROXY_MAX_SRC_FILE_SIZE`,
/// `IMGPROXY_MAX_ANIMATION_FRAMES`, `IMGPROXY_MAX_ANIMATION_FRAME_RESOLUTION`),
/// and a URL's own (`max_src_resolution`/`msr`, `max_src_file_size`/`msfs`,
/// `max_animation_frames`/`maf`, `max_animation_frame_resolution`/`mafr`),
/// which replace the server's for that URL where the server allows security
/// options at all (`ProcessingURLParser.allowsSecurityOptions`; else they are
/// refused with 403, as imgproxy does).
///
/// A source over a limit is refused with 422, as imgproxy answers: its file
/// size once its bytes are loaded (a download is first bounded by the
/// pipeline's own byte limit), its resolution once its header is read, before
/// any pixel is decoded. These limits come on top of the decoder's own
/// (`DecodeLimits`, 413), which no URL can raise.
///
/// nil is "not set": a URL's nil keeps the server's value, a server's nil is
/// no limit beyond the decoder's.
public struct SecurityLimits: Sendable, Hashable {
    /// The largest resolution of a source, in megapixels (width × height of
    /// the first frame, as displayed; `Int(megapixels × 1,000,000)` pixels,
    /// as imgproxy counts them). 0 refuses every source.
    public var maxSourceResolution: Double?
    /// The largest source file, in bytes; 0 is no limit (imgproxy's meaning).
    public var maxSourceFileSize: Int?
    /// The most animation frames processed, at least 1. `serve` renders the
    /// first frame only (as imgproxy with an output that is not animated),
    /// so this does not change a result.
    public var maxAnimationFrames: Int?
    /// The largest resolution of one animation frame, in megapixels, when
    /// more than one frame is processed; 0 is no limit. With one frame
    /// rendered, `maxSourceResolution` is the limit that applies.
    public var maxAnimationFrameResolution: Double?

    /// Limits; nil leaves one unset.
    public init(
        maxSourceResolution: Double? = nil, maxSourceFileSize: Int? = nil, maxAnimationFrames: Int? = nil,
        maxAnimationFrameResolution: Double? = nil
    ) {
        self.maxSourceResolution = maxSourceResolution
        self.maxSourceFileSize = maxSourceFileSize
        self.maxAnimationFrames = maxAnimationFrames
        self.maxAnimationFrameResolution = maxAnimationFrameResolution
    }

    /// These limits with `other`'s set values in their place (a URL's over the server's).
    public func overridden(by other: SecurityLimits) -> SecurityLimits {
        SecurityLimits(
            maxSourceResolution: other.maxSourceResolution ?? maxSourceResolution,
            maxSourceFileSize: other.maxSourceFileSize ?? maxSourceFileSize,
            maxAnimationFrames: other.maxAnimationFrames ?? maxAnimationFrames,
            maxAnimationFrameResolution: other.maxAnimationFrameResolution ?? maxAnimationFrameResolution)
    }

    /// Why a source of `bytes` bytes is refused; nil when it is not.
    public func refusal(fileSize bytes: Int) -> String? {
        guard let limit = maxSourceFileSize, limit > 0, bytes > limit else { return nil }
        return "the source image file is too big (over \(limit) bytes)"
    }

    /// Why a source of `width` × `height` pixels a frame, of which `frames`
    /// are processed, is refused (imgproxy's `CheckDimensions`); nil when it is not.
    public func refusal(width: Int, height: Int, frames: Int = 1) -> String? {
        let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
        let frames = max(frames, 1)
        if frames > 1, let frameLimit = maxAnimationFrameResolution, frameLimit > 0 {
            return overflow || pixels > Self.pixels(frameLimit)
                ? "the source image's frame resolution is too big (over \(Self.text(frameLimit)) megapixels)" : nil
        }
        guard let limit = maxSourceResolution else { return nil }
        let (total, overflowed) = pixels.multipliedReportingOverflow(by: frames)
        return overflow || overflowed || total > Self.pixels(limit)
            ? "the source image's resolution is too big (over \(Self.text(limit)) megapixels)" : nil
    }

    /// Megapixels as imgproxy stores them: `int(megapixels * 1000000)`.
    static func pixels(_ megapixels: Double) -> Int { Int(min(megapixels, 1e12) * 1_000_000) }

    static func text(_ value: Double) -> String { ProcessingOptions.Gravity.text(value) }

    /// The options that set these limits again, each left out when unset.
    var canonicalSegments: [String] {
        var segments: [String] = []
        if let maxSourceResolution { segments.append("msr:\(Self.text(maxSourceResolution))") }
        if let maxSourceFileSize { segments.append("msfs:\(maxSourceFileSize)") }
        if let maxAnimationFrames { segments.append("maf:\(maxAnimationFrames)") }
        if let maxAnimationFrameResolution { segments.append("mafr:\(Self.text(maxAnimationFrameResolution))") }
        return segments
    }

    /// Applies one security option (the caller checked that they are allowed).
    mutating func apply(_ option: OptionArguments) throws(ProcessingURLError) {
        try option.atMost(1)
        switch option.name {
        case "max_src_resolution", "msr":
            maxSourceResolution = try option.nonNegativeDouble(at: 0, atMost: 1e9)
        case "max_src_file_size", "msfs":
            maxSourceFileSize = try option.nonNegativeInt(at: 0)
        case "max_animation_frames", "maf":
            maxAnimationFrames = try option.int(at: 0, in: 1...Int.max)
        default:
            maxAnimationFrameResolution = try option.nonNegativeDouble(at: 0, atMost: 1e9)
        }
    }
}
