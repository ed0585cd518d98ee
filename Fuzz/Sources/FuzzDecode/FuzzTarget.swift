import CLibFuzzer
import Foundation

// @testable: VipsCore's own parsers (ProgressiveJPEGFilter, JPEGHeader), its readers over
// libexif (EXIFOrientation) and Little CMS (ICCProfile) and the direct codecs are internal
// (debug builds enable testing).
@testable import VipsCore

// libFuzzer harness over VipsCore's whole decode surface: magic-byte sniffing,
// header probe, thumbnail decode (lenient and strict, fast and quality
// shrink-on-load), the direct libjpeg-turbo JPEG path (decode takes it for
// plain JPEGs) and its header readers alone, the direct libwebp path (decode takes it for
// still WebPs) and its container reader alone, the direct libspng PNG path (through
// decode and alone, with CRCs fixed up), the DC-only path for progressive
// JPEGs (through decode and the filter alone), and in-memory resize.
//
// Besides "no crash", every run checks VipsCore's promises and traps when one
// is broken, so the fuzzer reports logic errors too:
// - a failure is always a typed `VipsError` (the API makes that a compile-time fact);
// - anything accepted was sniffed as an allowed format, read by that format's loader, and respects the limits;
// - a bitmap is 8-bit RGB/RGBA, its byte count matches its size, and it fits the box asked for;
// - nothing decodes whose header probe failed (the probe is the one gate for limits);
// - `info` reads the header `decode` reads (a direct codec's where it takes the image): the
//   decode's bitmap names that header, and libvips, where it reads the header too, agrees;
// - every libvips object made for an input is released when the call returns, success
//   or failure (libvips keeps them in a global table, so LeakSanitizer cannot see these).

/// Limits small enough that the fuzzer spends its time parsing, not allocating:
/// at most 4 MP (16 MB of RGBA) per page and 1 MiB of input.
/// With one decoder named (`VIPSLOAD_FUZZ_FORMAT`), 1 MP: a decoder fuzzed alone meets every input
/// through the whole surface too, and a 4 MP old-style-JPEG TIFF decoded a dozen times under
/// AddressSanitizer takes longer than libFuzzer's timeout without being a hang.
private let limits = DecodeLimits(
    maxPixelCount: ProcessInfo.processInfo.environment["VIPSLOAD_FUZZ_FORMAT"] == nil ? 4_000_000 : 1_000_000,
    maxDimension: 8_192, maxPages: 64, maxInputBytes: 1 << 20)

private let lenient = ImageDecoder(options: DecodeOptions(limits: limits))
private let strict = ImageDecoder(options: DecodeOptions(limits: limits, strict: true))
private let quality = ImageDecoder(options: DecodeOptions(limits: limits, shrinkOnLoad: .quality))
/// The lenient decoder with every input sent through libvips: the reference the direct codecs' headers must match.
private let libvipsOnly = {
    var decoder = lenient
    decoder.usesDirectPaths = false
    return decoder
}()
/// Every format VipsCore can sniff, including those libvips reads with loaders marked untrusted:
/// with libvips' untrusted loaders blocked (the default), those must still fail cleanly.
private let everything = ImageDecoder(
    options: DecodeOptions(
        limits: limits,
        allowedFormats: ImageFormat.defaultAllowed.union([.svg, .pdf, .jp2k, .jxl, .bmp, .ppm])))
/// Formats read by loaders libvips marks untrusted (blocked by default).
private let untrusted: Set<ImageFormat> = [.svg, .pdf, .jp2k, .jxl, .ppm]

