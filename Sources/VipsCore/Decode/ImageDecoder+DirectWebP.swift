import CVipsShim
import CWebP
import Foundation

/// The direct WebP path: libwebp decodes with its own scaling straight into
/// the bitmap's memory, without libvips' loader, its strip pipeline, its
/// operation objects or its second header parse.
///
/// It makes the calls libvips' webpload makes (`WebPDemux` for the flags and
/// chunks, `WebPDecode` of the first frame's fragment, scaled to
/// `rint(side / shrink)` with the fast mode's shrink), so its pixels are
/// libvips' pixels; what is left after the scaling (a cubic residual reduce,
/// rare since libwebp scales to the thumbnail's size, and the EXIF rotation)
/// is done as in the direct JPEG path. It decodes on the calling thread:
/// libvips asks libwebp for a second filtering thread per image, which only
/// adds hand-offs when VipsLoad already decodes one image per core.
///
/// It only takes files it decodes exactly as libvips would: still images
/// (lossy, lossless, with or without alpha) with no ICC profile or an sRGB
/// one, in fast mode, never upscaled. Animations, other profiles, alpha
/// images that would need a residual resize (libvips premultiplies for it)
/// and anything the demuxer refuses go to libvips, decided from the header.
extension ImageDecoder {
    /// Which path a WebP takes, and why when it is libvips.
    enum WebPRoute: Equatable {
        case direct
        case libvips(String)
    }

    /// What the direct path reads from a WebP's RIFF chunks (through libwebp's demuxer).
    struct WebPHeader {
        var width: Int
        var height: Int
        var hasAlpha: Bool
        var isAnimated: Bool
        var iccProfile: [UInt8]?
        /// EXIF orientation (1 when there is no EXIF chunk or no valid tag).
        var orientation: Int
    }

    /// Whether the RIFF header declares more bytes than there are: a truncated file.
    static func webpIsTruncated(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 12, bytes.starts(with: Array("RIFF".utf8)) else { return false }
        let declared = (0..<4).reduce(0) { $0 | Int(bytes[4 + $1]) << (8 * $1) }
        return declared + 8 > bytes.count
    }

    /// Reads the header as libvips' webpload does; nil when the demuxer refuses the bytes.
    static func webpHeader(_ bytes: UnsafeRawBufferPointer) -> WebPHeader? {
        withDemuxer(bytes) { demuxer in
            let flags = WebPDemuxGetI(demuxer, WEBP_FF_FORMAT_FLAGS)
            let width = Int(WebPDemuxGetI(demuxer, WEBP_FF_CANVAS_WIDTH))
            let height = Int(WebPDemuxGetI(demuxer, WEBP_FF_CANVAS_HEIGHT))
            func chunk(_ fourcc: String, _ flag: WebPFeatureFlags) -> [UInt8]? {
                guard flags & flag.rawValue != 0 else { return nil }
                var iterator = WebPChunkIterator()
                defer { WebPDemuxReleaseChunkIterator(&iterator) }
                guard WebPDemuxGetChunk(demuxer, fourcc, 1, &iterator) != 0, let base = iterator.chunk.bytes else {
                    return []
                }
                return Array(UnsafeBufferPointer(start: base, count: iterator.chunk.size))
            }
            var orientation = 1
            if let exif = chunk("EXIF", EXIF_FLAG) {
                // libvips (libexif) reads the TIFF structure with or without JPEG's "Exif\0\0" prefix.
                let prefix: [UInt8] = Array("Exif".utf8) + [0, 0]
                let tiff = exif.starts(with: prefix) ? Array(exif.dropFirst(6)) : exif
                orientation = tiff.withUnsafeBytes { EXIFOrientation.read($0) } ?? 1
            }
            return WebPHeader(
                width: width, height: height, hasAlpha: flags & ALPHA_FLAG.rawValue != 0,
                isAnimated: flags & ANIMATION_FLAG.rawValue != 0, iccProfile: chunk("ICCP", ICCP_FLAG),
                orientation: orientation)
        }
    }

    /// Runs `body` with a demuxer over `bytes` (complete files only, as libvips asks); nil when it refuses them.
    private static func withDemuxer<R>(_ bytes: UnsafeRawBufferPointer, _ body: (OpaquePointer) -> R?) -> R? {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var data = WebPData(bytes: base, size: bytes.count)
        guard let demuxer = WebPDemux(&data) else { return nil }
        defer { WebPDemuxDelete(demuxer) }
        return body(demuxer)
    }

