import CTurboJPEG
import CVipsShim
import Foundation

/// The direct JPEG path: libjpeg-turbo (through its TurboJPEG API) decodes
/// with DCT-domain scaling straight into pixel memory, without libvips'
/// loader, its operation objects or its second header parse. What is left
/// after the scaling (a bicubic reduce, the EXIF rotation) is done exactly as
/// in the libvips fast path (the same size, the same cubic kernel, see
/// `CubicReducer`), and none of it touches libvips.
///
/// It only takes files it decodes exactly as libvips would: 8-bit
/// Huffman-coded (baseline, extended or progressive) grey or YCbCr/RGB
/// frames, with no ICC profile or an sRGB one, in fast mode, never
/// upscaled. Everything else (CMYK/YCCK, other profiles, arithmetic coding,
/// 12-bit, lossless, markers this reader does not understand) is sent to
/// libvips, decided from the header before any pixel is decoded.
extension ImageDecoder {
    /// Which path a JPEG takes, and why when it is libvips.
    enum JPEGRoute: Equatable {
        case direct
        case libvips(String)
    }

    /// The route for a JPEG with these markers (nil: not understood) under these options.
    func jpegRoute(_ header: JPEGHeader?, allowUpscale: Bool) -> JPEGRoute {
        guard options.shrinkOnLoad == .fast else { return .libvips("quality mode uses libvips' lanczos path") }
        guard !allowUpscale else { return .libvips("upscaling") }
        guard let header else { return .libvips("markers not understood") }
        guard header.isHuffman else {
            let arithmetic = [0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF].contains(header.frameMarker)
            return .libvips(arithmetic ? "arithmetic coding" : "lossless or hierarchical frame")
        }
        guard header.precision == 8 else { return .libvips("\(header.precision)-bit samples") }
        guard header.components == 1 || header.components == 3 else {
            return .libvips(header.components == 4 ? "CMYK or YCCK" : "\(header.components) components")
        }
        guard header.adobeTransform != 2 else { return .libvips("YCCK") }
        guard header.width > 0, header.height > 0 else { return .libvips("no size in the frame header") }
        if header.iccMalformed { return .libvips("ICC profile chunks malformed") }
        if let bytes = header.iccProfile {
            let profile = bytes.withUnsafeBytes { ICCProfile($0) }
            let expected: ICCProfile.ColourSpace = header.components == 1 ? .grey : .rgb
            guard let profile, profile.colourSpace == expected, profile.isSRGB else {
                return .libvips("ICC profile is not sRGB")
            }
        }
        return .direct
    }

    /// The largest JPEG file the direct path maps whole (larger ones stream through libvips).
    static let directFileLimit = 8 << 20

    /// The route `decode` takes for a JPEG input, for tests and diagnostics.
    func jpegRoute(_ input: ImageInput, allowUpscale: Bool = false) -> JPEGRoute {
        if case .file(let path) = input {
            var status = stat()
            if stat(path, &status) == 0, Int(status.st_size) > Self.directFileLimit {
                return .libvips("file larger than \(Self.directFileLimit >> 20) MiB (streamed)")
            }
        }
        let route: JPEGRoute? = try? Self.withBytes(input) { bytes throws(VipsError) in
            jpegRoute(JPEGHeader(bytes), allowUpscale: allowUpscale)
        }
        return route ?? .libvips("input not readable")
    }

    /// Decodes a JPEG on the direct path; nil when the file must go to libvips instead.
    func decodeJPEGDirectly(
        _ input: ImageInput, box: (width: Int, height: Int)?, scale: Double,
        allowUpscale: Bool
    ) throws(VipsError) -> Bitmap? {
        let label = name(of: input)
        // Mapped pages count in the resident set until the decode ends, so a large file goes
        // to libvips, which streams it through a small buffer.
        guard let data = Self.mappedBytes(input, upTo: Self.directFileLimit) else { return nil }
        return try Self.withBytes(.data(data)) { raw throws(VipsError) in
            try decodeJPEGDirectly(raw, box: box, scale: scale, allowUpscale: allowUpscale, label: label)
        }
    }