/// One decoder only, when `VIPSLOAD_FUZZ_FORMAT` names it (`scripts/fuzz.sh bmp|tga|tiff|png SECONDS`):
/// `bmp` is VipsCore's BMP and ICO/CUR decoders, `tga` its TGA decoder, `tiff` the libtiff RGBA
/// fallback, `png` the direct libspng path (as is and with its CRCs made right, lenient and strict).
/// Every input then goes to that decoder directly (whatever it sniffs as) and, when it sniffs as one
/// of its formats, through the whole decode surface as usual; the rest is skipped.
private let onlyDecoder: Set<ImageFormat>? = {
    switch ProcessInfo.processInfo.environment["VIPSLOAD_FUZZ_FORMAT"] {
    case "bmp": return [.bmp, .ico, .cur]
    case "tga": return [.tga]
    case "tiff": return [.tiff]
    case "png": return [.png]
    default: return nil
    }
}()

/// Limits for the decoders that decode at the image's own size (BMP, ICO, TGA, the TIFF fallback), called directly.
private let directLimits = DecodeLimits(
    maxPixelCount: 1_000_000, maxDimension: 8_192, maxPages: 64, maxInputBytes: 1 << 20)

/// A decoder that decodes alone (`DirectCodec.decodesAlone`), called on the bytes whatever they sniff
/// as: the header is read, checked against the limits as `ImageDecoder` checks it, and decoded for the
/// original size and two boxes, lenient and strict. It must give a well-formed bitmap no larger than its
/// header (an icon's entry for a box, never larger than the largest), or fail with a typed error that
/// says what is wrong with the data; it never hands over to libvips.
private func decodeAlone<Codec: DirectCodec>(_ codec: Codec, _ data: Data, _ name: String) {
    guard codec.decodesAlone else { violated("\(name) does not decode alone") }
    let input = ImageInput.data(data)
    for strictly in [false, true] {
        let options = DecodeOptions(limits: directLimits, strict: strictly)
        do {
            try codec.withHeader(input, options: options, label: name) { reading throws(VipsError) in
                guard case .read(let header) = reading else { violated("\(name) left a header to libvips") }
                let info = codec.info(of: header)
                guard info.width > 0, info.height > 0, info.orientation == 1 else { violated("\(name) header \(info)") }
                guard codec.route(header, options: options) == .direct else { violated("\(name) routed to libvips") }
                try options.limits.check(info, label: name)
                // Lenient: the original size and a box (an icon's entry for it); strict: a box.
                let sizes: [TargetSize] = strictly ? [.fit(width: 16, height: 9)] : [.original, .maxPixelSize(64)]
                for size in sizes {
                    let request = DecodeRequest(size: size, scale: 1, allowUpscale: false)
                    guard let bitmap = try codec.decode(header, request, options: options, label: name) else {
                        violated("\(name) decode gave nil")
                    }
                    check(bitmap, fits: nil, "\(name) direct")
                    if bitmap.width > info.width || bitmap.height > info.height {
                        violated(
                            "\(name) gave \(bitmap.width)×\(bitmap.height) for a \(info.width)×\(info.height) header")
                    }
                }
            }
        } catch {
            guard [.truncatedData, .corruptData, .tooLarge, .unsupportedFeature].contains(error.kind) else {
                violated("\(name) failed with \(error.kind): \(error.message)")
            }
        }
    }
}

/// VipsCore's own decoders (BMP, ICO/CUR, TGA) and the libvips-free TIFF fallback, directly.
private func decodeAlone(_ data: Data) {
    let only = onlyDecoder
    if only == nil || only?.contains(.bmp) == true {
        decodeAlone(BMPCodec(), data, "bmp")
        decodeAlone(ICOCodec(format: .ico), data, "ico")
    }
    if only == nil || only?.contains(.tga) == true { decodeAlone(TGACodec(), data, "tga") }
    // The TIFF fallback only where libtiff would be asked (it reads TIFF magic only).
    if only == nil || only?.contains(.tiff) == true, ImageFormat.sniff(data) == .tiff {
        decodeAlone(TIFFRGBACodec(), data, "tiff")
    }
}

/// Stops the run with a message: the fuzzer records the input as a crasher.
private func violated(_ message: String) -> Never {
    fatalError("invariant broken: \(message)")
}

