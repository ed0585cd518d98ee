import VipsCore

/// A decoded bitmap with what the pipeline knows of it: the source image's
/// own header, where the result came from, and whether the data was damaged.
public struct ImageResponse: Sendable {
    /// Where a response was served from.
    public enum Origin: String, Sendable, Hashable {
        /// The memory cache, without decoding.
        case memoryCache
        /// Made from another bitmap of the same source found in the memory
        /// cache, without loading or decoding the source: a larger size
        /// downscaled (`Configuration.resizesFromLargerCachedImages`), or the
        /// decoded bitmap a request with processors starts from. Its task's
        /// `events` report a memory cache hit.
        case derivedFromMemoryCache
        /// Decoded from bytes found in the data (disk) cache.
        case dataCache
        /// Decoded from bytes loaded from the source (a file, memory, or the network).
        case load
    }

    /// The bitmap, as `ImagePipeline.image(for:)` returns it.
    public let bitmap: Bitmap
    /// Where it came from.
    public let origin: Origin

    /// The source's header: original width and height (upright), format,
    /// orientation and pages. Nil only for a bitmap a custom processor made
    /// without a source.
    public var sourceInfo: ImageInfo? { bitmap.source?.info }

    /// Whether the source data was damaged and decoded leniently (the pixels
    /// may be incomplete).
    public var decodedLeniently: Bool { bitmap.source?.decodedLeniently ?? false }

    /// A response: the bitmap and where it came from.
    public init(bitmap: Bitmap, origin: Origin) {
        self.bitmap = bitmap
        self.origin = origin
    }
}
