import Foundation

/// An output format with its settings, for `ImageEncoder.encode(_:as:keepingMetadata:background:)`,
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

    /// JPEG chroma subsampling.
    public enum ChromaSubsampling: String, Sendable, Hashable {
        /// Chroma subsampling: libvips' choice (`auto`), always 4:2:0 (`on`) or never (`off`).
        case auto, on, off
    }

    /// The format named "jpeg"/"jpg", "png", "webp", "avif" or "gif", with
    /// default settings; nil if unknown.
    public init?(name: String) {
        switch name.lowercased() {
        case "jpeg", "jpg": self = .jpeg()
        case "png": self = .png()
        case "webp": self = .webp()
        case "avif": self = .avif()
        case "gif": self = .gif
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
        case .gif: break
        }
    }
}