private func check(_ bitmap: Bitmap, fits side: Int?, _ what: String) {
    guard bitmap.width > 0, bitmap.height > 0, bitmap.channels == 3 || bitmap.channels == 4 else {
        violated("\(what): bitmap \(bitmap.width)×\(bitmap.height)×\(bitmap.channels)")
    }
    guard bitmap.cost == bitmap.width * bitmap.height * bitmap.channels else {
        violated("\(what): \(bitmap.cost) bytes for \(bitmap.width)×\(bitmap.height)×\(bitmap.channels)")
    }
    if let side, bitmap.width > side || bitmap.height > side {
        violated("\(what): \(bitmap.width)×\(bitmap.height) does not fit \(side)")
    }
    if bitmap.width * bitmap.height > limits.maxPixelCount {
        violated("\(what): \(bitmap.width)×\(bitmap.height) exceeds the pixel limit")
    }
}

/// The DC-only filter and the complete-scans reader on every input that starts like a JPEG, whatever libvips would say of it:
/// cheap, pure Swift, so coverage guidance works on it directly. Its output must be a
/// shortened JPEG (SOI … EOI, never longer than the input plus the EOI it appends).
private func filterProgressiveJPEG(_ data: Data) {
    guard data.starts(with: [0xFF, 0xD8]) else { return }
    // The preview-while-downloading reader, on the input whole and on its first half (as if still arriving):
    // a complete scan ends at a marker inside what has arrived.
    for received in [data, data.prefix(data.count / 2)] {
        received.withUnsafeBytes { raw in
            guard let (length, scans) = ProgressiveJPEGScans.completeScans(in: raw) else { return }
            guard scans >= 1, length > 2, length < raw.count, raw[length] == 0xFF else {
                violated("complete scans: \(scans) ending at \(length) of \(raw.count) bytes")
            }
        }
    }
    guard let shortened = data.withUnsafeBytes({ ProgressiveJPEGFilter.dcOnly($0) }) else { return }
    guard shortened.starts(with: [0xFF, 0xD8]), shortened.suffix(2) == Data([0xFF, 0xD9]),
        shortened.count <= data.count + 2
    else {
        violated("DC-only filter turned \(data.count) bytes into \(shortened.count) malformed bytes")
    }
}

/// The hand-written header readers of the direct JPEG path, on every input whatever it is:
/// the JPEG marker reader (and through it the EXIF orientation reader and the ICC chunk
/// reassembly), the EXIF reader on the raw bytes as a TIFF structure, the ICC reader on the
/// raw bytes. Pure Swift, so coverage guidance works on them directly.
private func parseHeaders(_ data: Data) {
    data.withUnsafeBytes { raw in
        if let header = JPEGHeader(raw) {
            guard (1...8).contains(header.orientation), header.width <= 65_535, header.height <= 65_535 else {
                violated(
                    "JPEG header reader returned \(header.width)×\(header.height), orientation \(header.orientation)")
            }
            if let profile = header.iccProfile {
                guard profile.count <= raw.count else { violated("ICC profile longer than the file") }
                _ = profile.withUnsafeBytes { ICCProfile($0) }
            }
            _ = JPEGCodec().route(JPEGCodec.Header(bytes: raw, markers: header), options: lenient.options)
        }
        // The direct WebP codec's container reading (libwebp's demuxer, the EXIF and ICC chunks) and routes.
        if let chunks = WebPHeader(raw) {
            guard (1...8).contains(chunks.orientation), chunks.width >= 0, chunks.height >= 0 else {
                violated(
                    "WebP header reader returned \(chunks.width)×\(chunks.height), orientation \(chunks.orientation)")
            }
            if WebPHeader.isTruncated(raw) { violated("the demuxer accepted a truncated WebP") }
            let header = WebPCodec.Header(bytes: raw, chunks: chunks)
            if WebPCodec().route(header, options: lenient.options) == .direct {
                for size in [TargetSize.maxPixelSize(64), .maxPixelSize(1), .fit(width: 4096, height: 3)] {
                    let request = DecodeRequest(size: size, scale: 1, allowUpscale: false)
                    _ = WebPCodec().route(header, for: request, options: lenient.options)
                }
            }
        }
        if let orientation = EXIFOrientation.read(raw), !(1...8).contains(orientation) {
            violated("EXIF orientation \(orientation)")
        }
        if let profile = ICCProfile(raw), profile.isSRGB, profile.colourSpace != .rgb, profile.colourSpace != .grey {
            violated("a \(profile.colourSpace) profile taken for sRGB")
        }
    }
}

