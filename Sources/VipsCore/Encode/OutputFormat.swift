import Foundation

/// An output format with its settings, for `ImageEncoder.encode(_:as:keepingMetadata:background:keepingColorProfile:greyscale:)`,
/// `ImageEncoder.encode(_:as:)` (animations) and `ImagePipeline.encodedImage(for:as:)`.
/// Out-of-range settings are `.invalidArgument`, never clamped silently.
public enum OutputFormat: Sendable, Hashable, CustomStringConvertible {
    /// JPEG at `quality` 1–100; `progressive` writes an interlaced file;
    /// `chromaSubsampling` chooses 4:2:0 (`.on`), 4:4:4 (`.off`) or libvips'
    /// choice by quality (`.auto`: off at 90 and above). No alpha: transparent
    /// pixels are flattened onto the background.
    case jpeg(quality: Int = 85, progressive: Bool = false, chromaSubsampling: ChromaSubsampling = .auto)
    /// PNG with zlib `compression` 0–9; `palette` quantises to 8-bit indexed colour.
    case png(compression: Int = 6, palette: Bool = false)
    /// WebP at `quality` 1–100, or lossless; `effort` 0–6 (CPU spent on size).
    case webp(quality: Int = 80, lossless: Bool = false, effort: Int = 4)
    /// AVIF (HEIF with AV1, libvips' heifsave) at `quality` 1–100, `effort` 0–9.
    case avif(quality: Int = 50, effort: Int = 4)
    /// GIF (palette, 1-bit transparency).
    case gif
    /// JPEG XL (libvips' jxlsave, through libjxl) at `quality` 1–100, or
    /// `lossless`; `effort` 1–9 (CPU spent on size).
    case jxl(quality: Int = 75, effort: Int = 7, lossless: Bool = false)
    /// HEIC (HEIF with HEVC, libvips' heifsave, 8 bits a sample) at `quality` 1–100, `effort` 0–9.
    /// Needs libheif with an HEVC encoder (Debian's libheif1 has x265).
    case heic(quality: Int = 50, effort: Int = 4)
    /// TIFF, uncompressed (libvips' tiffsave default); `quality` 1–100 is
    /// recorded for the format's JPEG compression, which is not used.
    case tiff(quality: Int = 75)
    /// BMP: uncompressed 24-bit (RGB) or 32-bit (RGBA) pixels, bottom-up,
    /// written in Swift as imgproxy's own BMP saver writes them.
    case bmp
    /// ICO: one PNG image in an icon directory, as imgproxy writes it; at most 256×256 pixels.
    case ico

    /// JPEG chroma subsampling.
    public enum ChromaSubsampling: String, Sendable, Hashable {
        /// Chroma subsampling: libvips' choice (`auto`), always 4:2:0 (`on`) or never (`off`).
        case auto, on, off
    }

    /// The format named "jpeg"/"jpg", "png", "webp", "avif", "gif", "jxl",
    /// "heic", "tiff"/"tif", "bmp" or "ico", with
    /// default settings; nil if unknown.
    public init?(name: String) {
        switch name.lowercased() {
        case "jpeg", "jpg": self = .jpeg()
        case "png": self = .png()
        case "webp": self = .webp()
        case "avif": self = .avif()
        case "gif": self = .gif
        case "jxl": self = .jxl()
        case "heic": self = .heic()
        case "tiff", "tif": self = .tiff()
        case "bmp": self = .bmp
        case "ico": self = .ico
        default: return nil
        }
    }

    /// The usual file extension.
    public var fileExtension: String {
        switch self {
        case .jpeg: return "jpg"
        case .png: return "png"
        case .webp: return "webp"
        case .avif: return "avif"
        case .gif: return "gif"
        case .jxl: return "jxl"
        case .heic: return "heic"
        case .tiff: return "tiff"
        case .bmp: return "bmp"
        case .ico: return "ico"
        }
    }

    /// The format the encoded bytes are, as `ImageFormat` names it.
    public var imageFormat: ImageFormat {
        switch self {
        case .jpeg: return .jpeg
        case .png: return .png
        case .webp: return .webp
        case .avif: return .avif
        case .gif: return .gif
        case .jxl: return .jxl
        case .heic: return .heif
        case .tiff: return .tiff
        case .bmp: return .bmp
        case .ico: return .ico
        }
    }

    /// The quality setting (1–100) of a format that has one; nil for PNG,
    /// GIF, BMP and ICO (and for lossless WebP and JPEG XL).
    public var quality: Int? {
        switch self {
        case .jpeg(let quality, _, _), .avif(let quality, _), .heic(let quality, _), .tiff(let quality):
            return quality
        case .webp(let quality, let lossless, _), .jxl(let quality, _, let lossless): return lossless ? nil : quality
        case .png, .gif, .bmp, .ico: return nil
        }
    }

    /// This format with its quality setting replaced by `quality`; itself
    /// when the format has no quality.
    public func withQuality(_ quality: Int) -> OutputFormat {
        switch self {
        case .jpeg(_, let progressive, let chroma):
            return .jpeg(quality: quality, progressive: progressive, chromaSubsampling: chroma)
        case .webp(_, let lossless, let effort): return .webp(quality: quality, lossless: lossless, effort: effort)
        case .avif(_, let effort): return .avif(quality: quality, effort: effort)
        case .jxl(_, let effort, let lossless): return .jxl(quality: quality, effort: effort, lossless: lossless)
        case .heic(_, let effort): return .heic(quality: quality, effort: effort)
        case .tiff: return .tiff(quality: quality)
        case .png, .gif, .bmp, .ico: return self
        }
    }

    /// Whether the format stores an ICC profile (all but GIF, BMP and ICO, as imgproxy's table has it).
    public var storesColorProfile: Bool {
        switch self {
        case .gif, .bmp, .ico: return false
        default: return true
        }
    }

    /// Whether the format stores transparency.
    public var supportsAlpha: Bool {
        if case .jpeg = self { return false }
        return true
    }

    public var description: String { fileExtension }

    /// `.invalidArgument` for a setting outside its range.
    public func validate() throws(VipsError) {
        func check(_ value: Int, _ range: ClosedRange<Int>, _ name: String) throws(VipsError) {
            guard range.contains(value) else {
                throw VipsError(
                    .invalidArgument,
                    "\(fileExtension) \(name) \(value) is outside \(range.lowerBound)–\(range.upperBound)")
            }
        }
        switch self {
        case .jpeg(let quality, _, _): try check(quality, 1...100, "quality")
        case .png(let compression, _): try check(compression, 0...9, "compression")
        case .webp(let quality, _, let effort):
            try check(quality, 1...100, "quality")
            try check(effort, 0...6, "effort")
        case .avif(let quality, let effort):
            try check(quality, 1...100, "quality")
            try check(effort, 0...9, "effort")
        case .jxl(let quality, let effort, _):
            try check(quality, 1...100, "quality")
            try check(effort, 1...9, "effort")
        case .heic(let quality, let effort):
            try check(quality, 1...100, "quality")
            try check(effort, 0...9, "effort")
        case .tiff(let quality): try check(quality, 1...100, "quality")
        case .gif, .bmp, .ico: break
        }
    }
}