    private func decodeJPEGDirectly(
        _ bytes: UnsafeRawBufferPointer, box: (width: Int, height: Int)?, scale: Double,
        allowUpscale: Bool, label: String
    ) throws(VipsError) -> Bitmap? {
        let header = JPEGHeader(bytes)
        guard jpegRoute(header, allowUpscale: allowUpscale) == .direct, let header else { return nil }
        let orientation = header.orientation
        let swap = orientation >= 5
        let info = ImageInfo(
            width: swap ? header.height : header.width, height: swap ? header.width : header.height,
            format: .jpeg, bands: header.components, hasAlpha: false, orientation: orientation, pages: 1)
        // Limits from the header, before TurboJPEG allocates anything.
        try options.limits.check(info, label: label)

        guard let handle = tjInitDecompress() else { return nil }
        defer { tjDestroy(handle) }
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colourspace: Int32 = 0
        // TurboJPEG's own view of the header must agree with ours; if not, libvips decides.
        guard tjDecompressHeader3(handle, base, UInt(bytes.count), &width, &height, &subsampling, &colourspace) == 0,
            Int(width) == header.width, Int(height) == header.height,
            colourspace == Int32(TJCS_YCbCr.rawValue) || colourspace == Int32(TJCS_GRAY.rawValue)
                || colourspace == Int32(TJCS_RGB.rawValue)
        else { return nil }

        // Today's fast-mode arithmetic: the same DCT shrink and the same output size.
        var shrink = 1
        var (targetWidth, targetHeight) = (info.width, info.height)
        if let box {
            (targetWidth, targetHeight) = (min(box.width, info.width), min(box.height, info.height))
            shrink = Self.jpegShrink(allowed: loaderShrink(info, box: box).raster) ?? 1
        }
        // A progressive file decoded at 1/8 needs only its DC scans (see ProgressiveJPEGFilter).
        let shortened =
            shrink == 8 && header.isProgressive && !options.strict ? ProgressiveJPEGFilter.dcOnly(bytes) : nil
        let scaledWidth = (header.width + shrink - 1) / shrink, scaledHeight = (header.height + shrink - 1) / shrink
        let rowBytes = scaledWidth * 3
        let (size, overflow) = rowBytes.multipliedReportingOverflow(by: scaledHeight)
        guard !overflow, let block = g_try_malloc(gsize(size)) else {
            throw VipsError(.tooLarge, "\(label): cannot allocate \(scaledWidth)×\(scaledHeight)×3 pixels")
        }
        // Owned from here: freed on every error below.
        let storage = PixelStorage(adopting: block, count: size)
        // More than 500 scans is a known denial-of-service shape, not a real file.
        let flags = TJFLAG_LIMITSCANS | (options.strict ? TJFLAG_STOPONWARNING : 0)
        func decompress(_ raw: UnsafeRawBufferPointer) -> Int32 {
            tjDecompress2(
                handle, raw.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt(raw.count),
                block.assumingMemoryBound(to: UInt8.self), Int32(scaledWidth), Int32(rowBytes),
                Int32(scaledHeight), Int32(TJPF_RGB.rawValue), flags)
        }
        let status = shortened.map { $0.withUnsafeBytes(decompress) } ?? decompress(bytes)
        if status != 0 {
            let message = tjGetErrorStr2(handle).map { String(cString: $0) } ?? "libjpeg-turbo gave no reason"
            // A warning (corrupt or truncated data libjpeg could work around) leaves a
            // full image: lenient mode keeps it, as libvips does; strict mode fails.
            if tjGetErrorCode(handle) != Int32(TJERR_WARNING.rawValue) || options.strict {
                // libjpeg's "Corrupt JPEG data: premature end of data segment" is garbage in a
                // scan, not a short file (that is "Premature end of JPEG file").
                let corrupt = message.lowercased().hasPrefix("corrupt jpeg data")
                throw VipsError(corrupt ? .corruptData : Self.kind(forDecodeFailure: message), "\(label): \(message)")
            }
            VipsRuntime.countWarning(message)
        }
        // libvips' JPEG loader keeps floor(side / shrink) of libjpeg's rounded-up
        // output (so a shrink is exact); do the same so sizes stay today's.
        let (keptWidth, keptHeight) = (max(1, header.width / shrink), max(1, header.height / shrink))
        var kept = storage
        if keptWidth != scaledWidth || keptHeight != scaledHeight {
            let keptRow = keptWidth * 3
            kept = try Self.allocate(keptWidth, keptHeight, label: label)
            let cropped = kept.pointer
            for row in 0..<keptHeight {
                (cropped + row * keptRow).copyMemory(from: block + row * rowBytes, byteCount: keptRow)
            }
        }
        // vips_thumbnail's output size, in the stored orientation (as in fastResidualResize).
        let (boxWidth, boxHeight) = swap ? (targetHeight, targetWidth) : (targetWidth, targetHeight)
        let fit = max(Double(keptWidth) / Double(boxWidth), Double(keptHeight) / Double(boxHeight))
        var (outW, outH) = (keptWidth, keptHeight)
        var pixels = kept
        if fit > 1 {
            let (outWidth, outHeight) = (
                max(1, Int(Double(keptWidth) * (1 / fit) + 0.5)),
                max(1, Int(Double(keptHeight) * (1 / fit) + 0.5))
            )
            if outWidth != outW || outHeight != outH {
                let reduced = try Self.allocate(outWidth, outHeight, label: label)
                CubicReducer.reduce(
                    pixels.pointer.assumingMemoryBound(to: UInt8.self), width: outW, height: outH,
                    into: reduced.pointer.assumingMemoryBound(to: UInt8.self), outWidth: outWidth, outHeight: outHeight)
                (pixels, outW, outH) = (reduced, outWidth, outHeight)
            }
        }
        if orientation != 1 {
            let upright = try Self.allocate(outW, outH, label: label)
            PixelOrientation.orient(
                pixels.pointer.assumingMemoryBound(to: UInt8.self), width: outW, height: outH, channels: 3,
                orientation: orientation, into: upright.pointer.assumingMemoryBound(to: UInt8.self))
            if swap { (outW, outH) = (outH, outW) }
            pixels = upright
        }
        // The header read here is the source's: no second parse is needed for it.
        return Bitmap(width: outW, height: outH, channels: 3, scale: scale, storage: pixels)
            .withSource(BitmapSource(info: info, decodedLeniently: false))
    }

