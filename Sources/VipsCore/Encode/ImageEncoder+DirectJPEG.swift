import CTurboJPEG
import CVipsShim
import Foundation

/// The direct JPEG encoder: libjpeg-turbo (through its TurboJPEG API)
/// compresses an RGB bitmap from its own memory, without wrapping it in a
/// libvips image, building a `jpegsave` operation or running libvips' sink
/// on a worker thread. For a thumbnail that fixed cost is about as large as
/// the compression itself.
///
/// It writes what libvips' `jpegsave` writes with `strip` (the same libjpeg,
/// the same settings: `jpeg_set_quality(Q, force_baseline)`, the integer
/// DCT, 4:2:0 unless Q ≥ 90 or subsampling is off, `jpeg_simple_progression`
/// for an interlaced file, and no JFIF segment), byte for byte, which the
/// tests check against libvips. Anything else (alpha to flatten, metadata to
/// keep) is left to libvips.
extension ImageEncoder {
    /// JPEG bytes for a 3-channel bitmap, stripped of metadata; nil when the bitmap is not one.
    /// `quality` was validated (1–100) by `OutputFormat.validate`.
    static func encodeJPEGDirectly(
        _ bitmap: Bitmap, quality: Int, progressive: Bool,
        chroma: OutputFormat.ChromaSubsampling
    ) throws(VipsError) -> Data? {
        guard bitmap.channels == 3, bitmap.width > 0, bitmap.height > 0,
            let width = Int32(exactly: bitmap.width), let height = Int32(exactly: bitmap.height),
            let pitch = Int32(exactly: bitmap.bytesPerRow)
        else { return nil }
        // libvips' VIPS_FOREIGN_SUBSAMPLE_AUTO: chroma is subsampled below Q 90.
        let subsample: Bool
        switch chroma {
        case .auto: subsample = quality < 90
        case .on: subsample = true
        case .off: subsample = false
        }
        guard let handle = tjInitCompress() else {
            throw VipsError(.encodeFailed, "encode jpg: libjpeg-turbo could not start a compressor")
        }
        defer { tjDestroy(handle) }
        var buffer: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let samp = subsample ? TJSAMP_420 : TJSAMP_444
        // The integer DCT libvips uses (TurboJPEG would pick the fast one when compressing).
        let flags = TJFLAG_ACCURATEDCT | (progressive ? TJFLAG_PROGRESSIVE : 0)
        let status = withExtendedLifetime(bitmap) {
            tjCompress2(
                handle, bitmap.storage.pointer.assumingMemoryBound(to: UInt8.self), width, pitch, height,
                Int32(TJPF_RGB.rawValue), &buffer, &size, Int32(samp.rawValue), Int32(quality), flags)
        }
        guard status == 0, let buffer, size >= 4 else {
            let message = tjGetErrorStr2(handle).map { String(cString: $0) } ?? "libjpeg-turbo gave no reason"
            if let buffer { tjFree(buffer) }
            throw VipsError(.encodeFailed, "encode jpg: \(message)")
        }
        var count = Int(size)
        // libjpeg writes a JFIF APP0 segment right after SOI; libvips' stripped output has none.
        let jfif: [UInt8] = [0xFF, 0xE0, 0x00, 0x10, 0x4A, 0x46, 0x49, 0x46, 0x00]
        if count > 2 + 18, (0..<jfif.count).allSatisfy({ buffer[2 + $0] == jfif[$0] }) {
            memmove(buffer + 2, buffer + 20, count - 20)
            count -= 18
        }
        return Data(
            bytesNoCopy: buffer, count: count,
            deallocator: .custom { pointer, _ in
                tjFree(pointer.assumingMemoryBound(to: UInt8.self))
            })
    }

    /// An RGBA bitmap flattened onto `background` as libvips' `vips_flatten`
    /// does for 8-bit pixels (each band `p × a / 255 + bg × (255 − a) / 255`
    /// in double precision, truncated), so the direct encoder gives the bytes
    /// libvips' flatten + `jpegsave` give; nil when the bitmap is not RGBA or
    /// memory is short (libvips then does it).
    static func flattened(_ bitmap: Bitmap, onto background: Colour) -> Bitmap? {
        guard bitmap.channels == 4, bitmap.width > 0, bitmap.height > 0 else { return nil }
        let pixels = bitmap.width * bitmap.height
        let (count, overflow) = pixels.multipliedReportingOverflow(by: 3)
        guard !overflow, let block = g_try_malloc(gsize(count)) else { return nil }
        let storage = PixelStorage(adopting: block, count: count)
        let colour = background.bands(3)
        let target = block.assumingMemoryBound(to: UInt8.self)
        withExtendedLifetime(bitmap) {
            let source = UnsafePointer(bitmap.storage.pointer.assumingMemoryBound(to: UInt8.self))
            for index in 0..<pixels {
                let p = source + index * 4, q = target + index * 3
                let alpha = Int(p[3]), remaining = Double(255 - alpha)
                for band in 0..<3 {
                    // libvips: (p[b] * alpha) / max_alpha + (bg[b] * nalpha) / max_alpha, assigned to uchar.
                    let value = Double(Int(p[band]) * alpha) / 255 + colour[band] * remaining / 255
                    q[band] = UInt8(min(255, max(0, value)))
                }
            }
        }
        return Bitmap(width: bitmap.width, height: bitmap.height, channels: 3, scale: bitmap.scale, storage: storage)
    }
}
