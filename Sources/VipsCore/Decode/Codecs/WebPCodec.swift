import CWebP
import Foundation

/// The direct WebP codec: libwebp decodes with its own scaling straight into
/// the bitmap's memory, without libvips' loader, its strip pipeline, its
/// operation objects or its second header parse.
///
/// It makes the calls libvips' webpload makes (`WebPDemux` for the flags and
/// chunks, `WebPDecode` of the first frame's fragment, scaled to
/// `rint(side / shrink)` with the fast mode's shrink), so its pixels are
/// libvips' pixels; what is left after the scaling (a cubic residual reduce,
/// rare since libwebp scales to the thumbnail's size, and the EXIF rotation)
/// is done as in the direct JPEG codec. It decodes on the calling thread:
/// libvips asks libwebp for a second filtering thread per image, which only
/// adds hand-offs when VipsLoad already decodes one image per core.
///
/// It only takes files it decodes exactly as libvips would: still images
/// (lossy, lossless, with or without alpha) with no ICC profile or an sRGB
/// one, in fast mode, never upscaled. Animations, other profiles, alpha
/// images that would need a residual resize (libvips premultiplies for it)
/// and anything the demuxer refuses go to libvips, decided from the header.
struct WebPCodec: DirectCodec {
    /// A WebP's chunks, with the bytes they were read from.
    struct Header {
        let bytes: UnsafeRawBufferPointer
        let chunks: WebPHeader
    }

    /// A file is mapped whole, as libvips maps the source for libwebp.
    func withHeader<R>(
        _ input: ImageInput, options: DecodeOptions, label: String, _ body: (CodecHeader<Header>) throws(VipsError) -> R
    ) throws(VipsError) -> R {
        guard let data = input.mappedBytes() else { return try body(.unread("input not readable")) }
        return try data.withBytes { bytes throws(VipsError) in
            // libvips refuses a short file in every mode too ("unable to parse image": its demuxer
            // takes complete files only); say what it is, whichever path would have read it.
            if WebPHeader.isTruncated(bytes) {
                throw VipsError(
                    .truncatedData, "\(label): the WebP file is truncated (its RIFF header declares more bytes)")
            }
            guard let chunks = WebPHeader(bytes) else { return try body(.unread("container not understood")) }
            return try body(.read(Header(bytes: bytes, chunks: chunks)))
        }
    }

    func info(of header: Header) -> ImageInfo {
        let chunks = header.chunks
        return ImageInfo(
            storedWidth: chunks.width, height: chunks.height, format: .webp, bands: chunks.hasAlpha ? 4 : 3,
            hasAlpha: chunks.hasAlpha, orientation: chunks.orientation)
    }

    func route(_ header: Header, options: DecodeOptions) -> DecodeRoute {
        let chunks = header.chunks
        guard !chunks.isAnimated else { return .libvips("animated") }
        guard chunks.width > 0, chunks.height > 0, chunks.width <= 0x3FFF, chunks.height <= 0x3FFF else {
            return .libvips("bad image dimensions")
        }
        if let bytes = chunks.iccProfile {
            let profile = bytes.withUnsafeBytes { ICCProfile($0) }
            guard let profile, profile.colourSpace == .rgb, profile.isSRGB else {
                return .libvips("ICC profile is not sRGB")
            }
        }
        return .direct
    }

    func route(_ header: Header, for request: DecodeRequest, options: DecodeOptions) -> DecodeRoute {
        guard header.chunks.hasAlpha else { return .direct }
        let sizes = sizes(header, request, options: options)
        return sizes.scaled == sizes.output ? .direct : .libvips("alpha with a residual resize")
    }