/// The direct libspng PNG path on every input that starts like a PNG, whatever libvips would
/// say of it, on the bytes as they are and with every chunk's CRC made right (so libspng reads
/// the mutated chunks instead of refusing the first bad CRC). Lenient and strict, a thumbnail
/// and full size. A direct bitmap must be well-formed and, where libvips also decodes the
/// input, of the same size; a strict failure must be truncation, corruption or a limit.
private func directPNG(_ data: Data) {
    // (Through `decodeDirectly`, which admits the input first: the whole PNG signature.)
    guard ImageFormat.sniff(data) == .png else { return }
    for bytes in [data, fixingPNGCRCs(data)] {
        let input = ImageInput.data(bytes)
        _ = try? lenient.route(input, size: .maxPixelSize(64))
        for (decoder, name) in [(lenient, "lenient"), (strict, "strict")] {
            for side in [64, 4096] {
                do {
                    guard let bitmap = try decoder.decodeDirectly(input, size: .maxPixelSize(side)) else { continue }
                    check(bitmap, fits: side, "direct PNG \(name) \(side)")
                    var reference = decoder
                    reference.usesDirectPaths = false
                    if let other = try? reference.decode(input, size: .maxPixelSize(side)),
                        [other.width, other.height, other.channels] != [bitmap.width, bitmap.height, bitmap.channels]
                    {
                        violated(
                            "direct PNG \(name) gave \(bitmap.width)×\(bitmap.height)×\(bitmap.channels), "
                                + "libvips \(other.width)×\(other.height)×\(other.channels)")
                    }
                } catch {
                    guard [.truncatedData, .corruptData, .tooLarge].contains(error.kind) else {
                        violated("direct PNG \(name) failed with \(error.kind): \(error.message)")
                    }
                }
            }
        }
    }
}

/// The bytes with each chunk's CRC recomputed, walking from the signature (stops at a chunk that runs off the end).
private func fixingPNGCRCs(_ data: Data) -> Data {
    var bytes = [UInt8](data), at = 8
    while at + 12 <= bytes.count {
        let length = Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
        let end = at + 8 + length
        guard end + 4 <= bytes.count else { break }
        var crc: UInt32 = 0xFFFF_FFFF
        for index in (at + 4)..<end { crc = crcTable[Int((crc ^ UInt32(bytes[index])) & 0xFF)] ^ (crc >> 8) }
        crc = ~crc
        bytes.replaceSubrange(
            end..<(end + 4),
            with: [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)])
        at = end + 4
    }
    return Data(bytes)
}

