import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// The direct libspng path: which PNGs take it (decided from the header),
/// and that what it returns is what the libvips path returns.
final class DirectPNGTests: XCTestCase {
    let fast = ImageDecoder()
    let libvipsFast = ImageDecoder.libvipsOnly()
    let quality = ImageDecoder(options: DecodeOptions(shrinkOnLoad: .quality))
    let strict = ImageDecoder(options: DecodeOptions(strict: true))
    let libvipsStrict = ImageDecoder.libvipsOnly(DecodeOptions(strict: true))

    /// Every kind of PNG the direct path takes, as (label, bytes).
    func directKinds(width: Int = 300, height: Int = 200, seed: Int = 1) throws -> [(String, Data)] {
        let formats: [(String, ImageSynthesizer.Format)] = [
            ("RGB", .png()), ("grey", .png(grey: true)), ("16-bit RGB", .png(sixteenBit: true)),
            ("16-bit grey", .png(sixteenBit: true, grey: true)), ("palette", .png(palette: true)),
            ("interlaced", .png(interlaced: true))
        ]
        var kinds: [(String, Data)] = []
        for alpha in [false, true] {
            for (name, format) in formats {
                kinds.append(
                    (
                        name + (alpha ? " + alpha" : ""),
                        try ImageSynthesizer.data(
                            width: width, height: height, seed: seed, alpha: alpha, format: format)
                    ))
            }
        }
        return kinds
    }

    // MARK: - Routes

    func testPlainPNGsTakeTheDirectPath() throws {
        for (label, data) in try directKinds() {
            XCTAssertEqual(try fast.route(.data(data)), .direct, label)
        }
        let srgb = try ImageSynthesizer.data(width: 120, height: 80, iccProfile: "srgb", format: .png())
        XCTAssertEqual(try fast.route(.data(srgb)), .direct, "an sRGB profile")
        XCTAssertEqual(
            try fast.route(.data(try Self.withChunk("eXIf", Self.orientationEXIF(6), into: srgb))), .direct, "eXIf")
    }

    func testEverythingElseIsSentToLibvipsFromTheHeader() throws {
        let plain = try ImageSynthesizer.data(width: 120, height: 80, format: .png())
        XCTAssertEqual(try quality.route(.data(plain)), .libvips("quality mode uses libvips' lanczos path"))
        XCTAssertEqual(try fast.route(.data(plain), allowUpscale: true), .libvips("upscaling"))
        // Interlaced beyond the budget for decoding it whole (from the IHDR alone).
        let interlaced = Self.png(width: 5000, height: 4000, interlaced: true)
        XCTAssertEqual(try fast.route(.data(interlaced)), .libvips("interlaced (Adam7) over 48 MiB decoded"))
        XCTAssertEqual(try fast.route(.data(Self.png(width: 2000, height: 1500, interlaced: true))), .direct)
        let p3 = try ImageSynthesizer.data(width: 120, height: 80, iccProfile: "p3", format: .png())
        XCTAssertEqual(try fast.route(.data(p3)), .libvips("ICC profile is not sRGB"))
        // An acTL chunk (APNG): libvips decides what it shows.
        let animated = try Self.withChunk("acTL", [0, 0, 0, 1, 0, 0, 0, 0], into: plain)
        XCTAssertEqual(try fast.route(.data(animated)), .libvips("animated (APNG)"))
        XCTAssertEqual(try fast.route(.data(Data(plain.prefix(20)))), .libvips("header not understood by libspng"))
        // A reduce too large to hold: streamed by libvips.
        let wide = try ImageSynthesizer.data(width: 4000, height: 3000, format: .png())
        guard case .libvips(let reason) = try fast.route(.data(wide), size: .maxPixelSize(3500)) else {
            return XCTFail("a 4000×3000 → 3500 reduce is streamed by libvips")
        }
        XCTAssertTrue(reason.hasPrefix("residual reduce needs"), reason)
        XCTAssertEqual(try fast.route(.data(wide), size: .maxPixelSize(256)), .direct, "while a thumbnail of it is not")
    }