    /// Storage for `width`×`height` RGB pixels.
    private static func allocate(_ width: Int, _ height: Int, label: String) throws(VipsError) -> PixelStorage {
        let (size, overflow) = (width * 3).multipliedReportingOverflow(by: height)
        guard !overflow, let block = g_try_malloc(gsize(size)) else {
            throw VipsError(.tooLarge, "\(label): cannot allocate \(width)×\(height)×3 pixels")
        }
        return PixelStorage(adopting: block, count: size)
    }

    /// Runs `body` over the input's bytes (a file is mapped).
    static func withBytes<R>(
        _ input: ImageInput, _ body: (UnsafeRawBufferPointer) throws(VipsError) -> R
    ) throws(VipsError) -> R {
        guard let data = mappedBytes(input) else { throw VipsError(.io, "cannot read the file", source: input.label) }
        let result: Result<R, VipsError> = data.withUnsafeBytes { raw in
            do throws(VipsError) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// The input's bytes for a direct path: in-memory data as it is, a file mapped (not
    /// read: pages are faulted in as the codec reads them). Nil when the file cannot be
    /// read or is larger than `limit`; libvips' path then reads and reports it.
    static func mappedBytes(_ input: ImageInput, upTo limit: Int = .max) -> Data? {
        switch input {
        case .data(let bytes):
            return bytes
        case .file(let path):
            if limit < .max {
                var status = stat()
                guard stat(path, &status) == 0, Int(status.st_size) <= limit else { return nil }
            }
            return try? Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
        }
    }
}
