/// The BMP codec, and the only BMP decoder (libvips 8.14 reads BMP only
/// through ImageMagick, which VipsLoad never calls).
///
/// Why Swift and not GNOME's gdk-pixbuf loaders: gdk-pixbuf allocates the
/// whole pixbuf before a caller could apply `DecodeLimits` to the header it
/// has not seen, has no cancellation between rows, cannot be asked for one
/// icon entry by size, and loads its loaders as modules through a
/// loaders.cache found at run time. These formats are small and fully
/// specified, so a decoder in Swift (bounds-checked reads, checked
/// arithmetic, no unsafe indexing past what was checked) keeps the project's
/// guarantees: limits from the header before any pixel memory, typed errors,
/// cancellation between rows, and a libFuzzer target of its own
/// (`scripts/fuzz.sh bmp`).
///
/// It reads every header (`BMPHeader`) and every pixel layout
/// (`BMPPixelReader`): OS/2 1.x and 2.x, BITMAPINFOHEADER and V2–V5, 1/2/4/8-bit
/// palettes, 16/24/32 bits with bit fields (alpha when a mask says so),
/// RLE8/RLE4, top-down and bottom-up.
struct BMPCodec: RasterCodec {
    /// A BMP's header, with the bytes it was read from.
    struct Header {
        let bytes: ByteView
        let dib: BMPHeader
    }

    func readHeader(_ bytes: ByteView, label: String) throws(VipsError) -> Header {
        Header(bytes: bytes, dib: try BMPHeader(file: bytes, label: label))
    }

    func info(of header: Header) -> ImageInfo {
        let dib = header.dib
        return ImageInfo(
            storedWidth: dib.width, height: dib.height, format: .bmp, bands: dib.hasAlpha ? 4 : 3,
            hasAlpha: dib.hasAlpha, orientation: 1)
    }

    func decode(
        _ header: Header, _ request: DecodeRequest, options: DecodeOptions, label: String
    ) throws(VipsError) -> Bitmap? {
        let dib = header.dib
        let canvas = try RasterCanvas(
            width: dib.width, height: dib.height, channels: dib.hasAlpha ? 4 : 3, label: label)
        try BMPPixelReader(header: dib, bytes: header.bytes, strict: options.strict, label: label).decode(into: canvas)
        return canvas.bitmap()
    }
}