    func testRoutedToLibvipsStillDecodeAsBefore() throws {
        let p3 = try ImageSynthesizer.data(width: 300, height: 200, seed: 5, iccProfile: "p3", format: .png())
        let animated = try Self.withChunk(
            "acTL", [0, 0, 0, 1, 0, 0, 0, 0],
            into: try ImageSynthesizer.data(width: 300, height: 200, seed: 5, format: .png()))
        for data in [p3, animated] {
            let decoded = try fast.decode(.data(data), size: .maxPixelSize(100))
            let reference = try libvipsFast.decode(.data(data), size: .maxPixelSize(100))
            XCTAssertEqual(decoded.bytes, reference.bytes, "the same libvips decode")
        }
    }

    // MARK: - Pixels and sizes

    func testSizesAreTodaysFastModeAndPixelsMatchTheLibvipsPath() throws {
        for (width, height) in [(300, 200), (97, 33)] {
            for (label, data) in try directKinds(width: width, height: height, seed: width) {
                for size in [
                    TargetSize.maxPixelSize(256), .maxPixelSize(100), .fit(width: 50, height: 37), .maxPixelSize(8),
                    .original, .maxPixelSize(2000)
                ] {
                    let what = "\(width)×\(height) \(label) → \(size)"
                    XCTAssertNotNil(
                        try fast.decodeDirectly(.data(data), size: size),
                        "\(what): decoded on the direct path, not handed back to libvips")
                    let direct = try fast.decode(.data(data), size: size)
                    let viaLibvips = try libvipsFast.decode(.data(data), size: size)
                    XCTAssertEqual(
                        [direct.width, direct.height, direct.channels],
                        [viaLibvips.width, viaLibvips.height, viaLibvips.channels], what)
                    guard direct.width == viaLibvips.width, direct.height == viaLibvips.height,
                        direct.channels == viaLibvips.channels
                    else { continue }
                    let (mean, maximum) = pixelDifference(direct, viaLibvips)
                    XCTAssertLessThanOrEqual(mean, 1.0, "\(what): mean")
                    XCTAssertLessThanOrEqual(maximum, 16, "\(what): max")
                }
            }
        }
    }

    func testPhotographicPNGsMatchTheLibvipsPath() throws {
        // The benchmark corpus' kind: 2000×1500 photos, with and without alpha.
        for alpha in [false, true] {
            let data = try ImageSynthesizer.data(width: 2000, height: 1500, seed: 9, alpha: alpha, format: .png())
            let direct = try fast.decode(.data(data), size: .maxPixelSize(256))
            let viaLibvips = try libvipsFast.decode(.data(data), size: .maxPixelSize(256))
            XCTAssertEqual(
                [direct.width, direct.height, direct.channels],
                [viaLibvips.width, viaLibvips.height, viaLibvips.channels])
            let (mean, maximum) = pixelDifference(direct, viaLibvips)
            XCTAssertLessThanOrEqual(mean, 1.0, "alpha \(alpha)")
            XCTAssertLessThanOrEqual(maximum, 16, "alpha \(alpha)")
        }
    }

    func testTransparencyChunksBecomeAlphaAsInLibvips() throws {
        // A colour key on RGB and on grey (tRNS), and a palette with alpha entries (PLTE + tRNS).
        let rgb = try ImageSynthesizer.data(width: 240, height: 160, seed: 21, format: .png())
        let grey = try ImageSynthesizer.data(width: 240, height: 160, seed: 21, format: .png(grey: true))
        let palette = try ImageSynthesizer.data(
            width: 240, height: 160, seed: 21, alpha: true, format: .png(palette: true))
        let keyed: [(String, Data)] = [
            ("RGB + tRNS", try Self.withChunk("tRNS", [0, 128, 0, 128, 0, 128], into: rgb)),
            ("grey + tRNS", try Self.withChunk("tRNS", [0, 128], into: grey)),
            ("palette + tRNS", palette)
        ]
        for (label, data) in keyed {
            XCTAssertEqual(try fast.route(.data(data)), .direct, label)
            XCTAssertEqual(try Self.chunks(of: data)?.hasTRNS, true, label)
            for size in [TargetSize.maxPixelSize(100), .original] {
                XCTAssertNotNil(
                    try fast.decodeDirectly(.data(data), size: size), label)
                let direct = try fast.decode(.data(data), size: size)
                let viaLibvips = try libvipsFast.decode(.data(data), size: size)
                XCTAssertEqual(direct.channels, 4, "\(label): alpha kept")
                XCTAssertEqual(
                    [direct.width, direct.height, direct.channels],
                    [viaLibvips.width, viaLibvips.height, viaLibvips.channels])
                guard direct.bytes.count == viaLibvips.bytes.count else { continue }
                let (mean, maximum) = pixelDifference(direct, viaLibvips)
                XCTAssertLessThanOrEqual(mean, 1.0, "\(label) \(size)")
                XCTAssertLessThanOrEqual(maximum, 16, "\(label) \(size)")
            }
        }
    }

