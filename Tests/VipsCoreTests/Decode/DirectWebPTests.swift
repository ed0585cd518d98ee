import CVipsShim
import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// The direct libwebp path: which WebPs take it (decided from the header),
/// and that what it returns is what the libvips path returns.
final class DirectWebPTests: XCTestCase {
    let fast = ImageDecoder()
    let libvipsFast = ImageDecoder.libvipsOnly()
    let libvipsStrict = ImageDecoder.libvipsOnly(DecodeOptions(strict: true))
    let quality = ImageDecoder(options: DecodeOptions(shrinkOnLoad: .quality))
    let strict = ImageDecoder(options: DecodeOptions(strict: true))

    // MARK: - Routes

    func testStillWebPsTakeTheDirectPath() throws {
        let formats: [(ImageSynthesizer.Format, Bool)] = [
            (.webp(), false), (.webp(lossless: true), false), (.webp(lossless: true), true), (.webp(quality: 60), true),
            (.webp(orientation: 6), false)
        ]
        for (format, alpha) in formats {
            let data = try ImageSynthesizer.data(width: 120, height: 80, alpha: alpha, format: format)
            XCTAssertEqual(try fast.route(.data(data)), .direct, "\(format) alpha \(alpha)")
            XCTAssertEqual(
                try fast.route(.data(data), size: .maxPixelSize(30)), .direct, "\(format) alpha \(alpha) → 30")
        }
        let srgb = try ImageSynthesizer.data(width: 120, height: 80, iccProfile: "srgb", format: .webp())
        XCTAssertEqual(try fast.route(.data(srgb)), .direct, "an sRGB profile")
    }

    func testEverythingElseIsSentToLibvipsFromTheHeader() throws {
        let plain = try ImageSynthesizer.data(width: 120, height: 80, format: .webp())
        XCTAssertEqual(try quality.route(.data(plain)), .libvips("quality mode uses libvips' lanczos path"))
        XCTAssertEqual(
            try fast.route(.data(plain), size: .maxPixelSize(400), allowUpscale: true), .libvips("upscaling"))
        let p3 = try ImageSynthesizer.data(width: 120, height: 80, iccProfile: "p3", format: .webp())
        XCTAssertEqual(try fast.route(.data(p3)), .libvips("ICC profile is not sRGB"))
        XCTAssertEqual(try fast.route(.data(try animated())), .libvips("animated"))
        // A RIFF file the demuxer refuses (no image chunk), and one cut short: refused before either path.
        let junk = WebPChunks.riff(WebPChunks.chunk("JUNK", [1, 2, 3, 4]))
        XCTAssertEqual(try fast.route(.data(junk)), .libvips("container not understood"))
        assertThrowsKind(.truncatedData) { () throws(VipsError) in try fast.route(.data(Data(plain.prefix(40)))) }
        // A 2×48 image into 8 px: libwebp may only scale to a 1-pixel-wide... side kept above one
        // pixel (loaderShrink's cap), so a residual resize is left; with alpha libvips does it premultiplied.
        let thin = try ImageSynthesizer.data(width: 2, height: 48, alpha: true, format: .webp(lossless: true))
        XCTAssertEqual(try fast.route(.data(thin), size: .maxPixelSize(8)), .libvips("alpha with a residual resize"))
        XCTAssertEqual(try fast.route(.data(thin), size: .original), .direct)
    }

    func testAnimatedAndProfiledWebPsDecodeThroughLibvipsAsBefore() throws {
        for data in [
            try animated(), try ImageSynthesizer.data(width: 120, height: 80, iccProfile: "p3", format: .webp())
        ] {
            let decoded = try fast.decode(.data(data), size: .maxPixelSize(50))
            let reference = try libvipsFast.decode(.data(data), size: .maxPixelSize(50))
            XCTAssertEqual(
                [decoded.width, decoded.height, decoded.channels],
                [reference.width, reference.height, reference.channels])
            XCTAssertEqual(decoded.pixelData, reference.pixelData)
        }
    }

