/// What a header probe tells about an image, without decoding its pixels.
public struct ImageInfo: Sendable, Hashable, Codable {
    /// Width in pixels as displayed, that is after EXIF orientation is applied.
    public var width: Int
    /// Height in pixels as displayed, after EXIF orientation.
    public var height: Int
    /// The format, as named by the libvips loader that reads it.
    public var format: ImageFormat
    /// Bands (channels) as stored, alpha included.
    public var bands: Int
    /// Whether the image carries an alpha channel.
    public var hasAlpha: Bool
    /// EXIF orientation, 1 (upright) to 8.
    public var orientation: Int
    /// Pages or animation frames (1 for still images).
    public var pages: Int

    /// Header facts as `ImageDecoder.info(_:)` reports them; each parameter is the property of that name.
    public init(width: Int, height: Int, format: ImageFormat, bands: Int, hasAlpha: Bool, orientation: Int, pages: Int)
    {
        self.width = width
        self.height = height
        self.format = format
        self.bands = bands
        self.hasAlpha = hasAlpha
        self.orientation = orientation
        self.pages = pages
    }

    /// Pixels of one page, as stored.
    public var pixelCount: Int { width.multipliedReportingOverflow(by: height).partialValue }
}

extension ImageInfo {
    /// The header of an image whose page is stored `width`×`height`, as
    /// reported: upright, so the sides swap for EXIF orientations 5–8.
    init(
        storedWidth width: Int, height: Int, format: ImageFormat, bands: Int, hasAlpha: Bool, orientation: Int,
        pages: Int = 1
    ) {
        let swap = orientation >= 5
        self.init(
            width: swap ? height : width, height: swap ? width : height, format: format, bands: bands,
            hasAlpha: hasAlpha, orientation: orientation, pages: pages)
    }
}
