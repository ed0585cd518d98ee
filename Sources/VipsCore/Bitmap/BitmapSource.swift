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

    public init(info: ImageInfo, decodedLeniently: Bool) {
        self.info = info
        self.decodedLeniently = decodedLeniently
    }
}
