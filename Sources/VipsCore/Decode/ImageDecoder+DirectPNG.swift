import CSPNG
import CVipsShim
import Foundation

/// The direct PNG path: libspng decodes row by row and each row goes
/// straight into a streaming box shrink (`BoxCubicShrinker`), so a large PNG
/// never exists at full size, without libvips' loader, its operation objects
/// or its second header parse. The residual resize, the premultiplied
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
extension ImageDecoder {
    /// Which path a PNG takes, and why when it is libvips.
    enum PNGRoute: Equatable {
        case direct
        case libvips(String)
    }

    /// The most memory the direct path's shrink may hold; a larger residual reduce streams through libvips.
    static let directPNGWorkingLimit = 24 << 20

    /// The largest interlaced PNG (decoded bytes) the direct path decodes whole; larger ones go to libvips.
    static let directPNGInterlacedLimit = 48 << 20

    /// The route `decode` takes for a PNG input, for tests and diagnostics.
    func pngRoute(
        _ input: ImageInput, size: TargetSize = .maxPixelSize(256), scale: Double = 1,
        allowUpscale: Bool = false
    ) -> PNGRoute {
        let route: PNGRoute?? = try? Self.withPNGReader(input, strict: options.strict) { reader throws(VipsError) in
            pngRoute(reader, box: size.pixelBox(scale: scale), allowUpscale: allowUpscale)
        }
        return (route ?? nil) ?? .libvips("input not readable")
    }

    private func pngRoute(_ reader: PNGReader, box: (width: Int, height: Int)?, allowUpscale: Bool) -> PNGRoute {
        guard options.shrinkOnLoad == .fast else { return .libvips("quality mode uses libvips' lanczos path") }
        guard !allowUpscale else { return .libvips("upscaling") }
        guard let header = reader.header else { return .libvips("header not understood by libspng") }
        if header.interlaced {
            // Adam7 passes cannot be shrunk row by row: decoded whole, as libvips does, under a budget.
            let pixelBytes = header.spngFormat.1 * (header.sixteenBit ? 2 : 1)
            let (bytes, overflow) = (header.width * pixelBytes).multipliedReportingOverflow(by: header.height)
            if overflow || bytes > Self.directPNGInterlacedLimit {
                return .libvips("interlaced (Adam7) over \(Self.directPNGInterlacedLimit >> 20) MiB decoded")
            }
        }
        if header.animated { return .libvips("animated (APNG)") }
        if let bytes = header.iccProfile, let profile = bytes.withUnsafeBytes({ ICCProfile($0) }), !profile.isSRGB {
            return .libvips("ICC profile is not sRGB")
        }
        if let box {
            let plan = pngPlan(header, box: box)
            if plan.resampled {
                let bytes = BoxCubicShrinker.workingBytes(
                    width: header.width, height: header.height, outWidth: plan.width,
                    outHeight: plan.height, channels: header.channels, hasAlpha: header.hasAlpha)
                if bytes > Self.directPNGWorkingLimit { return .libvips("residual reduce needs \(bytes >> 20) MiB") }
                // One box's sum of 16-bit values must fit 32 bits.
                let shrink = BoxCubicShrinker.plan(
                    width: header.width, height: header.height, outWidth: plan.width,
                    outHeight: plan.height, hasAlpha: header.hasAlpha)
                if shrink.shrinkX * shrink.shrinkY > 65_536 {
                    return .libvips("box shrink of \(shrink.shrinkX)×\(shrink.shrinkY)")
                }
            }
        }
        return .direct
    }

    /// The output size in the stored orientation (today's fast-mode arithmetic), and whether it is a resize.
    private func pngPlan(
        _ header: PNGHeader, box: (width: Int, height: Int)?
    ) -> (width: Int, height: Int, resampled: Bool) {
        guard let box else { return (header.width, header.height, false) }
        let swap = header.orientation >= 5
        let (displayWidth, displayHeight) = swap ? (header.height, header.width) : (header.width, header.height)
        let (targetWidth, targetHeight) = (min(box.width, displayWidth), min(box.height, displayHeight))
        let (boxWidth, boxHeight) = swap ? (targetHeight, targetWidth) : (targetWidth, targetHeight)
        let fit = max(Double(header.width) / Double(boxWidth), Double(header.height) / Double(boxHeight))
        guard fit > 1 else { return (header.width, header.height, false) }
        let (outWidth, outHeight) = (
            max(1, Int(Double(header.width) * (1 / fit) + 0.5)),
            max(1, Int(Double(header.height) * (1 / fit) + 0.5))
        )
        return (outWidth, outHeight, outWidth != header.width || outHeight != header.height)
    }