    // MARK: - Pixels and sizes

    func testSizesAndPixelsAreTodaysFastPath() throws {
        let sources: [(Int, Int, Bool, ImageSynthesizer.Format)] = [
            (2000, 1500, false, .webp(quality: 80)), (1001, 667, false, .webp(quality: 90)),
            (641, 479, false, .webp(lossless: true)),
            (640, 480, true, .webp(lossless: true)), (500, 300, true, .webp(quality: 70)), (2, 48, false, .webp()),
            (333, 999, false, .webp(quality: 75))
        ]
        for (index, (width, height, alpha, format)) in sources.enumerated() {
            let data = try ImageSynthesizer.data(
                width: width, height: height, seed: 80 + index, alpha: alpha, format: format)
            for size in [
                TargetSize.maxPixelSize(256), .maxPixelSize(200), .fit(width: 100, height: 37), .maxPixelSize(8),
                .original
            ] {
                let label = "\(width)×\(height) \(format) alpha \(alpha) → \(size)"
                let direct = try fast.decode(.data(data), size: size)
                let viaLibvips = try libvipsFast.decode(.data(data), size: size)
                XCTAssertEqual(
                    [direct.width, direct.height, direct.channels],
                    [viaLibvips.width, viaLibvips.height, viaLibvips.channels], label)
                guard direct.width == viaLibvips.width, direct.height == viaLibvips.height else { continue }
                if try fast.route(.data(data), size: size) != .direct { continue }
                // The same libwebp calls at the same scaled size: the same pixels, except where a
                // residual cubic reduce (CubicReducer vs vips_resize's cubic) rounds differently.
                let (mean, maximum) = pixelDifference(direct, viaLibvips)
                XCTAssertLessThanOrEqual(mean, 0.5, "\(label): mean vs libvips' fast path")
                XCTAssertLessThanOrEqual(maximum, 8, "\(label): max vs libvips' fast path")
            }
        }
    }

    func testPhotographicPixelsAgainstTheLibvipsQualityPath() throws {
        // libwebp's scaler is an area average; the quality path scales to twice the size and
        // finishes with lanczos3. On a photo-like image (no per-pixel noise: soft shapes and
        // edges) they agree within mean 1.0, max 16 levels.
        for (index, format) in [ImageSynthesizer.Format.webp(quality: 85), .webp(lossless: true)].enumerated() {
            let data = try ImageSynthesizer.data(width: 1600, height: 1200, seed: 90 + index, format: format)
            let photo = try smoothed(data, format: format)
            XCTAssertEqual(try fast.route(.data(photo), size: .maxPixelSize(256)), .direct)
            for size in [TargetSize.maxPixelSize(256), .maxPixelSize(400)] {
                let direct = try fast.decode(.data(photo), size: size)
                let reference = try quality.decode(.data(photo), size: size)
                XCTAssertEqual([direct.width, direct.height], [reference.width, reference.height])
                let (mean, maximum) = pixelDifference(direct, reference)
                XCTAssertLessThanOrEqual(mean, 1.0, "\(format) \(size): mean vs the quality path")
                XCTAssertLessThanOrEqual(maximum, 16, "\(format) \(size): max vs the quality path")
            }
        }
    }

    func testAlphaIsKeptAndMatchesLibvips() throws {
        for format in [ImageSynthesizer.Format.webp(lossless: true), .webp(quality: 80)] {
            let data = try ImageSynthesizer.data(width: 800, height: 600, seed: 5, alpha: true, format: format)
            for size in [TargetSize.maxPixelSize(100), .original] {
                XCTAssertEqual(try fast.route(.data(data), size: size), .direct)
                let direct = try fast.decode(.data(data), size: size)
                let reference = try libvipsFast.decode(.data(data), size: size)
                XCTAssertEqual(direct.channels, 4)
                XCTAssertEqual(direct.pixelData, reference.pixelData, "\(format) \(size)")
            }
        }
    }

