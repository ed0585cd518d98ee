/// What a bitmap was decoded from: the source image's own header and whether
/// its data was damaged.
public struct BitmapSource: Sendable, Hashable {
    /// The source's header: its original width and height (upright, after
    /// EXIF orientation), format, orientation and page count.
    public let info: ImageInfo
    /// Whether the decoder met damage (a truncated or corrupt stream) and
    /// decoded leniently, filling what was missing: the pixels may be
    /// incomplete. Always false in strict mode, where damage is an error.
    public let decodedLeniently: Bool
    /// Whether the encoded bytes came from a data cache (the pipeline's disk
    /// cache) rather than from their source.
    public let fromDataCache: Bool
    /// The source's EXIF and profile, when the decode was asked to keep them
    /// (for an encoder keeping metadata); nil otherwise.
    public let metadata: ImageMetadata?
    /// How far the loader shrank the image while decoding it (8 for a JPEG
    /// decoded at 1/8, 1 for a decode at full size), as a planned decode
    /// (`ImageGeometry`) reports it; nil for decodes that do not report it.
    public let loadShrink: Double?

    /// Where a bitmap came from: its source header, whether it was decoded
    /// leniently, whether from the data cache, the metadata kept, and the
    /// loader's shrink.
    public init(
        info: ImageInfo, decodedLeniently: Bool, fromDataCache: Bool = false, metadata: ImageMetadata? = nil,
        loadShrink: Double? = nil
    ) {
        self.info = info
        self.decodedLeniently = decodedLeniently
        self.fromDataCache = fromDataCache
        self.metadata = metadata
        self.loadShrink = loadShrink
    }
}