    /// Decodes a PNG on the direct path; nil when the file must go to libvips instead.
    func decodePNGDirectly(
        _ input: ImageInput, box: (width: Int, height: Int)?, scale: Double,
        allowUpscale: Bool
    ) throws(VipsError) -> Bitmap? {
        let label = name(of: input)
        let result: Bitmap?? = try Self.withPNGReader(input, strict: options.strict) { reader throws(VipsError) in
            guard pngRoute(reader, box: box, allowUpscale: allowUpscale) == .direct, let header = reader.header else {
                return nil
            }
            return try decodePNG(reader, header: header, box: box, scale: scale, label: label)
        }
        return result ?? nil
    }

    private func decodePNG(
        _ reader: PNGReader, header: PNGHeader, box: (width: Int, height: Int)?, scale: Double,
        label: String
    ) throws(VipsError) -> Bitmap? {
        let orientation = header.orientation
        let swap = orientation >= 5
        let info = ImageInfo(
            width: swap ? header.height : header.width, height: swap ? header.width : header.height,
            format: .png, bands: header.channels, hasAlpha: header.hasAlpha, orientation: orientation, pages: 1)
        // Limits from the header, before anything is allocated for pixels.
        try options.limits.check(info, label: label)

        let (format, decodedChannels) = header.spngFormat
        let bytesPerSample = header.sixteenBit ? 2 : 1
        let (stride, overflow) = (header.width * bytesPerSample).multipliedReportingOverflow(by: decodedChannels)
        guard !overflow else { return nil }
        var flags = header.interlaced ? 0 : Int32(SPNG_DECODE_PROGRESSIVE.rawValue)
        if header.hasTRNS { flags |= Int32(SPNG_DECODE_TRNS.rawValue) }
        // An interlaced image is decoded whole (the route keeps it under a budget), then read row by row.
        var whole: UnsafeMutableRawPointer?
        defer { g_free(whole) }
        if header.interlaced {
            let (size, overflow) = stride.multipliedReportingOverflow(by: header.height)
            guard !overflow, let block = g_try_malloc(gsize(max(1, size))) else {
                throw VipsError(.tooLarge, "\(label): cannot allocate \(size) bytes to deinterlace")
            }
            whole = block
            let status = spng_decode_image(reader.context, block, size, format, flags)
            if status != 0 {
                guard options.strict else { return nil }
                throw Self.pngFailure(status, label: label)
            }
        } else {
            guard spng_decode_image(reader.context, nil, 0, format, flags) == 0 else { return nil }
        }

        let plan = pngPlan(header, box: box)
        let outChannels = header.hasAlpha ? 4 : 3
        var (outWidth, outHeight) = (plan.width, plan.height)
        var pixels = try Self.allocatePNG(outWidth, outHeight, outChannels, label: label)
        let row = UnsafeMutableRawPointer.allocate(byteCount: max(1, stride), alignment: 16)
        defer { row.deallocate() }
        var shrinker =
            plan.resampled
            ? BoxCubicShrinker(
                width: header.width, height: header.height, channels: header.channels, hasAlpha: header.hasAlpha,
                sixteenBit: header.sixteenBit, outWidth: outWidth, outHeight: outHeight)
            : nil
        let target = pixels.pointer.assumingMemoryBound(to: UInt8.self)
        let cancellation = DecodeCancellation.active
        for y in 0..<header.height {
            // A cancelled or timed-out decode stops here, between rows (`DecodeCancellation`).
            if y & 63 == 0 { try cancellation?.check(progress: "stopped after \(y) of \(header.height) rows") }
            let row = whole.map { $0 + y * stride } ?? row
            let status = whole == nil ? spng_decode_row(reader.context, row, stride) : 0
            // The last row ends the image (SPNG_EOI); anything else is damage.
            guard status == 0 || (status == Int32(SPNG_EOI.rawValue) && y == header.height - 1) else {
                // Lenient: libvips decodes what is there, its own way. Strict: typed, as libvips' would be.
                guard options.strict else { return nil }
                throw Self.pngFailure(status, label: label)
            }
            if shrinker != nil {
                shrinker?.add(row: row, stride: decodedChannels)
            } else {
                Self.convertPNGRow(
                    row, header: header, decodedChannels: decodedChannels,
                    into: target + y * header.width * outChannels, outChannels: outChannels)
            }
        }
        shrinker?.finish(into: target)
        if orientation != 1 {
            let upright = try Self.allocatePNG(outWidth, outHeight, outChannels, label: label)
            PixelOrientation.orient(
                target, width: outWidth, height: outHeight, channels: outChannels, orientation: orientation,
                into: upright.pointer.assumingMemoryBound(to: UInt8.self))
            if swap { (outWidth, outHeight) = (outHeight, outWidth) }
            pixels = upright
        }
        return Bitmap(width: outWidth, height: outHeight, channels: outChannels, scale: scale, storage: pixels)
            .withSource(BitmapSource(info: info, decodedLeniently: false))
    }