    func testEveryEXIFOrientationAsLibvipsReadsIt() throws {
        let plain = try ImageSynthesizer.data(width: 320, height: 200, seed: 70, marker: true, format: .png())
        for orientation in 1...8 {
            let data = try Self.withChunk("eXIf", Self.orientationEXIF(UInt8(orientation)), into: plain)
            XCTAssertEqual(try fast.route(.data(data)), .direct)
            XCTAssertEqual(try fast.info(.data(data)).orientation, orientation, "the direct codec's header")
            XCTAssertEqual(try libvipsFast.info(.data(data)).orientation, orientation, "libvips reads the same chunk")
            for size in [TargetSize.maxPixelSize(80), .original] {
                XCTAssertNotNil(
                    try fast.decodeDirectly(.data(data), size: size)
                )
                let direct = try fast.decode(.data(data), size: size)
                let viaLibvips = try libvipsFast.decode(.data(data), size: size)
                XCTAssertEqual(
                    [direct.width, direct.height], [viaLibvips.width, viaLibvips.height], "orientation \(orientation)")
                XCTAssertEqual(direct.width > direct.height, orientation < 5, "upright, orientation \(orientation)")
                XCTAssertEqual(direct.source?.info.orientation, orientation)
                guard direct.width == viaLibvips.width, direct.height == viaLibvips.height else { continue }
                XCTAssertLessThan(
                    direct.meanAbsoluteDifference(to: viaLibvips), 1.0, "orientation \(orientation) \(size)")
            }
        }
    }

    func testGammaAndChromaticityChunksAreIgnoredAsLibvipsDoes() throws {
        let plain = try ImageSynthesizer.data(width: 200, height: 150, seed: 31, format: .png())
        // gAMA 1/1.0 (linear) and a cHRM with odd primaries: libvips 8.14 applies neither.
        let gamma = try Self.withChunk("gAMA", [0, 1, 0x86, 0xA0], into: plain)
        let chromaticity = try Self.withChunk(
            "cHRM", [UInt8](repeating: 0, count: 24).enumerated().map { UInt8(($0.offset * 37) & 0x7F) },
            into: gamma)
        for data in [gamma, chromaticity] {
            XCTAssertEqual(try fast.route(.data(data)), .direct)
            let direct = try fast.decode(.data(data), size: .maxPixelSize(100))
            XCTAssertEqual(
                direct.bytes, try fast.decode(.data(plain), size: .maxPixelSize(100)).bytes,
                "pixels as without the chunk")
            XCTAssertLessThanOrEqual(
                pixelDifference(direct, try libvipsFast.decode(.data(data), size: .maxPixelSize(100))).mean, 1.0)
        }
    }

    func testFilesDecodeLikeTheSameBytesInMemory() throws {
        let folder = try TemporaryFolder()
        for (label, data) in try directKinds(width: 200, height: 120, seed: 4) {
            let path = try folder.write(data, named: "image.png")
            XCTAssertEqual(try fast.route(.file(path)), .direct, label)
            XCTAssertEqual(
                try fast.decode(.file(path), size: .maxPixelSize(64)).bytes,
                try fast.decode(.data(data), size: .maxPixelSize(64)).bytes, label)
        }
    }

    // MARK: - Errors and limits

