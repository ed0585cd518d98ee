import CSPNG
import CVipsShim
import Foundation

/// The direct PNG codec: each row goes straight into a streaming box shrink
/// (`BoxCubicShrinker`), without libvips' loader, its operation objects or its
/// second header parse. Image data that inflates within `PNGImageData.budget`
/// is inflated in one call by libdeflate and unfiltered row by row; larger
/// images are decoded row by row by libspng, so a large PNG never exists at
/// full size. The residual resize, the premultiplied
/// handling of alpha, the 16-bit to 8-bit step and the EXIF rotation follow
/// the libvips fast path (the same output size, the same kernel).
///
/// It takes what libvips 8.14's PNG loader (libpng) reads plainly: 1–16-bit
/// grey, RGB, palette, with alpha or tRNS (kept as alpha), no ICC profile or
/// an sRGB one, gAMA/cHRM ignored (libvips ignores them too), orientation
/// from an eXIf chunk before the image data (as libpng reads it), in fast
/// mode, never upscaled; an interlaced (Adam7) file is decoded whole first,
/// as libvips does, within a budget. Animated (APNG) files, other profiles,
/// larger interlaced files and anything libspng cannot read go to libvips,
/// decided from the header. A file that turns out damaged mid-decode goes to
/// libvips too in lenient mode (so a partial decode is libvips' own), and
/// fails typed in strict mode.
struct PNGCodec: DirectCodec {
    /// A PNG's chunks before the image data, with the libspng reader positioned after them.
    struct Header {
        let reader: PNGReader
        let chunks: PNGHeader
        /// The whole input, for the image data inflated in one call (`PNGImageData`).
        let input: ImageInput
    }

    /// The most memory the direct path's shrink may hold; a larger residual reduce streams through libvips.
    static let workingLimit = 24 << 20

    /// The largest interlaced PNG (decoded bytes) the direct path decodes whole; larger ones go to libvips.
    static let interlacedLimit = 48 << 20

    /// A file is streamed through libspng, not mapped.
    func withHeader<R>(
        _ input: ImageInput, options: DecodeOptions, label: String, _ body: (CodecHeader<Header>) throws(VipsError) -> R
    ) throws(VipsError) -> R {
        func reading(_ reader: PNGReader?) -> CodecHeader<Header> {
            guard let reader else { return .unread("input not readable") }
            guard let chunks = reader.header else { return .unread("header not understood by libspng") }
            return .read(Header(reader: reader, chunks: chunks, input: input))
        }
        switch input {
        case .file(let path):
            return try body(reading(fopen(path, "rb").flatMap { PNGReader(file: $0) }))
        case .data(let data):
            return try data.withBytes { raw throws(VipsError) in
                try body(reading(raw.baseAddress.flatMap { PNGReader(buffer: $0, count: raw.count) }))
            }
        }
    }

    func info(of header: Header) -> ImageInfo {
        let chunks = header.chunks
        return ImageInfo(
            storedWidth: chunks.width, height: chunks.height, format: .png, bands: chunks.channels,
            hasAlpha: chunks.hasAlpha, orientation: chunks.orientation)
    }

    func route(_ header: Header, options: DecodeOptions) -> DecodeRoute {
        let chunks = header.chunks
        if chunks.interlaced {
            // Adam7 passes cannot be shrunk row by row: decoded whole, as libvips does, under a budget.
            let pixelBytes = chunks.spngFormat.1 * (chunks.sixteenBit ? 2 : 1)
            let (bytes, overflow) = (chunks.width * pixelBytes).multipliedReportingOverflow(by: chunks.height)
            if overflow || bytes > Self.interlacedLimit {
                return .libvips("interlaced (Adam7) over \(Self.interlacedLimit >> 20) MiB decoded")
            }
        }
        if chunks.animated { return .libvips("animated (APNG)") }
        if let bytes = chunks.iccProfile, let profile = bytes.withUnsafeBytes({ ICCProfile($0) }), !profile.isSRGB {
            return .libvips("ICC profile is not sRGB")
        }
        return .direct
    }

