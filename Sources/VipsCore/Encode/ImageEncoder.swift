import CVipsShim
import Foundation

/// Encodes bitmaps to JPEG, PNG or WebP.
public struct ImageEncoder: Sendable {
    /// An output format with its settings.
    public enum Format: Sendable, Hashable {
        /// JPEG at `quality` 1–100 (default 85); `progressive` writes an interlaced file.
        /// JPEG has no alpha: transparent pixels are composited onto white, as
        /// a browser shows them on a plain page (libvips alone would use black).
        case jpeg(quality: Int = 85, progressive: Bool = false)
        /// PNG with zlib `compression` 0–9 (default 6).
        case png(compression: Int = 6)
        /// WebP at `quality` 1–100 (default 80), or lossless.
        case webp(quality: Int = 80, lossless: Bool = false)

        /// The usual file extension.
        public var fileExtension: String {
            switch self {
            case .jpeg: return "jpg"
            case .png: return "png"
            case .webp: return "webp"
            }
        }
    }

    /// Whether 3-channel JPEG output takes the direct libjpeg-turbo encoder
    /// (see `encodeJPEGDirectly`); false sends everything through libvips, for
    /// tests and comparisons.
    var usesDirectPaths = true

    /// An encoder; it holds no state, so one can be shared by every thread.
    public init() {}

    /// Encodes `bitmap`; metadata is not written.
    public func encode(_ bitmap: Bitmap, as format: Format) throws(VipsError) -> Data {
        if usesDirectPaths, case .jpeg(let quality, let progressive) = format,
            let data = try Self.encodeJPEGDirectly(bitmap, quality: quality, progressive: progressive, chroma: .auto)
        {
            return data
        }
        try VipsRuntime.start()
        var image = try ImageDecoder.image(wrapping: bitmap)
        if case .jpeg = format, bitmap.channels == 4 {
            let white: [Double] = [255, 255, 255]
            image = try image.apply(.encodeFailed, "encode jpg: flatten") { input, output in
                white.withUnsafeBufferPointer { vl_flatten(input, output, $0.baseAddress, Int32($0.count)) }
            }
        }
        var buffer: UnsafeMutableRawPointer? = nil
        var length = 0
        let status: Int32 = withExtendedLifetime(bitmap) {
            switch format {
            case .jpeg(let quality, let progressive):
                return vl_jpegsave_buffer(
                    image.pointer, &buffer, &length, Int32(clamping: min(100, max(1, quality))), progressive ? 1 : 0)
            case .png(let compression):
                return vl_pngsave_buffer(image.pointer, &buffer, &length, Int32(clamping: min(9, max(0, compression))))
            case .webp(let quality, let lossless):
                return vl_webpsave_buffer(
                    image.pointer, &buffer, &length, Int32(clamping: min(100, max(1, quality))), lossless ? 1 : 0)
            }
        }
        guard status == 0, let buffer else {
            throw VipsError(
                .encodeFailed,
                "encode \(format.fileExtension): \(VipsRuntime.takeErrorMessage(default: "no reason given"))")
        }
        return Data(bytesNoCopy: buffer, count: length, deallocator: .custom { pointer, _ in g_free(pointer) })
    }
}