    func testLimitsAreCheckedFromTheHeaderBeforeAnyPixel() throws {
        let data = try ImageSynthesizer.data(width: 300, height: 200, format: .png())
        let tight = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 300 * 200 - 1)))
        XCTAssertEqual(try tight.route(.data(data)), .direct)
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try tight.decode(.data(data), size: .maxPixelSize(50)) }
        let narrow = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxDimension: 299)))
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try narrow.decode(.data(data), size: .maxPixelSize(50)) }
    }

    func testTruncatedAndCorruptFilesFailTypedWhenStrictAndDecodeAsLibvipsWhenLenient() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 41, format: .png())
        let half = Data(data.prefix(data.count / 2))
        XCTAssertEqual(try strict.route(.data(half)), .direct, "the header is whole")
        assertThrowsKind(.truncatedData) { () throws(VipsError) in
            try strict.decode(.data(half), size: .maxPixelSize(64))
        }
        // Lenient: what libvips makes of it, exactly (the damaged file is handed to it).
        XCTAssertNil(try fast.decodeDirectly(.data(half), size: .maxPixelSize(64)))
        XCTAssertEqual(
            try fast.decode(.data(half), size: .maxPixelSize(64)).bytes,
            try libvipsFast.decode(.data(half), size: .maxPixelSize(64)).bytes)

        // Garbage inside the image data: the chunk's CRC no longer matches.
        var garbled = [UInt8](data)
        let start = garbled.count / 2
        for index in start..<(start + 300) { garbled[index] = UInt8(truncatingIfNeeded: index &* 131) }
        let corrupt = Data(garbled)
        assertThrowsKind(.corruptData) { () throws(VipsError) in
            try strict.decode(.data(corrupt), size: .maxPixelSize(64))
        }
        XCTAssertThrowsError(
            try libvipsStrict.decode(.data(corrupt), size: .maxPixelSize(64)), "libvips refuses it too")
        let lenient = try fast.decode(.data(corrupt), size: .maxPixelSize(64))
        XCTAssertEqual(lenient.bytes, try libvipsFast.decode(.data(corrupt), size: .maxPixelSize(64)).bytes)
    }

    func testImageDataCRCsAreCheckedOnlyWhenStrict() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 43, format: .png())
        // Every IDAT chunk's CRC wrong, its data intact.
        var bytes = [UInt8](data), at = 8, damaged = 0
        while at + 12 <= bytes.count {
            let length = bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) }
            let end = at + 8 + length
            guard end + 4 <= bytes.count else { break }
            if bytes[(at + 4)..<(at + 8)].elementsEqual(Array("IDAT".utf8)) {
                bytes[end] ^= 0xFF
                damaged += 1
            }
            at = end + 4
        }
        XCTAssertGreaterThan(damaged, 0)
        let wrongCRCs = Data(bytes)
        // Lenient: libspng does not compute them, so the direct path decodes the image as it is.
        let lenient = try XCTUnwrap(try fast.decodeDirectly(.data(wrongCRCs), size: .maxPixelSize(64)))
        XCTAssertEqual(lenient.bytes, try fast.decode(.data(data), size: .maxPixelSize(64)).bytes)
        // Strict: the first wrong CRC fails the decode, typed.
        assertThrowsKind(.corruptData) { () throws(VipsError) in
            try strict.decode(.data(wrongCRCs), size: .maxPixelSize(64))
        }
        // A wrong CRC in a header chunk (IHDR) is still caught in both modes before any image data.
        var header = [UInt8](data)
        header[8 + 8 + 13] ^= 0xFF
        XCTAssertNotEqual(try? fast.route(.data(Data(header))), .direct)
    }

    func testHostileChunksGiveTypedErrorsOrBitmaps() throws {
        let plain = try ImageSynthesizer.data(width: 64, height: 48, seed: 12, alpha: true, format: .png())
        var generator = SplitMix64(seed: 15)
        var inputs: [Data] = []
        for (index, type) in ["eXIf", "iCCP", "tRNS", "acTL", "PLTE", "sBIT", "zTXt", "IHDR", "IDAT", "gAMA"]
            .enumerated()
        {
            for length in [0, 1, 6, 26, 300] {
                var payload = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                if type == "eXIf", length >= 8 {
                    payload.replaceSubrange(0..<4, with: index % 2 == 0 ? [0x4D, 0x4D, 0, 42] : [0x49, 0x49, 42, 0])
                }
                inputs.append(try Self.withChunk(type, payload, into: plain))
            }
        }
        // Bytes flipped anywhere, then with every CRC made right again, so libspng reads the damage.
        for _ in 0..<60 {
            var bytes = [UInt8](plain)
            for _ in 0..<4 {
                let at = 8 + Int(generator.next() % UInt64(bytes.count - 8))
                bytes[at] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
            }
            inputs.append(Data(bytes))
            inputs.append(Self.fixingCRCs(bytes))
        }
        // The routes a damaged or odd chunk can lead to (the header alone decides them).
        let known = [
            "header not understood by libspng", "animated (APNG)", "ICC profile is not sRGB", "input not readable"
        ]
        var routes: [DecodeRoute: Int] = [:]
        for (index, input) in inputs.enumerated() {
            let label = "input \(index)"
            for decoder in [fast, strict] {
                let route = assertRouteHolds(decoder, .data(input), size: .maxPixelSize(32), label)
                if let route { routes[route, default: 0] += 1 }
                if case .libvips(let reason) = route {
                    XCTAssertTrue(
                        known.contains(reason) || reason.hasPrefix("interlaced"), "\(label): routed for \(reason)")
                }
                do {
                    let bitmap = try decoder.decode(.data(input), size: .maxPixelSize(32))
                    XCTAssertTrue(
                        bitmap.width <= 32 && bitmap.height <= 32 && (bitmap.channels == 3 || bitmap.channels == 4))
                    XCTAssertEqual(bitmap.bytes.count, bitmap.width * bitmap.height * bitmap.channels)
                } catch {
                    HostileFiles.assertTyped(error, label)
                }
            }
        }
        // Both paths are exercised: most inputs stay direct, some go to libvips.
        XCTAssertGreaterThan(routes[.direct] ?? 0, inputs.count / 2, "\(routes)")
        XCTAssertGreaterThan(routes.count, 1, "\(routes)")
    }

    // MARK: - Helpers

    /// The chunks before the image data, as the direct codec reads them (nil when it cannot).
    static func chunks(of data: Data) throws -> PNGHeader? {
        try PNGCodec().withHeader(.data(data), options: DecodeOptions(), label: "data") { reading -> PNGHeader? in
            guard case .read(let header) = reading else { return nil }
            return header.chunks
        }
    }

    /// An 8-bit RGB PNG header (and an empty image data stream): enough for a route.
    static func png(width: Int, height: Int, interlaced: Bool) -> Data {
        func chunk(_ type: String, _ payload: [UInt8]) -> [UInt8] {
            let body = Array(type.utf8) + payload
            return bigEndian(UInt32(payload.count)) + body + bigEndian(crc32(body))
        }
        let ihdr = bigEndian(UInt32(width)) + bigEndian(UInt32(height)) + [8, 2, 0, 0, interlaced ? 1 : 0]
        return Data(
            [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", ihdr)
                + chunk("IDAT", [0x78, 0x9C, 3, 0, 0, 0, 0, 1])
                + chunk("IEND", []))
    }

    /// A big-endian TIFF structure holding only an orientation tag.
    static func orientationEXIF(_ orientation: UInt8) -> [UInt8] {
        [0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, orientation, 0, 0, 0, 0, 0, 0]
    }

    /// `png` with a chunk inserted right after IHDR (its CRC computed).
    static func withChunk(_ type: String, _ payload: [UInt8], into png: Data) throws -> Data {
        let bytes = [UInt8](png)
        // Signature (8) + IHDR (4 length + 4 type + 13 data + 4 CRC).
        let end = 8 + 25
        guard bytes.count > end else { throw VipsError(.invalidArgument, "not a PNG") }
        let body = Array(type.utf8) + payload
        let length = UInt32(payload.count), crc = crc32(body)
        let chunk =
            [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
            + [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
        return Data(bytes[..<end] + chunk + bytes[end...])
    }

    /// Chunks walked from the signature, each CRC recomputed (a walk that runs off the end stops).
    static func fixingCRCs(_ png: [UInt8]) -> Data {
        var bytes = png, at = 8
        while at + 12 <= bytes.count {
            let length = Int(bytes[at]) << 24 | Int(bytes[at + 1]) << 16 | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3])
            let end = at + 8 + length
            guard length >= 0, end + 4 <= bytes.count else { break }
            let crc = crc32(Array(bytes[(at + 4)..<end]))
            bytes.replaceSubrange(
                end..<(end + 4),
                with: [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)])
            at = end + 4
        }
        return Data(bytes)
    }
}
