/// One step of a progressive load.
public struct ProgressiveImage: Sendable {
    /// The step's bitmap.
    public let bitmap: Bitmap
    /// The step's position in the ladder (0 = smallest).
    public let step: Int
    /// The step's request.
    public let request: ImageRequest
    /// Whether this is the last (largest) step: nothing follows it.
    public let isFinal: Bool
}