    func testEveryOrientationOnTheDirectPath() throws {
        for orientation in 1...8 {
            for alpha in [false, true] {
                let data = try ImageSynthesizer.data(
                    width: 320, height: 200, seed: 70, alpha: alpha, marker: true,
                    format: .webp(quality: 90, orientation: orientation))
                XCTAssertEqual(
                    try libvipsFast.info(.data(data)).orientation, orientation, "libvips reads the EXIF chunk")
                for size in [TargetSize.maxPixelSize(80), .fit(width: 50, height: 77), .original] {
                    let label = "orientation \(orientation) alpha \(alpha) \(size)"
                    XCTAssertEqual(try fast.route(.data(data), size: size), .direct, label)
                    let direct = try fast.decode(.data(data), size: size)
                    let viaLibvips = try libvipsFast.decode(.data(data), size: size)
                    XCTAssertEqual(
                        [direct.width, direct.height, direct.channels],
                        [viaLibvips.width, viaLibvips.height, viaLibvips.channels], label)
                    XCTAssertEqual(direct.width > direct.height, orientation < 5, "upright, \(label)")
                    XCTAssertEqual(direct.source?.info.orientation, orientation)
                    guard direct.width == viaLibvips.width, direct.height == viaLibvips.height else { continue }
                    XCTAssertLessThan(pixelDifference(direct, viaLibvips).mean, 0.5, label)
                }
            }
        }
    }

    func testEXIFChunkWithPrefixOrOutOfRangeOrientation() throws {
        // WebP's EXIF chunk is a bare TIFF structure; some writers keep JPEG's "Exif\0\0".
        let plain = try ImageSynthesizer.data(width: 60, height: 40, seed: 3, format: .webp())
        func tiff(_ value: UInt8) -> [UInt8] {
            [0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, value, 0, 0, 0, 0, 0, 0]
        }
        let prefixed = WebPChunks.extended(plain, exif: Array("Exif".utf8) + [0, 0] + tiff(6))
        let bare = WebPChunks.extended(plain, exif: tiff(8))
        let outOfRange = WebPChunks.extended(plain, exif: tiff(9))
        for (data, expected) in [(prefixed, 6), (bare, 8), (outOfRange, 1)] {
            XCTAssertEqual(try fast.route(.data(data)), .direct)
            XCTAssertEqual(try libvipsFast.info(.data(data)).orientation, expected)
            let direct = try fast.decode(.data(data), size: .maxPixelSize(30))
            let viaLibvips = try libvipsFast.decode(.data(data), size: .maxPixelSize(30))
            XCTAssertEqual(
                [direct.width, direct.height], [viaLibvips.width, viaLibvips.height], "orientation \(expected)")
            XCTAssertEqual(direct.pixelData, viaLibvips.pixelData, "orientation \(expected)")
        }
    }