    /// The sizes of a decode for `request`: what libwebp scales to (libvips' `rint(side × scale)`)
    /// and the output (vips_thumbnail's arithmetic), both in the stored orientation.
    private func sizes(
        _ header: Header, _ request: DecodeRequest, options: DecodeOptions
    ) -> (scaled: (width: Int, height: Int), output: (width: Int, height: Int)) {
        let chunks = header.chunks
        let own = (width: chunks.width, height: chunks.height)
        guard let box = request.box else { return (own, own) }
        let info = info(of: header)
        var scaled = own
        let allowed = options.loaderShrink(info, box: box).raster
        if allowed > 1 {
            // webpload: VIPS_RINT(canvas × scale), scale = 1 / allowed as the libvips path passes it.
            let scale = 1 / allowed
            scaled = (Int(Double(chunks.width) * scale + 0.5), Int(Double(chunks.height) * scale + 0.5))
        }
        let output = ThumbnailSize.fitting(
            width: scaled.width, height: scaled.height, into: request.clampedBox(info),
            swapped: chunks.orientation >= 5)
        return (scaled, output ?? scaled)
    }

    func decode(
        _ header: Header, _ request: DecodeRequest, options: DecodeOptions, label: String
    ) throws(VipsError) -> Bitmap? {
        let (chunks, bytes) = (header.chunks, header.bytes)
        let channels = chunks.hasAlpha ? 4 : 3
        let (scaled, output) = sizes(header, request, options: options)

        var config = WebPDecoderConfig()
        guard WebPInitDecoderConfig(&config) != 0 else {
            throw VipsError(.internal, "\(label): libwebp's decoder version does not match its headers")
        }
        config.options.use_threads = 0
        if scaled.width != chunks.width || scaled.height != chunks.height {
            config.options.use_scaling = 1
            config.options.scaled_width = Int32(scaled.width)
            config.options.scaled_height = Int32(scaled.height)
        }
        let pixels = try PixelStorage.allocate(
            width: scaled.width, height: scaled.height, channels: channels, label: label)
        config.output.colorspace = chunks.hasAlpha ? MODE_RGBA : MODE_RGB
        config.output.is_external_memory = 1
        config.output.u.RGBA.rgba = pixels.pointer.assumingMemoryBound(to: UInt8.self)
        config.output.u.RGBA.stride = Int32(scaled.width * channels)
        config.output.u.RGBA.size = pixels.count
        defer { WebPFreeDecBuffer(&config.output) }
        // The first frame's fragment (its ALPH and VP8/VP8L chunks), as webpload decodes it.
        let status: VP8StatusCode? = WebPHeader.withDemuxer(bytes) { demuxer in
            var frame = WebPIterator()
            defer { WebPDemuxReleaseIterator(&frame) }
            guard WebPDemuxGetFrame(demuxer, 1, &frame) != 0, let fragment = frame.fragment.bytes else { return nil }
            return WebPDecode(fragment, frame.fragment.size, &config)
        }
        guard let status else { return nil }
        guard status == VP8_STATUS_OK else { throw Self.error(status, label: label) }

        var result = Bitmap(
            width: scaled.width, height: scaled.height, channels: channels, scale: request.scale, storage: pixels)
        if output != scaled {
            // Only RGB gets here (see `route(_:for:options:)`): the cubic reduce of the fast path.
            result = try CubicReducer.reduced(result, width: output.width, height: output.height, label: label)
        }
        return try PixelOrientation.upright(result, orientation: chunks.orientation, label: label)
    }

    /// A typed error for libwebp's status.
    static func error(_ status: VP8StatusCode, label: String) -> VipsError {
        switch status {
        case VP8_STATUS_NOT_ENOUGH_DATA:
            return VipsError(.truncatedData, "\(label): libwebp: not enough data (the bitstream is truncated)")
        case VP8_STATUS_OUT_OF_MEMORY:
            return VipsError(.tooLarge, "\(label): libwebp: out of memory")
        case VP8_STATUS_UNSUPPORTED_FEATURE:
            return VipsError(.unsupportedFeature, "\(label): libwebp: unsupported feature")
        case VP8_STATUS_INVALID_PARAM:
            return VipsError(.corruptData, "\(label): libwebp: invalid parameter (bad image dimensions)")
        default:
            return VipsError(.corruptData, "\(label): libwebp: corrupt bitstream (status \(status.rawValue))")
        }
    }
}