    func route(_ header: Header, for request: DecodeRequest, options: DecodeOptions) -> DecodeRoute {
        let chunks = header.chunks
        let plan = plan(header, request)
        guard plan.resampled else { return .direct }
        let bytes = BoxCubicShrinker.workingBytes(
            width: chunks.width, height: chunks.height, outWidth: plan.width,
            outHeight: plan.height, channels: chunks.channels, hasAlpha: chunks.hasAlpha)
        if bytes > Self.workingLimit { return .libvips("residual reduce needs \(bytes >> 20) MiB") }
        // One box's sum of 16-bit values must fit 32 bits.
        let shrink = BoxCubicShrinker.plan(
            width: chunks.width, height: chunks.height, outWidth: plan.width,
            outHeight: plan.height, hasAlpha: chunks.hasAlpha)
        if shrink.shrinkX * shrink.shrinkY > 65_536 {
            return .libvips("box shrink of \(shrink.shrinkX)×\(shrink.shrinkY)")
        }
        return .direct
    }

    /// The output size in the stored orientation (the fast mode's arithmetic), and whether it is a resize.
    private func plan(_ header: Header, _ request: DecodeRequest) -> (width: Int, height: Int, resampled: Bool) {
        let chunks = header.chunks
        guard
            let output = ThumbnailSize.fitting(
                width: chunks.width, height: chunks.height, into: request.clampedBox(info(of: header)),
                swapped: chunks.orientation >= 5)
        else { return (chunks.width, chunks.height, false) }
        return (output.width, output.height, output.width != chunks.width || output.height != chunks.height)
    }

    func decode(
        _ header: Header, _ request: DecodeRequest, options: DecodeOptions, label: String
    ) throws(VipsError) -> Bitmap? {
        let (reader, chunks) = (header.reader, header.chunks)
        let (format, decodedChannels) = chunks.spngFormat
        let bytesPerSample = chunks.sixteenBit ? 2 : 1
        let (stride, overflow) = (chunks.width * bytesPerSample).multipliedReportingOverflow(by: decodedChannels)
        guard !overflow else { return nil }
        // Image data that inflates within a budget is inflated in one call by libdeflate and
        // unfiltered here; anything else (or anything unexpected in it) streams through libspng.
        var image = PNGImageData.inflate(header.input, header: chunks, strict: options.strict)
        // An interlaced image is decoded whole (the route keeps it under a budget), then read row by row.
        var whole: UnsafeMutableRawPointer?
        defer { g_free(whole) }
        if image == nil {
            // Lenient: the image data's chunk CRCs are not computed (about 8 % of a large PNG's
            // instructions; zlib's Adler-32 is already skipped). The header chunks, read before this,
            // were checked. Damaged data then still fails in inflate or the row filters, typed (strict)
            // or handed to libvips (lenient), or decodes to wrong pixels, as it would with a right CRC
            // over wrong bytes. Strict: every CRC is checked, a mismatch fails the decode.
            if !options.strict {
                spng_set_crc_action(reader.context, Int32(SPNG_CRC_USE.rawValue), Int32(SPNG_CRC_DISCARD.rawValue))
            }
            var flags = chunks.interlaced ? 0 : Int32(SPNG_DECODE_PROGRESSIVE.rawValue)
            if chunks.hasTRNS { flags |= Int32(SPNG_DECODE_TRNS.rawValue) }
            if chunks.interlaced {
                let (size, overflow) = stride.multipliedReportingOverflow(by: chunks.height)
                guard !overflow, let block = g_try_malloc(gsize(max(1, size))) else {
                    throw VipsError(.tooLarge, "\(label): cannot allocate \(size) bytes to deinterlace")
                }
                whole = block
                let status = spng_decode_image(reader.context, block, size, format, flags)
                if status != 0 {
                    guard options.strict else { return nil }
                    throw Self.failure(status, label: label)
                }
            } else {
                guard spng_decode_image(reader.context, nil, 0, format, flags) == 0 else { return nil }
            }
        }

        let plan = plan(header, request)
        let outChannels = chunks.hasAlpha ? 4 : 3
        let pixels = try PixelStorage.allocate(
            width: plan.width, height: plan.height, channels: outChannels, label: label)
        let rowBuffer = UnsafeMutableRawPointer.allocate(byteCount: max(1, stride), alignment: 16)
        defer { rowBuffer.deallocate() }
        var shrinker =
            plan.resampled
            ? BoxCubicShrinker(
                width: chunks.width, height: chunks.height, channels: chunks.channels, hasAlpha: chunks.hasAlpha,
                sixteenBit: chunks.sixteenBit, outWidth: plan.width, outHeight: plan.height)
            : nil
        if plan.resampled && shrinker == nil {
            throw VipsError(.tooLarge, "\(label): cannot allocate the shrink's working memory")
        }
        let target = pixels.pointer.assumingMemoryBound(to: UInt8.self)
        let cancellation = DecodeCancellation.active
        for y in 0..<chunks.height {
            // A cancelled or timed-out decode stops here, between rows (`DecodeCancellation`).
            if y & 63 == 0 { try cancellation?.check(progress: "stopped after \(y) of \(chunks.height) rows") }
            let row: UnsafeMutableRawPointer
            var status: Int32 = 0
            if let next = image?.nextRow() {
                row = next
            } else if let whole {
                row = whole + y * stride
            } else {
                row = rowBuffer
                status = spng_decode_row(reader.context, row, stride)
            }
            // The last row ends the image (SPNG_EOI); anything else is damage.
            guard status == 0 || (status == Int32(SPNG_EOI.rawValue) && y == chunks.height - 1) else {
                // Lenient: libvips decodes what is there, its own way. Strict: typed, as libvips' would be.
                guard options.strict else { return nil }
                throw Self.failure(status, label: label)
            }
            if shrinker != nil {
                shrinker?.add(row: row, stride: decodedChannels)
            } else {
                Self.convert(
                    row, chunks, decodedChannels: decodedChannels,
                    into: target + y * chunks.width * outChannels, outChannels: outChannels)
            }
        }
        shrinker?.finish(into: target)
        let decoded = Bitmap(
            width: plan.width, height: plan.height, channels: outChannels, scale: request.scale, storage: pixels)
        return try PixelOrientation.upright(decoded, orientation: chunks.orientation, label: label)
    }

