import CTurboJPEG
import Foundation

/// The direct JPEG codec: libjpeg-turbo (through its TurboJPEG API) decodes
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
struct JPEGCodec: DirectCodec {
    /// A JPEG's markers, with the bytes they were read from.
    struct Header {
        let bytes: UnsafeRawBufferPointer
        let markers: JPEGHeader
    }

    /// The largest JPEG file the direct path maps whole (larger ones stream through libvips).
    static let directFileLimit = 8 << 20

    func withHeader<R>(
        _ input: ImageInput, options: DecodeOptions, label: String, _ body: (CodecHeader<Header>) throws(VipsError) -> R
    ) throws(VipsError) -> R {
        // Mapped pages count in the resident set until the decode ends, so a large file goes
        // to libvips, which streams it through a small buffer.
        if let size = input.fileByteCount, size > Self.directFileLimit {
            return try body(.unread("file larger than \(Self.directFileLimit >> 20) MiB (streamed)"))
        }
        guard let data = input.mappedBytes() else { return try body(.unread("input not readable")) }
        return try data.withBytes { bytes throws(VipsError) in
            guard let markers = JPEGHeader(bytes) else { return try body(.unread("markers not understood")) }
            return try body(.read(Header(bytes: bytes, markers: markers)))
        }
    }

    func info(of header: Header) -> ImageInfo {
        let markers = header.markers
        return ImageInfo(
            storedWidth: markers.width, height: markers.height, format: .jpeg, bands: markers.components,
            hasAlpha: false, orientation: markers.orientation)
    }

    func route(_ header: Header, options: DecodeOptions) -> DecodeRoute {
        let markers = header.markers
        guard markers.isHuffman else {
            let arithmetic = [0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF].contains(markers.frameMarker)
            return .libvips(arithmetic ? "arithmetic coding" : "lossless or hierarchical frame")
        }
        guard markers.precision == 8 else { return .libvips("\(markers.precision)-bit samples") }
        guard markers.components == 1 || markers.components == 3 else {
            return .libvips(markers.components == 4 ? "CMYK or YCCK" : "\(markers.components) components")
        }
        guard markers.adobeTransform != 2 else { return .libvips("YCCK") }
        guard markers.width > 0, markers.height > 0 else { return .libvips("no size in the frame header") }
        if markers.iccMalformed { return .libvips("ICC profile chunks malformed") }
        if let bytes = markers.iccProfile {
            let profile = bytes.withUnsafeBytes { ICCProfile($0) }
            let expected: ICCProfile.ColourSpace = markers.components == 1 ? .grey : .rgb
            guard let profile, profile.colourSpace == expected, profile.isSRGB else {
                return .libvips("ICC profile is not sRGB")
            }
        }
        return .direct
    }

    func decode(
        _ header: Header, _ request: DecodeRequest, options: DecodeOptions, label: String
    ) throws(VipsError) -> Bitmap? {
        let (markers, bytes) = (header.markers, header.bytes)
        let info = info(of: header)
        guard let handle = tjInitDecompress() else { return nil }
        defer { tjDestroy(handle) }
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colourspace: Int32 = 0
        // TurboJPEG's own view of the header must agree with ours; if not, libvips decides.
        guard tjDecompressHeader3(handle, base, UInt(bytes.count), &width, &height, &subsampling, &colourspace) == 0,
            Int(width) == markers.width, Int(height) == markers.height,
            colourspace == Int32(TJCS_YCbCr.rawValue) || colourspace == Int32(TJCS_GRAY.rawValue)
                || colourspace == Int32(TJCS_RGB.rawValue)
        else { return nil }

        // The fast mode's arithmetic: the same DCT shrink and the same output size.
        let shrink =
            request.box.flatMap { ImageDecoder.jpegShrink(allowed: options.loaderShrink(info, box: $0).raster) } ?? 1
        // A progressive file decoded at 1/8 needs only its DC scans (see ProgressiveJPEGFilter).
        let shortened =
            shrink == 8 && markers.isProgressive && !options.strict ? ProgressiveJPEGFilter.dcOnly(bytes) : nil
        let scaledWidth = (markers.width + shrink - 1) / shrink, scaledHeight = (markers.height + shrink - 1) / shrink
        let rowBytes = scaledWidth * 3
        // Owned from here: freed on every error below.
        let storage = try PixelStorage.allocate(width: scaledWidth, height: scaledHeight, channels: 3, label: label)
        let block = storage.pointer
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
                throw VipsError(
                    corrupt ? .corruptData : ImageDecoder.kind(forDecodeFailure: message), "\(label): \(message)")
            }
            VipsRuntime.countWarning(message)
        }
        var pixels = Bitmap(
            width: scaledWidth, height: scaledHeight, channels: 3, scale: request.scale, storage: storage)
        // libvips' JPEG loader keeps floor(side / shrink) of libjpeg's rounded-up
        // output (so a shrink is exact); do the same so sizes stay libvips'.
        let (keptWidth, keptHeight) = (max(1, markers.width / shrink), max(1, markers.height / shrink))
        if keptWidth != scaledWidth || keptHeight != scaledHeight {
            let kept = try PixelStorage.allocate(width: keptWidth, height: keptHeight, channels: 3, label: label)
            let keptRow = keptWidth * 3
            for row in 0..<keptHeight {
                (kept.pointer + row * keptRow).copyMemory(from: block + row * rowBytes, byteCount: keptRow)
            }
            pixels = Bitmap(width: keptWidth, height: keptHeight, channels: 3, scale: request.scale, storage: kept)
        }
        if let output = ThumbnailSize.fitting(
            width: keptWidth, height: keptHeight, into: request.clampedBox(info), swapped: markers.orientation >= 5),
            output.width != keptWidth || output.height != keptHeight
        {
            pixels = try CubicReducer.reduced(pixels, width: output.width, height: output.height, label: label)
        }
        return try PixelOrientation.upright(pixels, orientation: markers.orientation, label: label)
    }
}
