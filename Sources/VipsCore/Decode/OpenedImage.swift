import CVipsShim

/// One input opened by `ImageDecoder.withImage`: its header read once, by
/// the format's direct codec or by libvips, and used by every step of one
/// call (`info`, the covering side of `fill`, the decode). Valid only inside
/// `withImage`'s body: it borrows the input's mapped bytes, reader or source.
enum OpenedImage {
    /// A header a direct codec read and took.
    case direct(DirectImage)
    /// A header libvips probed, with the source it reads from.
    case libvips(LibvipsHeader, UnsafeMutablePointer<VipsSource>)

    /// The image's header, as `ImageDecoder.info` reports it.
    var info: ImageInfo {
        switch self {
        case .direct(let image): return image.info
        case .libvips(let header, _): return header.info
        }
    }
}

/// An image whose header a direct codec read and whose route it took: its
/// header facts, and the codec's request route and decode bound to that
/// header (whatever the codec, so `OpenedImage` needs no generic parameter).
struct DirectImage {
    /// The header the codec read.
    let info: ImageInfo
    /// The codec's route for one request (`DirectCodec.route(_:for:options:)`).
    let route: (DecodeRequest) -> DecodeRoute
    /// The codec's decode for one request: nil hands the pixels to libvips.
    let decode: (DecodeRequest) throws(VipsError) -> Bitmap?
    /// Whether the codec is the format's only decoder (`DirectCodec.decodesAlone`).
    let decodesAlone: Bool
    /// What messages call the input.
    let label: String

    /// `header` as `codec` read it, decoding with `options`; labelled `label` in errors.
    init<Codec: DirectCodec>(_ codec: Codec, _ header: Codec.Header, options: DecodeOptions, label: String) {
        info = codec.info(of: header)
        route = { request in codec.route(header, for: request, options: options) }
        decode = { request throws(VipsError) in try codec.decode(header, request, options: options, label: label) }
        decodesAlone = codec.decodesAlone
        self.label = label
    }
}

/// A header libvips probed (no pixels decoded yet).
struct LibvipsHeader {
    /// The lazy image the loader opened.
    let image: VipsImageHandle
    /// Its header facts, as `ImageDecoder.info` reports them.
    let info: ImageInfo
    /// The loader that opened it (e.g. "jpegload_source").
    let loader: String
}
