/// A decoder for one format that needs no libvips: it reads the format's
/// header itself, decides from that header whether it decodes the image
/// exactly as libvips would, and decodes it straight into pixel memory.
///
/// `CodecRegistry` holds one per format. `ImageDecoder.info` and `decode`
/// both open an input through it (`ImageDecoder.withImage`), so an image's
/// header is read once per call, by one reader: the codec's when its
/// `route(_:options:)` takes the image, libvips' otherwise. `info` and
/// `decode` therefore cannot disagree about a header. A new format is one
/// conforming type and one entry in `CodecRegistry.codecs`.
protocol DirectCodec: Sendable {
    /// What the codec read: the header, with what its decode needs from the
    /// input (the mapped bytes, or a reader positioned after the header).
    associatedtype Header

    /// Reads the header of `input`, before anything is allocated for pixels,
    /// and runs `body` with it. What the header borrows from the input (the
    /// mapped bytes, an open file) lives until `body` returns.
    ///
    /// `body` gets the header, or why libvips reads this input instead (a
    /// file too large to map, a header this codec does not understand).
    /// Throws, besides `body`'s errors, only what every decoder would answer
    /// for these bytes (a WebP whose RIFF size says it is truncated), so that
    /// `info` and `decode` in any mode give that answer, naming the input `label`.
    func withHeader<R>(
        _ input: ImageInput, options: DecodeOptions, label: String, _ body: (CodecHeader<Header>) throws(VipsError) -> R
    ) throws(VipsError) -> R

    /// The header as `ImageDecoder.info` reports it (upright size, bands, alpha, orientation).
    func info(of header: Header) -> ImageInfo

    /// Whether this codec decodes the image at all, from its header alone:
    /// `.direct` when it decodes it exactly as libvips would, at any size.
    /// Only then is `info(of:)` the image's `info`; else libvips reads the
    /// header too. Asked after the common preconditions (`DecodeRoute.preconditions`).
    func route(_ header: Header, options: DecodeOptions) -> DecodeRoute

    /// Whether this codec decodes the image for `request` (a size that needs
    /// more working memory than allowed, say). Asked only of headers
    /// `route(_:options:)` took; libvips decodes the pixels otherwise, and
    /// the header stays this codec's.
    func route(_ header: Header, for request: DecodeRequest, options: DecodeOptions) -> DecodeRoute

    /// Decodes to an upright 8-bit RGB or RGBA bitmap fitting `request.box`,
    /// exactly as the libvips fast path would; nil when the data turns out
    /// to need libvips after all (libvips then decodes it, its own way).
    /// Asked only of headers both `route`s took. The limits were checked
    /// against `info(of:)` before.
    func decode(
        _ header: Header, _ request: DecodeRequest, options: DecodeOptions, label: String
    ) throws(VipsError) -> Bitmap?

    /// Whether this codec is its format's only decoder (BMP, ICO, TGA: libvips
    /// 8.14 has no loader for them). Such a codec takes every image whose
    /// header it reads, in every mode and at every size, and throws where a
    /// codec with libvips behind it would hand over: its `withHeader` never
    /// answers `.unread`, its routes are always `.direct`, and its `decode`
    /// never returns nil. It decodes at the image's own size (for an icon, the
    /// entry that fits `request.box` best); `ImageDecoder` then fits that
    /// bitmap to the box as libvips fits any image in memory (the fast mode's
    /// bicubic reduce or `vips_thumbnail`, upscaling when asked), and the
    /// original size needs no libvips at all.
    var decodesAlone: Bool { get }
}

extension DirectCodec {
    /// Most codecs decode every size of an image they take.
    func route(_ header: Header, for request: DecodeRequest, options: DecodeOptions) -> DecodeRoute { .direct }

    /// Most codecs have libvips behind them.
    var decodesAlone: Bool { false }
}

/// A direct codec's reading of one input's header.
enum CodecHeader<Header> {
    /// The header, read.
    case read(Header)
    /// Not read by the codec, and why: libvips reads the input.
    case unread(String)
}

/// Which decoder decodes an image, and why when it is libvips.
enum DecodeRoute: Hashable, Sendable {
    /// The format's direct codec (see `DirectCodec`).
    case direct
    /// libvips, for the reason given.
    case libvips(String)

    /// The conditions every direct codec needs, whatever the format: fast
    /// shrink-on-load (quality mode is libvips' lanczos path) and no
    /// upscaling. Nil when they hold.
    static func preconditions(_ options: DecodeOptions, allowUpscale: Bool) -> DecodeRoute? {
        guard options.shrinkOnLoad == .fast else { return .libvips("quality mode uses libvips' lanczos path") }
        guard !allowUpscale else { return .libvips("upscaling") }
        return nil
    }
}

/// What one decode asks for, in pixels.
struct DecodeRequest {
    /// The box to fit (upright), or nil for the original size.
    var box: (width: Int, height: Int)?
    /// The bitmap's scale (points × scale = pixels).
    var scale: Double
    /// Whether the image may grow to fill the box.
    var allowUpscale: Bool

    /// `size` at `scale`.
    init(size: TargetSize, scale: Double, allowUpscale: Bool) {
        self.box = size.pixelBox(scale: scale)
        self.scale = scale
        self.allowUpscale = allowUpscale
    }

    /// The box clamped to an image of `info`'s (upright) size, or that size for the original:
    /// what a decode that never upscales fits.
    func clampedBox(_ info: ImageInfo) -> (width: Int, height: Int) {
        guard let box else { return (info.width, info.height) }
        return (min(box.width, info.width), min(box.height, info.height))
    }
}
