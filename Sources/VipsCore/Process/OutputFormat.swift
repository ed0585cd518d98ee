import Foundation

/// An output format with its settings, for `ImageEncoder.encode(_:as:metadata:background:)`
/// and `ImagePipeline.encodedImage(for:as:)`. Out-of-range settings are
/// `.invalidArgument`, never clamped silently.
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

/// Encoded image bytes with their format and pixel size.
public struct EncodedImage: Sendable {
    /// The encoded file.
    public let data: Data
    /// The format of `data`.
    public let format: OutputFormat
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int

    /// Encoded bytes of `format`, `width`×`height` pixels.
    public init(data: Data, format: OutputFormat, width: Int, height: Int) {
        self.data = data
        self.format = format
        self.width = width
        self.height = height
    }

    /// Writes the bytes to `url` atomically: to a temporary file in the same
    /// folder, then renamed over `url`, so a reader never sees half a file
    /// and a failure leaves no temporary file behind.
    ///
    /// - Throws: `.invalidArgument` for a non-file URL; `.fileNotFound`,
    ///   `.permissionDenied` or `.io` when writing fails.
    public func write(to url: URL) throws(VipsError) {
        guard url.isFileURL else { throw VipsError(.invalidArgument, "\(url): can only write to a file URL") }
        let folder = url.deletingLastPathComponent()
        let temporary = folder.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        do {
            try data.write(to: temporary, options: [.withoutOverwriting])
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw Self.fileError(error, url)
        }
        guard rename(temporary.path, url.path) == 0 else {
            let code = errno
            try? FileManager.default.removeItem(at: temporary)
            let kind: VipsError.Kind =
                code == EACCES || code == EPERM ? .permissionDenied : code == ENOENT ? .fileNotFound : .io
            throw VipsError(
                kind, "\(url.path): cannot move the written file into place: \(String(cString: strerror(code)))")
        }
    }

    private static func fileError(_ error: any Error, _ url: URL) -> VipsError {
        let code = (error as NSError).code
        let kind: VipsError.Kind
        switch code {
        case NSFileWriteNoPermissionError, NSFileReadNoPermissionError: kind = .permissionDenied
        case NSFileNoSuchFileError, NSFileReadNoSuchFileError: kind = .fileNotFound
        default: kind = .io
        }
        return VipsError(kind, "\(url.path): cannot write: \(error.localizedDescription)")
    }
}