    /// The sizes of a decode into `box`: what libwebp scales to (libvips' `rint(side × scale)`)
    /// and the output (vips_thumbnail's arithmetic), both in the stored orientation.
    private func webpSizes(
        _ header: WebPHeader, box: (width: Int, height: Int)?
    )
        -> (scaled: (width: Int, height: Int), output: (width: Int, height: Int))
    {
        let swap = header.orientation >= 5
        let info = ImageInfo(
            width: swap ? header.height : header.width, height: swap ? header.width : header.height,
            format: .webp, bands: header.hasAlpha ? 4 : 3, hasAlpha: header.hasAlpha,
            orientation: header.orientation, pages: 1)
        guard let box else { return ((header.width, header.height), (header.width, header.height)) }
        var scaled = (width: header.width, height: header.height)
        let allowed = loaderShrink(info, box: box).raster
        if allowed > 1 {
            // webpload: VIPS_RINT(canvas × scale), scale = 1 / allowed as the libvips path passes it.
            let scale = 1 / allowed
            scaled = (Int(Double(header.width) * scale + 0.5), Int(Double(header.height) * scale + 0.5))
        }
        // vips_thumbnail's output size, as in fastResidualResize (the box clamped to the image).
        let (targetWidth, targetHeight) = (min(box.width, info.width), min(box.height, info.height))
        let (boxWidth, boxHeight) = swap ? (targetHeight, targetWidth) : (targetWidth, targetHeight)
        let fit = max(Double(scaled.width) / Double(boxWidth), Double(scaled.height) / Double(boxHeight))
        guard fit > 1 else { return (scaled, scaled) }
        let output = (
            max(1, Int(Double(scaled.width) * (1 / fit) + 0.5)), max(1, Int(Double(scaled.height) * (1 / fit) + 0.5))
        )
        return (scaled, output)
    }

    /// The route for a WebP with this header (nil: refused by the demuxer) decoded into `box`.
    func webpRoute(_ header: WebPHeader?, box: (width: Int, height: Int)?, allowUpscale: Bool) -> WebPRoute {
        guard options.shrinkOnLoad == .fast else { return .libvips("quality mode uses libvips' lanczos path") }
        guard !allowUpscale else { return .libvips("upscaling") }
        guard let header else { return .libvips("container not understood") }
        guard !header.isAnimated else { return .libvips("animated") }
        guard header.width > 0, header.height > 0, header.width <= 0x3FFF, header.height <= 0x3FFF else {
            return .libvips("bad image dimensions")
        }
        if let bytes = header.iccProfile {
            let profile = bytes.withUnsafeBytes { ICCProfile($0) }
            guard let profile, profile.colourSpace == .rgb, profile.isSRGB else {
                return .libvips("ICC profile is not sRGB")
            }
        }
        if header.hasAlpha {
            let sizes = webpSizes(header, box: box)
            if sizes.scaled != sizes.output { return .libvips("alpha with a residual resize") }
        }
        return .direct
    }

    /// The route `decode` takes for a WebP input into `size`, for tests and diagnostics.
    func webpRoute(
        _ input: ImageInput, size: TargetSize = .original, scale: Double = 1, allowUpscale: Bool = false
    ) -> WebPRoute {
        let route: WebPRoute? = try? Self.withBytes(input) { bytes throws(VipsError) in
            webpRoute(Self.webpHeader(bytes), box: size.pixelBox(scale: scale), allowUpscale: allowUpscale)
        }
        return route ?? .libvips("input not readable")
    }

    /// Decodes a WebP on the direct path; nil when the file must go to libvips instead.
    func decodeWebPDirectly(
        _ input: ImageInput, box: (width: Int, height: Int)?, scale: Double,
        allowUpscale: Bool
    ) throws(VipsError) -> Bitmap? {
        let label = name(of: input)
        // Mapped whole, as libvips maps the source for libwebp.
        guard let data = Self.mappedBytes(input) else { return nil }
        return try Self.withBytes(.data(data)) { raw throws(VipsError) in
            try decodeWebPDirectly(raw, box: box, scale: scale, allowUpscale: allowUpscale, label: label)
        }
    }