    /// One full-size row to 8-bit RGB or RGBA: grey repeated, 16-bit shifted down (libvips' cast with shift).
    private static func convert(
        _ row: UnsafeRawPointer, _ chunks: PNGHeader, decodedChannels: Int,
        into target: UnsafeMutablePointer<UInt8>, outChannels: Int
    ) {
        let colours = chunks.channels - (chunks.hasAlpha ? 1 : 0)
        for x in 0..<chunks.width {
            let out = target + x * outChannels
            func sample(_ k: Int) -> UInt8 {
                chunks.sixteenBit
                    ? UInt8(
                        truncatingIfNeeded: row.load(fromByteOffset: (x * decodedChannels + k) * 2, as: UInt16.self)
                            >> 8)
                    : row.load(fromByteOffset: x * decodedChannels + k, as: UInt8.self)
            }
            if colours == 1 {
                let grey = sample(0)
                (out[0], out[1], out[2]) = (grey, grey, grey)
            } else {
                (out[0], out[1], out[2]) = (sample(0), sample(1), sample(2))
            }
            if outChannels == 4 { out[3] = sample(decodedChannels - 1) }
        }
    }

    /// A libspng failure mid-decode as a typed error: a short stream is truncation, the rest corruption.
    static func failure(_ status: Int32, label: String) -> VipsError {
        let message = spng_strerror(status).map { String(cString: $0) } ?? "libspng error \(status)"
        let truncated = [SPNG_IO_EOF, SPNG_IO_ERROR, SPNG_EOF, SPNG_EIO, SPNG_EIDAT_TOO_SHORT].map {
            Int32($0.rawValue)
        }.contains(status)
        return VipsError(truncated ? .truncatedData : .corruptData, "\(label): \(message)")
    }
}