    func testOddEXIFEntriesGiveTheOrientationLibvipsGives() throws {
        // libexif reads the block for both paths: an entry of another format, count or value
        // comes out as libvips reads it (vips__exif_parse: fixed by libexif, then atoi of its text).
        let plain = try ImageSynthesizer.data(width: 60, height: 40, seed: 3, format: .webp())
        func ifd(type: UInt16, count: UInt32, value: [UInt8]) -> [UInt8] {
            let field = value + [UInt8](repeating: 0, count: max(0, 4 - value.count))
            return [0x49, 0x49, 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, UInt8(type), 0]
                + (0..<4).map { UInt8((count >> (8 * $0)) & 0xFF) } + field.prefix(4) + [0, 0, 0, 0]
        }
        var blocks: [[UInt8]] = [
            ifd(type: 3, count: 1, value: [6, 0]), ifd(type: 4, count: 1, value: [8, 0, 0, 0]),
            ifd(type: 1, count: 1, value: [5]), ifd(type: 8, count: 1, value: [0xFF, 0xFF]),
            ifd(type: 9, count: 1, value: [3, 0, 0, 0]), ifd(type: 2, count: 2, value: [0x37, 0]),
            ifd(type: 2, count: 4, value: Array(" 7x".utf8) + [0]), ifd(type: 3, count: 2, value: [2, 0, 9, 0]),
            ifd(type: 3, count: 1, value: [0, 0]), ifd(type: 3, count: 1, value: [9, 0]),
            ifd(type: 7, count: 1, value: [6]), ifd(type: 11, count: 1, value: [0, 0, 0xC0, 0x40])
        ]
        var random = SplitMix64(seed: 0x0E1F)
        for _ in 0..<60 {
            let type = UInt16(random.next() % 13), count = UInt32(random.next() % 12)
            blocks.append(ifd(type: type, count: count, value: (0..<4).map { _ in UInt8(random.next() % 10) }))
        }
        var seen: Set<Int> = []
        for (index, block) in blocks.enumerated() {
            let data = WebPChunks.extended(plain, exif: block)
            let label = "block \(index): \(block[12...21])"
            let expected = try libvipsFast.info(.data(data)).orientation
            seen.insert(expected)
            XCTAssertEqual(try fast.info(.data(data)).orientation, expected, label)
            XCTAssertEqual(block.withUnsafeBytes { EXIFOrientation.read($0) } ?? 1, expected, label)
        }
        // LONG 8, BYTE 5, ASCII "7", SSHORT 3 and friends: not every block reads as 1.
        XCTAssertGreaterThanOrEqual(seen.count, 5, "\(seen.sorted())")
    }

    // MARK: - Errors and limits