    private func decodeWebPDirectly(
        _ bytes: UnsafeRawBufferPointer, box: (width: Int, height: Int)?, scale: Double,
        allowUpscale: Bool, label: String
    ) throws(VipsError) -> Bitmap? {
        // libvips refuses a short file in every mode too ("unable to parse image": its demuxer
        // takes complete files only); say what it is, whichever path would have decoded it.
        if Self.webpIsTruncated(bytes) {
            throw VipsError(
                .truncatedData, "\(label): the WebP file is truncated (its RIFF header declares more bytes)")
        }
        let header = Self.webpHeader(bytes)
        guard webpRoute(header, box: box, allowUpscale: allowUpscale) == .direct, let header else { return nil }
        let orientation = header.orientation
        let swap = orientation >= 5
        let channels = header.hasAlpha ? 4 : 3
        let info = ImageInfo(
            width: swap ? header.height : header.width, height: swap ? header.width : header.height,
            format: .webp, bands: channels, hasAlpha: header.hasAlpha, orientation: orientation, pages: 1)
        // Limits from the header, before libwebp allocates anything.
        try options.limits.check(info, label: label)
        let (scaled, output) = webpSizes(header, box: box)

        var config = WebPDecoderConfig()
        guard WebPInitDecoderConfig(&config) != 0 else {
            throw VipsError(.internal, "\(label): libwebp's decoder version does not match its headers")
        }
        config.options.use_threads = 0
        if scaled.width != header.width || scaled.height != header.height {
            config.options.use_scaling = 1
            config.options.scaled_width = Int32(scaled.width)
            config.options.scaled_height = Int32(scaled.height)
        }
        let pixels = try Self.allocate(scaled.width, scaled.height, channels: channels, label: label)
        let rowBytes = scaled.width * channels
        config.output.colorspace = header.hasAlpha ? MODE_RGBA : MODE_RGB
        config.output.is_external_memory = 1
        config.output.u.RGBA.rgba = pixels.pointer.assumingMemoryBound(to: UInt8.self)
        config.output.u.RGBA.stride = Int32(rowBytes)
        config.output.u.RGBA.size = pixels.count
        defer { WebPFreeDecBuffer(&config.output) }
        // The first frame's fragment (its ALPH and VP8/VP8L chunks), as webpload decodes it.
        let status: VP8StatusCode? = Self.withDemuxer(bytes) { demuxer in
            var frame = WebPIterator()
            defer { WebPDemuxReleaseIterator(&frame) }
            guard WebPDemuxGetFrame(demuxer, 1, &frame) != 0, let fragment = frame.fragment.bytes else { return nil }
            return WebPDecode(fragment, frame.fragment.size, &config)
        }
        guard let status else { return nil }
        guard status == VP8_STATUS_OK else { throw Self.webpError(status, label: label) }

        var (width, height) = scaled
        var result = pixels
        if output != scaled {
            // Only RGB gets here (see webpRoute): the cubic reduce of today's fast path.
            let reduced = try Self.allocate(output.width, output.height, channels: 3, label: label)
            CubicReducer.reduce(
                result.pointer.assumingMemoryBound(to: UInt8.self), width: width, height: height,
                into: reduced.pointer.assumingMemoryBound(to: UInt8.self),
                outWidth: output.width, outHeight: output.height)
            (result, width, height) = (reduced, output.width, output.height)
        }
        if orientation != 1 {
            let upright = try Self.allocate(width, height, channels: channels, label: label)
            PixelOrientation.orient(
                result.pointer.assumingMemoryBound(to: UInt8.self), width: width, height: height, channels: channels,
                orientation: orientation, into: upright.pointer.assumingMemoryBound(to: UInt8.self))
            if swap { (width, height) = (height, width) }
            result = upright
        }
        return Bitmap(width: width, height: height, channels: channels, scale: scale, storage: result)
            .withSource(BitmapSource(info: info, decodedLeniently: false))
    }

    /// A typed error for libwebp's status.
    static func webpError(_ status: VP8StatusCode, label: String) -> VipsError {
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

    /// Storage for `width`×`height` pixels of `channels` bytes.
    private static func allocate(
        _ width: Int, _ height: Int, channels: Int, label: String
    ) throws(VipsError) -> PixelStorage {
        let (size, overflow) = (width * channels).multipliedReportingOverflow(by: height)
        guard width > 0, height > 0, !overflow, let block = g_try_malloc(gsize(size)) else {
            throw VipsError(.tooLarge, "\(label): cannot allocate \(width)×\(height)×\(channels) pixels")
        }
        return PixelStorage(adopting: block, count: size)
    }
}