    /// One full-size row to 8-bit RGB or RGBA: grey repeated, 16-bit shifted down (libvips' cast with shift).
    private static func convertPNGRow(
        _ row: UnsafeRawPointer, header: PNGHeader, decodedChannels: Int,
        into target: UnsafeMutablePointer<UInt8>, outChannels: Int
    ) {
        let colours = header.channels - (header.hasAlpha ? 1 : 0)
        for x in 0..<header.width {
            let out = target + x * outChannels
            func sample(_ k: Int) -> UInt8 {
                header.sixteenBit
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
    static func pngFailure(_ status: Int32, label: String) -> VipsError {
        let message = spng_strerror(status).map { String(cString: $0) } ?? "libspng error \(status)"
        let truncated = [SPNG_IO_EOF, SPNG_IO_ERROR, SPNG_EOF, SPNG_EIO, SPNG_EIDAT_TOO_SHORT].map {
            Int32($0.rawValue)
        }.contains(status)
        return VipsError(truncated ? .truncatedData : .corruptData, "\(label): \(message)")
    }

    private static func allocatePNG(
        _ width: Int, _ height: Int, _ channels: Int, label: String
    ) throws(VipsError) -> PixelStorage {
        let (size, overflow) = (width * channels).multipliedReportingOverflow(by: height)
        guard !overflow, let block = g_try_malloc(gsize(max(1, size))) else {
            throw VipsError(.tooLarge, "\(label): cannot allocate \(width)×\(height)×\(channels) pixels")
        }
        return PixelStorage(adopting: block, count: size)
    }

    /// Runs `body` with a libspng reader over the input (a file is streamed, not mapped); nil when
    /// libspng cannot even start (libvips' path then reads and reports it).
    static func withPNGReader<R>(
        _ input: ImageInput, strict: Bool,
        _ body: (PNGReader) throws(VipsError) -> R
    ) throws(VipsError) -> R? {
        switch input {
        case .file(let path):
            guard let file = fopen(path, "rb") else { return nil }
            guard let reader = PNGReader(file: file) else { return nil }
            return try body(reader)
        case .data(let data):
            let result: Result<R, VipsError>? = data.withUnsafeBytes { raw in
                guard let base = raw.baseAddress, let reader = PNGReader(buffer: base, count: raw.count) else {
                    return nil
                }
                do throws(VipsError) { return .success(try body(reader)) } catch { return .failure(error) }
            }
            return try result?.get()
        }
    }
}

/// What the direct path needs from a PNG's chunks before the image data.
struct PNGHeader {
    var width: Int, height: Int
    var bitDepth: Int, colourType: Int
    var interlaced: Bool
    var hasTRNS: Bool
    /// An acTL chunk: an APNG.
    var animated: Bool
    var iccProfile: Data?
    /// From an eXIf chunk before IDAT (1 without one), as libvips reads it.
    var orientation: Int

    var sixteenBit: Bool { bitDepth == 16 }
    var grey: Bool { colourType == 0 || colourType == 4 }
    /// Alpha as libvips' loader gives it: an alpha channel, or tRNS expanded to one.
    var hasAlpha: Bool { colourType == 4 || colourType == 6 || hasTRNS }
    /// Bands of the image libvips would load (palette expanded).
    var channels: Int { (grey ? 1 : 3) + (hasAlpha ? 1 : 0) }

    /// The libspng output format and its channels per pixel (16-bit formats always carry alpha).
    var spngFormat: (Int32, Int) {
        // libspng 0.7's GA formats do not take grey + alpha files; their own layout is GA already
        // (host-endian at 16 bits).
        if colourType == 4 { return (Int32(SPNG_FMT_PNG.rawValue), 2) }
        if sixteenBit { return grey ? (Int32(SPNG_FMT_GA16.rawValue), 2) : (Int32(SPNG_FMT_RGBA16.rawValue), 4) }
        if grey { return hasAlpha ? (Int32(SPNG_FMT_GA8.rawValue), 2) : (Int32(SPNG_FMT_G8.rawValue), 1) }
        return hasAlpha ? (Int32(SPNG_FMT_RGBA8.rawValue), 4) : (Int32(SPNG_FMT_RGB8.rawValue), 3)
    }
}

/// A libspng decoder context over one input, freed (with its file) when the reader goes.
final class PNGReader {
    let context: OpaquePointer
    private let file: UnsafeMutablePointer<FILE>?
    /// The header, or nil when libspng could not read it.
    private(set) var header: PNGHeader?

    /// A reader of `file`, which it owns from here (closed even when this fails).
    convenience init?(file: UnsafeMutablePointer<FILE>) {
        guard let context = spng_ctx_new(Int32(SPNG_CTX_IGNORE_ADLER32.rawValue)) else { fclose(file); return nil }
        self.init(context: context, file: file)
        guard spng_set_png_file(context, file) == 0 else { return nil }
        let fd = fileno(file)
        header =
            Self.chunkTypesAreLetters { offset, buffer in pread(fd, buffer, 8, off_t(offset)) == 8 }
            ? readHeader() : nil
    }

    /// A reader of `count` bytes at `buffer`, which must outlive it.
    convenience init?(buffer: UnsafeRawPointer, count: Int) {
        guard let context = spng_ctx_new(Int32(SPNG_CTX_IGNORE_ADLER32.rawValue)) else { return nil }
        self.init(context: context, file: nil)
        guard spng_set_png_buffer(context, buffer, count) == 0 else { return nil }
        header =
            Self.chunkTypesAreLetters { offset, target in
                guard offset <= count - 8 else { return false }
                target.copyMemory(from: buffer + offset, byteCount: 8)
                return true
            } ? readHeader() : nil
    }

    private init(context: OpaquePointer, file: UnsafeMutablePointer<FILE>?) {
        self.context = context
        self.file = file
        // Ancillary chunks as libvips allows them (50 MB each), a bounded total; acTL is an
        // unknown chunk to libspng, kept so an APNG can be told.
        spng_set_chunk_limits(context, 50 << 20, 64 << 20)
        spng_set_option(context, SPNG_KEEP_UNKNOWN_CHUNKS, 1)
    }

    deinit {
        spng_ctx_free(context)
        if let file { fclose(file) }
    }

    /// Whether every chunk before the image data has a type of four ASCII letters.
    /// libpng refuses any other ("invalid chunk type"), so libvips' probe and decode
    /// fail on it, where libspng skips it: such a file is left to libvips, so that
    /// `info` and `decode` agree. `read(offset, buffer)` fills 8 bytes (a chunk's
    /// length and type) or returns false at the end; the walk stops there, at IDAT
    /// or at a length libspng will refuse itself.
    private static func chunkTypesAreLetters(_ read: (Int, UnsafeMutableRawPointer) -> Bool) -> Bool {
        let letters = { (byte: UInt8) in (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) }
        var header = [UInt8](repeating: 0, count: 8)
        var offset = 8
        for _ in 0..<100_000 {
            guard header.withUnsafeMutableBytes({ read(offset, $0.baseAddress!) }) else { return true }
            let length = header[0..<4].reduce(0) { $0 << 8 | Int($1) }
            let type = header[4..<8]
            guard type.allSatisfy(letters) else { return false }
            if type.elementsEqual("IDAT".utf8) || length > Int(Int32.max) { return true }
            offset += 12 + length
        }
        return true
    }

    /// IHDR and the chunks before IDAT; nil when libspng refuses them.
    private func readHeader() -> PNGHeader? {
        var ihdr = spng_ihdr()
        guard spng_get_ihdr(context, &ihdr) == 0, ihdr.width > 0, ihdr.height > 0 else { return nil }
        var trns = spng_trns()
        let hasTRNS = spng_get_trns(context, &trns) == 0
        var iccp = spng_iccp()
        var profile: Data?
        if spng_get_iccp(context, &iccp) == 0, let bytes = iccp.profile, iccp.profile_len > 0 {
            profile = Data(bytes: bytes, count: iccp.profile_len)
        }
        var orientation = 1
        var exif = spng_exif()
        if spng_get_exif(context, &exif) == 0, let bytes = exif.data, exif.length > 0 {
            orientation = EXIFOrientation.read(UnsafeRawBufferPointer(start: bytes, count: exif.length)) ?? 1
        }
        var animated = false
        var count: UInt32 = 0
        if spng_get_unknown_chunks(context, nil, &count) == 0, count > 0, count < 10_000 {
            var chunks = [spng_unknown_chunk](repeating: spng_unknown_chunk(), count: Int(count))
            if spng_get_unknown_chunks(context, &chunks, &count) == 0 {
                animated = chunks.prefix(Int(count)).contains { $0.type == (0x61, 0x63, 0x54, 0x4C) } // "acTL"
            }
        }
        return PNGHeader(
            width: Int(ihdr.width), height: Int(ihdr.height), bitDepth: Int(ihdr.bit_depth),
            colourType: Int(ihdr.color_type), interlaced: ihdr.interlace_method != 0, hasTRNS: hasTRNS,
            animated: animated, iccProfile: profile, orientation: orientation)
    }
}
