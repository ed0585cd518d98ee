/// The direct codecs, one per format: the one table `ImageDecoder` consults
/// for both `info` and `decode`. A format without an entry (GIF, TIFF,
/// HEIF, AVIF, …) is read by libvips, and so is every image an entry's
/// codec declines (see `DirectCodec`). BMP, ICO, CUR and TGA have no
/// libvips loader: their codecs (in `Raster/`) are the only decoders
/// (`DirectCodec.decodesAlone`). A new codec is one line here.
enum CodecRegistry {
    /// Each format's direct codec.
    static let codecs: [ImageFormat: any DirectCodec] = [
        .jpeg: JPEGCodec(),
        .png: PNGCodec(),
        .webp: WebPCodec(),
        .bmp: BMPCodec(),
        .ico: ICOCodec(format: .ico),
        .cur: ICOCodec(format: .cur),
        .tga: TGACodec()
    ]

    /// The direct codec for `format`, or nil when libvips reads it.
    static func codec(for format: ImageFormat) -> (any DirectCodec)? {
        codecs[format]
    }
}