private let crcTable: [UInt32] = (0..<256).map { index in
    var crc = UInt32(index)
    for _ in 0..<8 { crc = crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
    return crc
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDecode(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    decodeAll(bytes, count)
    let live = settledLiveVipsObjects()
    if live != 0 { violated("\(live) libvips objects still alive after the input") }
    return 0
}

/// The count of live libvips objects once it stops falling: a libvips worker thread can drop its
/// last reference a moment after the call that used it returned, so a count above zero is looked at
/// again for up to two seconds before it counts as a leak (a leaked object never goes).
private func settledLiveVipsObjects() -> Int {
    var live = VipsRuntime.liveObjectCount
    var waited = 0
    while live != 0, waited < 2_000 {
        usleep(1_000)
        waited += 1
        live = VipsRuntime.liveObjectCount
    }
    return live
}

private func decodeAll(_ bytes: UnsafePointer<UInt8>?, _ count: Int) {
    let data = bytes.map { Data(bytes: $0, count: count) } ?? Data()
    decodeAlone(data)
    let sniffed = ImageFormat.sniff(data)
    if let only = onlyDecoder {
        guard let sniffed, only.contains(sniffed) else { return }
        if only.contains(.png) { directPNG(data) }
    } else {
        filterProgressiveJPEG(data)
        parseHeaders(data)
        directPNG(data)
    }
    let input = ImageInput.data(data)

    let info: ImageInfo
    do {
        info = try lenient.info(input)
    } catch {
        // The probe refused it: so must every decode with the same options.
        if let bitmap = try? lenient.decode(input, size: .maxPixelSize(64)) {
            violated("probe failed (\(error)) but decode gave \(bitmap.width)×\(bitmap.height)")
        }
        // Formats outside the default list go through libvips' loader selection, and the
        // untrusted ones must be refused by libvips itself.
        if let sniffed, untrusted.contains(sniffed), let bitmap = try? everything.decode(input, size: .maxPixelSize(64))
        {
            violated("untrusted \(sniffed) decoded to \(bitmap.width)×\(bitmap.height) with loaders blocked")
        }
        return
    }
    guard let sniffed, ImageFormat.defaultAllowed.contains(sniffed) else {
        violated("probe accepted bytes sniffed as \(String(describing: sniffed))")
    }
    // The loader that read the header is the one for the sniffed format (libvips reads AVIF with its HEIF loader).
    guard info.format == sniffed || (info.format == .heif && sniffed == .avif) else {
        violated("bytes sniffed as \(sniffed) were read as \(info.format)")
    }
    guard info.width > 0, info.height > 0, info.width <= limits.maxDimension, info.height <= limits.maxDimension,
        info.pixelCount <= limits.maxPixelCount, info.pages >= 1, info.pages <= limits.maxPages,
        (1...8).contains(info.orientation), info.bands > 0
    else {
        violated("probe returned \(info)")
    }

    // A direct codec's header is the one libvips reads, wherever libvips reads it too.
    if [.jpeg, .png, .webp].contains(sniffed), let other = try? libvipsOnly.info(input), other != info {
        violated("info gave \(info), libvips reads \(other)")
    }

    // Thumbnail: shrink-on-load as far as possible, then reduce; the bitmap names the header `info` read.
    if let bitmap = try? lenient.decode(input, size: .maxPixelSize(64)) {
        check(bitmap, fits: 64, "lenient 64")
        if bitmap.source?.info != info {
            violated("decode named \(String(describing: bitmap.source?.info)), info \(info)")
        }
    }
    // Strict: stops at the first libvips warning about the data.
    if let bitmap = try? strict.decode(input, size: .maxPixelSize(64)) { check(bitmap, fits: 64, "strict 64") }
    // 1/8 of the image: the JPEG shrink-8 path, and for progressive JPEGs the DC-only stream.
    let eighth = max(1, max(info.width, info.height) / 8)
    if let bitmap = try? lenient.decode(input, size: .maxPixelSize(eighth)) {
        check(bitmap, fits: eighth, "lenient 1/8")
    }
    // Quality mode keeps twice the target: the other shrink factors (and WebP's scaled load).
    if let bitmap = try? quality.decode(input, size: .fit(width: 48, height: 32), scale: 1.5) {
        check(bitmap, fits: 72, "quality 48×32@1.5")
        if let smaller = try? lenient.resize(bitmap, to: .maxPixelSize(9), scale: 1) {
            check(smaller, fits: 9, "resize 9")
        }
    }
    // Full size, only when small: the path without any shrink.
    if info.pixelCount <= 65_536, let bitmap = try? lenient.decode(input) { check(bitmap, fits: nil, "original") }
    // Resize modes and processors with random parameters (FuzzGeometry.swift).
    fuzzGeometry(data, info: info, decoder: lenient)
}
