import Foundation

/// Decoded pixels: 8-bit sRGB, interleaved, 3 channels (RGB) or 4 (RGBA,
/// straight alpha), rows top to bottom with no padding.
///
/// A `Bitmap` owns its pixels and is immutable, so it is `Sendable` and cheap
/// to copy (copies share the same memory).
public struct Bitmap: Sendable {
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// Channels per pixel: 3 (RGB) or 4 (RGBA).
    public let channels: Int
    /// The display scale the bitmap was made for: its size in points is the pixel size / `scale`.
    public let scale: Double
    /// What the pixels were decoded from, when a decode that records it made
    /// them (`ImageDecoder.decode(_:size:mode:scale:allowUpscale:)`, and so
    /// every pipeline result); processors and resizes keep it. Nil otherwise.
    public let source: BitmapSource?
    let storage: PixelStorage

    init(width: Int, height: Int, channels: Int, scale: Double, storage: PixelStorage, source: BitmapSource? = nil) {
        self.width = width
        self.height = height
        self.channels = channels
        self.scale = scale
        self.storage = storage
        self.source = source
    }

    /// Makes a bitmap from interleaved 8-bit sRGB pixels (copied).
    ///
    /// - Throws: `.invalidArgument` when the byte count does not match the size.
    public init(
        width: Int, height: Int, channels: Int, scale: Double = 1, pixels: some ContiguousBytes
    ) throws(VipsError) {
        guard width > 0, height > 0, channels == 3 || channels == 4, scale > 0, scale.isFinite else {
            throw VipsError(
                .invalidArgument, "bitmap must be at least 1×1 with 3 or 4 channels and a positive, finite scale")
        }
        // Overflow-checked, so an absurd size is an argument error, not a trap.
        let pixelCount = width.multipliedReportingOverflow(by: height)
        let byteCount = pixelCount.partialValue.multipliedReportingOverflow(by: channels)
        let storage: PixelStorage? = pixels.withUnsafeBytes { raw in
            guard !pixelCount.overflow, !byteCount.overflow, raw.count == byteCount.partialValue else { return nil }
            return PixelStorage(copying: raw)
        }
        guard let storage else {
            throw VipsError(.invalidArgument, "pixel byte count does not match \(width)×\(height)×\(channels)")
        }
        self.init(width: width, height: height, channels: channels, scale: scale, storage: storage)
    }

    /// Bytes from the start of one row to the next.
    public var bytesPerRow: Int { width * channels }

    /// Whether the fourth channel is alpha.
    public var hasAlpha: Bool { channels == 4 }

    /// Memory held by the pixels, in bytes: what caches count.
    public var cost: Int { storage.count }

    /// Size in points (pixels / scale).
    public var pointSize: (width: Double, height: Double) { (Double(width) / scale, Double(height) / scale) }

    /// Calls `body` with the pixel bytes, without copying.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(storage.buffer)
    }

    /// The pixel bytes as `Data` that shares the bitmap's memory (no copy).
    public var pixelData: Data {
        let storage = self.storage
        return Data(
            bytesNoCopy: storage.pointer, count: storage.count,
            deallocator: .custom { _, _ in
                withExtendedLifetime(storage) {}
            })
    }

    /// The channel values of one pixel (origin top left), or nil outside the bitmap.
    public func pixel(x: Int, y: Int) -> [UInt8]? {
        guard (0..<width).contains(x), (0..<height).contains(y) else { return nil }
        let offset = y * bytesPerRow + x * channels
        return (0..<channels).map { storage.buffer[offset + $0] }
    }

    /// The same pixels, described for another display scale.
    public func withScale(_ scale: Double) -> Bitmap {
        Bitmap(width: width, height: height, channels: channels, scale: scale, storage: storage, source: source)
    }

    /// The same pixels, described as decoded from `source`.
    public func withSource(_ source: BitmapSource?) -> Bitmap {
        Bitmap(width: width, height: height, channels: channels, scale: scale, storage: storage, source: source)
    }
}
