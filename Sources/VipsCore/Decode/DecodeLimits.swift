/// Bounds checked from the image header before any pixel is decoded, so a
/// small hostile file cannot make the decoder allocate without limit.
public struct DecodeLimits: Sendable, Hashable {
    /// Largest pixel count of one page (width × height). Default 100 megapixels.
    public var maxPixelCount: Int
    /// Largest width or height in pixels. Default 65,500 (JPEG's own ceiling).
    public var maxDimension: Int
    /// Most pages or animation frames a file may declare. Default 1,000.
    public var maxPages: Int
    /// Largest encoded input in bytes. Default 256 MiB.
    public var maxInputBytes: Int

    /// Limits; each parameter defaults as its property documents.
    public init(
        maxPixelCount: Int = 100_000_000, maxDimension: Int = 65_500, maxPages: Int = 1_000,
        maxInputBytes: Int = 256 << 20
    ) {
        self.maxPixelCount = maxPixelCount
        self.maxDimension = maxDimension
        self.maxPages = maxPages
        self.maxInputBytes = maxInputBytes
    }

    /// Throws `.tooLarge` when the input size breaks a limit.
    func check(inputBytes: Int, label: String) throws(VipsError) {
        if inputBytes > maxInputBytes {
            throw VipsError(
                .tooLarge, "\(label): \(inputBytes) bytes exceeds the input limit of \(maxInputBytes) bytes")
        }
    }

    /// Throws `.tooLarge` when the header breaks a limit. `info` gives one
    /// page's size as displayed; orientation swaps the sides, not the count.
    func check(_ info: ImageInfo, label: String) throws(VipsError) {
        let (pixels, overflow) = info.width.multipliedReportingOverflow(by: info.height)
        if overflow || pixels > maxPixelCount {
            throw VipsError(
                .tooLarge, "\(label): \(info.width)×\(info.height) px exceeds the limit of \(maxPixelCount) pixels")
        }
        if info.width > maxDimension || info.height > maxDimension {
            throw VipsError(
                .tooLarge, "\(label): \(info.width)×\(info.height) px exceeds the limit of \(maxDimension) px a side")
        }
        if info.pages > maxPages {
            throw VipsError(.tooLarge, "\(label): \(info.pages) pages exceeds the limit of \(maxPages)")
        }
    }
}