    func testTruncatedAndCorruptFilesGiveTypedErrors() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 41, format: .webp())
        for fraction in [0.3, 0.6, 0.95] {
            let cut = Data(data.prefix(Int(Double(data.count) * fraction)))
            // libvips refuses a short WebP in both modes ("unable to parse image"); so does the direct path, as truncatedData.
            XCTAssertThrowsError(try libvipsFast.decode(.data(cut), size: .maxPixelSize(64)))
            for decoder in [fast, strict, quality] {
                assertThrowsKind(.truncatedData) { () throws(VipsError) in
                    try decoder.decode(.data(cut), size: .maxPixelSize(64))
                }
            }
            assertThrowsKind(.truncatedData) { () throws(VipsError) in
                try fast.decode(.data(cut), size: .maxPixelSize(400), allowUpscale: true)
            }
        }
        // A complete container whose VP8 bitstream is cut short inside (the chunk sizes patched to fit).
        // (Cut past the first partition, whose size the demuxer checks against the chunk.)
        let vp8 = WebPChunks.payload(of: "VP8 ", in: data)
        let shortened = WebPChunks.simple(vp8Payload: Array(vp8.prefix(vp8.count * 7 / 10)))
        XCTAssertEqual(try fast.route(.data(shortened)), .direct)
        XCTAssertThrowsError(try libvipsFast.decode(.data(shortened), size: .maxPixelSize(64)))
        for decoder in [fast, strict] {
            let error = assertThrowsKind(.truncatedData) { () throws(VipsError) in
                try decoder.decode(.data(shortened), size: .maxPixelSize(64))
            }
            XCTAssertTrue(error?.message.contains("libwebp") ?? false, error?.message ?? "")
        }
        // Garbage in the VP8 key frame header: corrupt data.
        var payload = WebPChunks.payload(of: "VP8 ", in: data)
        payload[3] = 0 // the start code 9d 01 2a
        let garbled = WebPChunks.simple(vp8Payload: payload)
        XCTAssertThrowsError(try libvipsFast.decode(.data(garbled), size: .maxPixelSize(64)))
        for decoder in [fast, strict] {
            assertThrowsKind(.corruptData) { () throws(VipsError) in
                try decoder.decode(.data(garbled), size: .maxPixelSize(64))
            }
        }
    }

    func testLimitsAreCheckedFromTheHeaderBeforeAnyAllocation() throws {
        let plain = try ImageSynthesizer.data(width: 64, height: 48, format: .webp())
        // The key frame claims 16000×16000 (256 MP); the file is a few KB.
        var payload = WebPChunks.payload(of: "VP8 ", in: plain)
        payload.replaceSubrange(6..<10, with: [0x80, 0x3E, 0x80, 0x3E])
        let huge = WebPChunks.simple(vp8Payload: payload)
        XCTAssertEqual(try fast.route(.data(huge)), .direct)
        let error = assertThrowsKind(.tooLarge) { () throws(VipsError) in
            try fast.decode(.data(huge), size: .maxPixelSize(64))
        }
        XCTAssertTrue(error?.message.contains("16000×16000") ?? false, error?.message ?? "")
        let small = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 1000)))
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try small.decode(.data(plain), size: .maxPixelSize(8)) }
        let narrow = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxDimension: 50)))
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try narrow.decode(.data(plain), size: .maxPixelSize(8)) }
    }

    func testHostileICCAndEXIFChunksGiveTypedErrorsOrBitmaps() throws {
        let plain = try ImageSynthesizer.data(width: 96, height: 64, seed: 12, format: .webp(quality: 60))
        var random = SplitMix64(seed: 0x5EED)
        let profile = [UInt8](ICCProfileWriter.adobeRGB())
        var inputs: [Data] = []
        for index in 0..<60 {
            var tiff: [UInt8] = index % 2 == 0 ? [0x4D, 0x4D, 0, 42] : [0x49, 0x49, 42, 0]
            tiff += (0..<(8 + index % 40)).map { _ in UInt8.random(in: 0...255, using: &random) }
            inputs.append(WebPChunks.extended(plain, exif: tiff))
            let cut = profile.prefix(Int.random(in: 0..<profile.count, using: &random))
            inputs.append(WebPChunks.extended(plain, icc: Array(cut)))
        }
        for (index, input) in inputs.enumerated() {
            // Even inputs carry a random EXIF chunk, odd ones a cut ICC profile.
            let label = index % 2 == 0 ? "EXIF \(index / 2)" : "ICC \(index / 2)"
            for decoder in [fast, strict] {
                let route = assertRouteHolds(decoder, .data(input), size: .maxPixelSize(48), label)
                // What an EXIF chunk holds never changes the route; a cut profile is never sRGB.
                XCTAssertEqual(route, index % 2 == 0 ? .direct : .libvips("ICC profile is not sRGB"), label)
                assertThumbnailOrStrictFailure(decoder, .data(input), side: 48, label)
            }
        }
        // A cut ICC profile is not taken for sRGB: such files go to libvips.
        XCTAssertEqual(
            try fast.route(.data(WebPChunks.extended(plain, icc: Array(profile.prefix(60))))),
            .libvips("ICC profile is not sRGB"))
    }

    func testFilesTakeTheDirectPathToo() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write(
            try ImageSynthesizer.data(width: 800, height: 600, seed: 9, format: .webp()), named: "a.webp")
        XCTAssertEqual(try fast.route(.file(path)), .direct)
        let fromFile = try fast.decode(.file(path), size: .maxPixelSize(128))
        let fromData = try fast.decode(
            .data(try Data(contentsOf: URL(fileURLWithPath: path))), size: .maxPixelSize(128))
        XCTAssertEqual(fromFile.pixelData, fromData.pixelData)
        assertThrowsKind(.io) { () throws(VipsError) in
            try fast.decode(.file(folder.path("missing.webp")), size: .maxPixelSize(8))
        }
    }

    // MARK: - Helpers

    /// A two-frame animated WebP made by libvips (a 64×128 strip with page-height 64).
    func animated() throws -> Data {
        let png = try ImageSynthesizer.data(width: 64, height: 128, seed: 4, format: .png())
        return try ImageInput.data(png).withSource { source throws(VipsError) in
            let loaded = try ImageDecoder.load("strip") {
                vl_load_named(LibVips.table, "pngload_source", source, VIPS_ACCESS_SEQUENTIAL, VIPS_FAIL_ON_NONE)
            }
            let image = try loaded.apply(.internal, "copy") {
                vl_copy_interpretation(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
            }
            libvips.vips_image_set_int(image.pointer, "page-height", 64)
            var buffer: UnsafeMutableRawPointer? = nil
            var length = 0
            guard vl_write_to_buffer(LibVips.table, image.pointer, ".webp", &buffer, &length) == 0, let buffer else {
                throw VipsError(.encodeFailed, VipsRuntime.takeErrorMessage(default: "webp"))
            }
            return Data(bytesNoCopy: buffer, count: length, deallocator: .custom { pointer, _ in g_free(pointer) })
        }
    }

    /// The synthetic image blurred (sigma 2) and re-encoded: soft like a photograph, without per-pixel noise.
    func smoothed(_ data: Data, format: ImageSynthesizer.Format) throws -> Data {
        let bitmap = try libvipsFast.decode(.data(data))
        let blurred = try ImageProcessors.GaussianBlur(sigma: 2).process(bitmap)
        return try ImageEncoder().encode(
            blurred, as: format == .webp(lossless: true) ? .webp(lossless: true) : .webp(quality: 90)
        ).data
    }

}

