import Foundation

/// The ICO and CUR codec, and the only decoder of either (libvips 8.14 has
/// no loader for them; why Swift, see `BMPCodec`). It reads the directory
/// (`ICODirectory`), takes the entry that best fits the requested box (the
/// original size takes the largest), decodes a PNG entry with the direct PNG
/// path and a BMP entry with `BMPPixelReader`, applying its AND mask as
/// alpha (a 32-bit entry carries its own alpha instead).
struct ICOCodec: RasterCodec {
    /// `.ico` or `.cur`.
    let format: ImageFormat

    /// A directory, with the bytes it was read from.
    struct Header {
        let bytes: ByteView
        let directory: ICODirectory
    }

    func readHeader(_ bytes: ByteView, label: String) throws(VipsError) -> Header {
        Header(bytes: bytes, directory: try ICODirectory(bytes, format: format, label: label))
    }

    /// The largest entry's size: what the original size decodes, and what the limits are checked against.
    func info(of header: Header) -> ImageInfo {
        let entry = header.directory.largest
        return ImageInfo(
            storedWidth: entry.width, height: entry.height, format: format, bands: 4, hasAlpha: true, orientation: 1)
    }

    func decode(
        _ header: Header, _ request: DecodeRequest, options: DecodeOptions, label: String
    ) throws(VipsError) -> Bitmap? {
        let entry = header.directory.entry(fitting: request.box)
        // From the entry's start to the file's end: writers get the entry's byte count wrong
        // (too small), and Pillow and Windows read on regardless.
        let payload = header.bytes.tail(from: entry.offset)
        guard let dib = entry.dib else {
            return try decodePNG(payload, options: options, label: label)
        }
        let canvas = try RasterCanvas(width: dib.width, height: dib.height, channels: 4, label: label)
        try BMPPixelReader(header: dib, bytes: payload, strict: options.strict, label: label).decode(into: canvas)
        if !dib.hasAlpha { try applyMask(dib, payload, canvas, strict: options.strict, label: label) }
        return canvas.bitmap()
    }

    /// A PNG entry, through the direct PNG path (libvips' PNG loader when that declines it).
    private func decodePNG(_ payload: ByteView, options: DecodeOptions, label: String) throws(VipsError) -> Bitmap {
        var inner = options
        inner.allowedFormats = [.png]
        var decoder = ImageDecoder(options: inner)
        decoder.inputName = label
        let bitmap = try decoder.decode(.data(Data(payload.bytes)))
        // The inner decode took its own warnings: a damaged entry marks the icon's decode too.
        if bitmap.source?.decodedLeniently == true {
            VipsRuntime.countWarning("\(label): the \(format) entry's PNG is damaged")
        }
        return bitmap
    }

    /// The AND mask after the colour rows: 1 bit a pixel, rows padded to 4
    /// bytes, stored in the DIB's row order; a set bit is a transparent pixel.
    private func applyMask(
        _ dib: BMPHeader, _ payload: ByteView, _ canvas: RasterCanvas, strict: Bool, label: String
    ) throws(VipsError) {
        let stride = (dib.width + 31) / 32 * 4
        let (colourBytes, overflow) = dib.stride.multipliedReportingOverflow(by: dib.height)
        guard !overflow else { return }
        let start = dib.pixelOffset + colourBytes
        for index in 0..<dib.height {
            guard let row = payload.slice(start + index * stride, stride) else {
                // No mask (or a short one): the rest stays opaque.
                try tolerate(
                    VipsError(.truncatedData, "\(label): the \(format) entry's AND mask is cut short"), strict: strict)
                return
            }
            let y = dib.topDown ? index : dib.height - 1 - index
            for x in 0..<dib.width where row.bytes[x / 8] & (0x80 >> UInt8(x % 8)) != 0 {
                canvas.setAlpha(x, y, 0)
            }
        }
    }
}