/// Rebuilds WebP files chunk by chunk, for tests of the container reader.
enum WebPChunks {
    static func little32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8((value >> (8 * $0)) & 0xFF) } }
    static func little24(_ value: Int) -> [UInt8] { (0..<3).map { UInt8((value >> (8 * $0)) & 0xFF) } }

    static func chunk(_ fourcc: String, _ payload: [UInt8]) -> [UInt8] {
        Array(fourcc.utf8) + little32(payload.count) + payload + (payload.count % 2 == 1 ? [0] : [])
    }

    static func riff(_ chunks: [UInt8]) -> Data {
        let body = Array("WEBP".utf8) + chunks
        return Data(Array("RIFF".utf8) + little32(body.count) + body)
    }

    /// The payload of the first chunk named `fourcc` (empty when there is none).
    static func payload(of fourcc: String, in data: Data) -> [UInt8] {
        let bytes = [UInt8](data)
        var offset = 12
        while offset + 8 <= bytes.count {
            let size = bytes[offset + 4..<offset + 8].enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
            let end = min(bytes.count, offset + 8 + size)
            if Array(bytes[offset..<offset + 4]) == Array(fourcc.utf8) { return Array(bytes[(offset + 8)..<end]) }
            offset = end + size % 2
        }
        return []
    }

    /// A simple (VP8-only) lossy file around `vp8Payload`.
    static func simple(vp8Payload: [UInt8]) -> Data { riff(chunk("VP8 ", vp8Payload)) }

    /// The lossy `simple` file as an extended one (VP8X) with an ICC profile and/or an EXIF chunk.
    static func extended(_ simple: Data, icc: [UInt8]? = nil, exif: [UInt8]? = nil) -> Data {
        let vp8 = payload(of: "VP8 ", in: simple)
        // The key frame header's 14-bit sizes (bytes 6–9 of the payload).
        let width = (Int(vp8[6]) | Int(vp8[7]) << 8) & 0x3FFF, height = (Int(vp8[8]) | Int(vp8[9]) << 8) & 0x3FFF
        let flags: UInt8 = (icc != nil ? 0x20 : 0) | (exif != nil ? 0x08 : 0)
        var chunks = chunk("VP8X", [flags, 0, 0, 0] + little24(width - 1) + little24(height - 1))
        if let icc { chunks += chunk("ICCP", icc) }
        chunks += chunk("VP8 ", vp8)
        if let exif { chunks += chunk("EXIF", exif) }
        return riff(chunks)
    }
}
