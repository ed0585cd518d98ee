import CVipsShim
import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// The direct libjpeg-turbo path: which JPEGs take it (decided from the
/// header), and that what it returns is what the libvips path returns.
final class DirectJPEGTests: XCTestCase {
    let fast = ImageDecoder()
    let libvipsFast = ImageDecoder.libvipsOnly()
    let quality = ImageDecoder(options: DecodeOptions(shrinkOnLoad: .quality))
    let strict = ImageDecoder(options: DecodeOptions(strict: true))

    // MARK: - Routes

    func testPlainJPEGsTakeTheDirectPath() throws {
        for format: ImageSynthesizer.Format in [.jpeg(), .jpeg(progressive: true), .jpeg(orientation: 6)] {
            let data = try ImageSynthesizer.data(width: 120, height: 80, format: format)
            XCTAssertEqual(try fast.route(.data(data)), .direct, "\(format)")
        }
        XCTAssertEqual(try fast.route(.data(try greyJPEG())), .direct, "grey")
        let srgb = try ImageSynthesizer.data(width: 120, height: 80, iccProfile: "srgb", format: .jpeg())
        XCTAssertEqual(try fast.route(.data(srgb)), .direct, "an sRGB profile")
    }

    func testEverythingElseIsSentToLibvipsFromTheHeader() throws {
        let plain = try ImageSynthesizer.data(width: 120, height: 80, format: .jpeg())
        XCTAssertEqual(try quality.route(.data(plain)), .libvips("quality mode uses libvips' lanczos path"))
        XCTAssertEqual(try fast.route(.data(plain), allowUpscale: true), .libvips("upscaling"))

        let cmyk = try ImageSynthesizer.data(width: 120, height: 80, format: .jpeg(cmyk: true))
        XCTAssertEqual(try fast.route(.data(cmyk)), .libvips("CMYK or YCCK"))
        let p3 = try ImageSynthesizer.data(width: 120, height: 80, iccProfile: "p3", format: .jpeg())
        XCTAssertEqual(try fast.route(.data(p3)), .libvips("ICC profile is not sRGB"))

        // Frame types libjpeg-turbo's scaled path is not used for: the SOF marker alone decides.
        XCTAssertEqual(try fast.route(.data(withFrameMarker(0xC9, plain))), .libvips("arithmetic coding"))
        XCTAssertEqual(try fast.route(.data(withFrameMarker(0xC3, plain))), .libvips("lossless or hierarchical frame"))
        XCTAssertEqual(try fast.route(.data(withPrecision(12, plain))), .libvips("12-bit samples"))
        XCTAssertEqual(try fast.route(.data(Data(plain.prefix(40)))), .libvips("markers not understood"))
    }

    func testArithmeticCodedJPEGDecodesThroughLibvips() throws {
        // jpegtran (libjpeg-turbo-progs, installed by scripts/setup.sh) re-codes losslessly.
        let folder = try TemporaryFolder()
        let plain = try folder.write(
            try ImageSynthesizer.data(width: 320, height: 240, seed: 3, format: .jpeg()), named: "plain.jpg")
        let arithmetic = folder.path("arithmetic.jpg")
        let tool = try XCTUnwrap(
            ["/usr/bin/jpegtran", "/usr/local/bin/jpegtran"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "jpegtran is installed by scripts/setup.sh")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = ["-arithmetic", "-outfile", arithmetic, plain]
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        XCTAssertEqual(try fast.route(.file(arithmetic)), .libvips("arithmetic coding"))
        let decoded = try fast.decode(.file(arithmetic), size: .maxPixelSize(100))
        let reference = try fast.decode(.file(plain), size: .maxPixelSize(100))
        XCTAssertEqual(decoded.width, reference.width)
        XCTAssertLessThan(decoded.meanAbsoluteDifference(to: reference), 1.0, "the same coefficients, decoded")
    }

    func testTwelveBitHeaderFailsTyped() throws {
        let plain = try ImageSynthesizer.data(width: 120, height: 80, format: .jpeg())
        assertThrowsKind(.corruptData) { () throws(VipsError) in
            try fast.decode(.data(withPrecision(12, plain)), size: .maxPixelSize(50))
        }
    }

    // MARK: - Pixels and sizes

    func testSizesAreTodaysFastModeAndPixelsMatchTheLibvipsPaths() throws {
        let sources: [(Int, Int, ImageSynthesizer.Format)] = [
            (1600, 1200, .jpeg(quality: 90)), (1600, 1200, .jpeg(quality: 85, progressive: true)),
            (641, 479, .jpeg()), (999, 333, .jpeg(quality: 75)), (2, 48, .jpeg()), (640, 480, .jpeg(orientation: 6))
        ]
        for (index, (width, height, format)) in sources.enumerated() {
            let data = try ImageSynthesizer.data(width: width, height: height, seed: 60 + index, format: format)
            XCTAssertEqual(try fast.route(.data(data)), .direct)
            for size in [
                TargetSize.maxPixelSize(256), .maxPixelSize(200), .fit(width: 100, height: 37), .maxPixelSize(8),
                .original
            ] {
                let label = "\(width)×\(height) \(format) → \(size)"
                let direct = try fast.decode(.data(data), size: size)
                let viaLibvips = try libvipsFast.decode(.data(data), size: size)
                XCTAssertEqual(direct.width, viaLibvips.width, label)
                XCTAssertEqual(direct.height, viaLibvips.height, label)
                guard direct.width == viaLibvips.width, direct.height == viaLibvips.height else { continue }
                // The same libjpeg scaling and the same kernel (CubicReducer vs vips_resize's
                // cubic): within rounding of each other.
                let (fastMean, fastMaximum) = pixelDifference(direct, viaLibvips)
                // (Tiny outputs, tens of pixels from a reduction of 100× or more, average over few pixels.)
                XCTAssertLessThanOrEqual(
                    fastMean, direct.width * direct.height >= 4096 ? 0.5 : 1.5, "\(label): mean vs libvips' fast path")
                XCTAssertLessThanOrEqual(fastMaximum, 8, "\(label): max vs libvips' fast path")
                // Against the quality path (lanczos3 from twice the size) the direct path is no
                // further than today's fast path, within rounding. (On these synthetic images, with per-pixel noise
                // and one-pixel hard edges, both differ from it by 1–4 levels on average, 20–46 at
                // most: the two kernels' aliasing, not the decoder.)
                let reference = try quality.decode(.data(data), size: size)
                guard reference.width == direct.width, reference.height == direct.height else { continue }
                let (mean, maximum) = pixelDifference(direct, reference)
                let (oldMean, oldMaximum) = pixelDifference(viaLibvips, reference)
                XCTAssertLessThanOrEqual(mean, oldMean + 0.25, "\(label): mean vs the libvips quality path")
                XCTAssertLessThanOrEqual(maximum, oldMaximum + 8, "\(label): max vs the libvips quality path")
            }
        }
    }

    func testEveryOrientationOnTheDirectPath() throws {
        for orientation in 1...8 {
            let data = try ImageSynthesizer.data(
                width: 320, height: 200, seed: 70, marker: true, format: .jpeg(orientation: orientation))
            XCTAssertEqual(try fast.route(.data(data)), .direct)
            XCTAssertEqual(try fast.info(.data(data)).orientation, orientation, "the direct codec's header")
            XCTAssertEqual(try libvipsFast.info(.data(data)).orientation, orientation, "libvips reads the same tag")
            for size in [TargetSize.maxPixelSize(80), .original] {
                let direct = try fast.decode(.data(data), size: size)
                let viaLibvips = try libvipsFast.decode(.data(data), size: size)
                XCTAssertEqual(
                    [direct.width, direct.height], [viaLibvips.width, viaLibvips.height], "orientation \(orientation)")
                XCTAssertEqual(direct.width > direct.height, orientation < 5, "upright, orientation \(orientation)")
                XCTAssertLessThan(
                    direct.meanAbsoluteDifference(to: viaLibvips), 0.5, "orientation \(orientation) \(size)")
            }
        }
    }

    func testEXIFReaderOverHostileBytes() {
        func read(_ bytes: [UInt8]) -> Int? { bytes.withUnsafeBytes { EXIFOrientation.read($0) } }
        let good: [UInt8] = [0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0]
        XCTAssertEqual(read(good), 6)
        XCTAssertEqual(read(Array("Exif".utf8) + [0, 0] + good), 6, "with JPEG's prefix")
        var little: [UInt8] = [
            0x49, 0x49, 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0
        ]
        XCTAssertEqual(read(little), 3)
        little[18] = 9
        XCTAssertEqual(read(little), 1, "out of range: libvips reads 1")
        // Stored as LONG (against the specification): libexif's fix makes it SHORT, as libvips reads it.
        var long: [UInt8] = [
            0x49, 0x49, 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 4, 0, 1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0
        ]
        XCTAssertEqual(read(long), 8, "LONG")
        long[12] = 2 // ASCII, "\u{8}": no digits, so libvips' atoi reads 0, out of range
        XCTAssertEqual(read(long), 1, "ASCII")
        XCTAssertNil(read(Array(good.prefix(19))), "value cut off")
        var offset = good
        offset.replaceSubrange(4..<8, with: [0xFF, 0xFF, 0xFF, 0xF0])
        XCTAssertNil(read(offset), "IFD offset outside")
        var count = good
        count.replaceSubrange(8..<10, with: [0xFF, 0xFF])
        XCTAssertEqual(read(count), 6, "an entry count beyond the bytes is cut to what is there")
        XCTAssertNil(read([]))
    }

    func testSeveralEXIFSegmentsAreReadAsLibvipsReadsThem() throws {
        // libvips keeps the first APP1 that starts "Exif" (a generated JPEG has one of its own, after
        // these) and ignores the rest, even when the first holds no orientation. The direct codec's
        // header must say the same.
        let plain = [UInt8](try ImageSynthesizer.data(width: 64, height: 40, seed: 13, format: .jpeg()))
        func app1(_ payload: [UInt8]) -> [UInt8] {
            [0xFF, 0xE1, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 0xFF)] + payload
        }
        func exif(tag: UInt16, value: UInt8) -> [UInt8] {
            Array("Exif".utf8) + [0, 0, 0x4D, 0x4D, 0, 42, 0, 0, 0, 8, 0, 1, UInt8(tag >> 8), UInt8(tag & 0xFF)]
                + [0, 3, 0, 0, 0, 1, 0, value, 0, 0, 0, 0, 0, 0]
        }
        let orientation: UInt16 = 0x0112, software: UInt16 = 0x0131
        let cases: [(String, [[UInt8]], Int)] = [
            ("6 then 3", [exif(tag: orientation, value: 6), exif(tag: orientation, value: 3)], 6),
            ("none then 3", [exif(tag: software, value: 3), exif(tag: orientation, value: 3)], 1),
            ("garbage then 8", [Array("ExifXY".utf8) + [1, 2, 3, 4, 5, 6], exif(tag: orientation, value: 8)], 1),
            ("9 then 5", [exif(tag: orientation, value: 9), exif(tag: orientation, value: 5)], 1),
            ("no Exif prefix then 7", [Array("XMP".utf8) + [0, 1, 2], exif(tag: orientation, value: 7)], 7)
        ]
        for (label, segments, expected) in cases {
            let data = Data(plain.prefix(2) + segments.flatMap(app1) + plain.dropFirst(2))
            XCTAssertEqual(try fast.route(.data(data)), .direct, label)
            XCTAssertEqual(try libvipsFast.info(.data(data)).orientation, expected, "\(label): libvips")
            XCTAssertEqual(try fast.info(.data(data)).orientation, expected, "\(label): the direct codec")
            let direct = try fast.decode(.data(data), size: .maxPixelSize(32))
            let viaLibvips = try libvipsFast.decode(.data(data), size: .maxPixelSize(32))
            XCTAssertEqual([direct.width, direct.height], [viaLibvips.width, viaLibvips.height], label)
        }
    }

    // MARK: - Errors and limits

    func testHostileAPP1AndAPP2SegmentsGiveTypedErrorsOrBitmaps() throws {
        let plain = [UInt8](try ImageSynthesizer.data(width: 96, height: 64, seed: 12, format: .jpeg(quality: 60)))
        func inserting(_ marker: UInt8, _ payload: [UInt8]) -> Data {
            let length = min(payload.count + 2, 0xFFFF)
            return Data(
                plain.prefix(2) + [0xFF, marker, UInt8(length >> 8), UInt8(length & 0xFF)]
                    + payload.prefix(length - 2) + plain.dropFirst(2))
        }
        var generator = SystemRandomNumberGenerator()
        var inputs: [Data] = []
        let exif = Array("Exif".utf8) + [0, 0]
        let tiffHeaders: [[UInt8]] = [[0x4D, 0x4D, 0, 42], [0x49, 0x49, 42, 0]]
        for index in 0..<120 {
            // An EXIF TIFF structure with random offsets, counts and values after a valid header.
            var tiff = tiffHeaders[index % 2]
            tiff += (0..<(8 + index % 40)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if index % 3 == 0 { tiff.replaceSubrange(4..<8, with: index % 2 == 0 ? [0, 0, 0, 8] : [8, 0, 0, 0]) }
            inputs.append(inserting(0xE1, exif + tiff))
        }
        let icc = Array("ICC_PROFILE".utf8) + [0]
        let profile = [UInt8](ICCProfileWriter.adobeRGB())
        for (sequence, total) in [(0, 1), (2, 1), (1, 2), (1, 0), (255, 255), (1, 1)] {
            // Bad sequence numbers, missing chunks, a chunk claiming more than there is.
            inputs.append(inserting(0xE2, icc + [UInt8(sequence), UInt8(total)] + profile))
            inputs.append(inserting(0xE2, icc + [UInt8(sequence), UInt8(total)] + profile.prefix(40)))
        }
        var doubled = [UInt8](inserting(0xE2, icc + [1, 1] + profile))
        doubled = Array(doubled.prefix(2)) + [0xFF, 0xE2, 0, 16] + icc + [1, 1] + doubled.dropFirst(2)
        inputs.append(Data(doubled))
        let iccRoutes: [DecodeRoute] = [.libvips("ICC profile is not sRGB"), .libvips("ICC profile chunks malformed")]
        for (index, input) in inputs.enumerated() {
            let label = index < 120 ? "EXIF \(index)" : "ICC \(index - 120)"
            for decoder in [fast, strict] {
                let route = assertRouteHolds(decoder, .data(input), size: .maxPixelSize(48), label)
                if index < 120 {
                    // What an APP1 segment holds never changes the route.
                    XCTAssertEqual(route, .direct, label)
                } else {
                    // A profile that is not sRGB, whole or cut, or chunks that do not fit: libvips.
                    XCTAssertTrue(route.map(iccRoutes.contains) ?? false, "\(label): \(String(describing: route))")
                }
                assertThumbnailOrStrictFailure(decoder, .data(input), side: 48, label)
            }
        }
        // A truncated ICC profile is not taken for sRGB: such files go to libvips.
        XCTAssertEqual(
            try fast.route(.data(inserting(0xE2, icc + [1, 1] + profile.prefix(40)))),
            .libvips("ICC profile is not sRGB"))
        XCTAssertEqual(
            try fast.route(.data(inserting(0xE2, icc + [2, 1] + profile))), .libvips("ICC profile chunks malformed"))
    }

    func testStrictTurnsLibjpegWarningsIntoErrors() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 41, format: .jpeg())
        let half = Data(data.prefix(data.count / 2))
        XCTAssertEqual(try strict.route(.data(half)), .direct)
        assertThrowsKind(.truncatedData) { () throws(VipsError) in
            try strict.decode(.data(half), size: .maxPixelSize(64))
        }
        XCTAssertEqual(try fast.decode(.data(half), size: .maxPixelSize(64)).width, 64, "lenient decodes what is there")

        // Garbage in the entropy-coded data: a corrupt-data warning.
        var garbled = [UInt8](data)
        let start = garbled.count / 3
        for index in start..<(start + 400) { garbled[index] = UInt8(truncatingIfNeeded: index &* 131) | 0x01 }
        let corrupt = Data(garbled)
        XCTAssertEqual(try strict.route(.data(corrupt)), .direct)
        let error = assertThrowsKind(.corruptData) { () throws(VipsError) in
            try strict.decode(.data(corrupt), size: .maxPixelSize(64))
        }
        XCTAssertNotNil(error)
        XCTAssertNoThrow(try fast.decode(.data(corrupt), size: .maxPixelSize(64)))
    }

    func testLimitsAreCheckedFromTheHeaderBeforeAnyAllocation() throws {
        let plain = try ImageSynthesizer.data(width: 64, height: 48, format: .jpeg())
        // The frame header claims 60000×60000; the file is a few KB.
        let huge = withFrameSize(width: 60000, height: 60000, plain)
        XCTAssertEqual(try fast.route(.data(huge)), .direct)
        let error = assertThrowsKind(.tooLarge) { () throws(VipsError) in
            try fast.decode(.data(huge), size: .maxPixelSize(64))
        }
        XCTAssertTrue(error?.message.contains("60000×60000") ?? false, error?.message ?? "")
        let small = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 1000)))
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try small.decode(.data(plain), size: .maxPixelSize(8)) }
    }

    func testFilesTakeTheDirectPathToo() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write(
            try ImageSynthesizer.data(width: 800, height: 600, seed: 9, format: .jpeg()), named: "a.jpg")
        XCTAssertEqual(try fast.route(.file(path)), .direct)
        let fromFile = try fast.decode(.file(path), size: .maxPixelSize(128))
        let fromData = try fast.decode(
            .data(try Data(contentsOf: URL(fileURLWithPath: path))), size: .maxPixelSize(128))
        XCTAssertEqual(fromFile.bytes, fromData.bytes)
        // A file above the mapping limit streams through libvips instead (its pages would
        // all be resident during the decode): here a small JPEG padded after its EOI.
        var padded = try Data(contentsOf: URL(fileURLWithPath: path))
        padded.append(Data(count: JPEGCodec.directFileLimit))
        let large = try folder.write(padded, named: "padded.jpg")
        XCTAssertEqual(try fast.route(.file(large)), .libvips("file larger than 8 MiB (streamed)"))
        XCTAssertEqual(try fast.decode(.file(large), size: .maxPixelSize(128)).width, 128)
        XCTAssertEqual(try fast.route(.data(padded)), .direct, "bytes already in memory are not mapped")
        // A missing file fails as it did before the direct path (from the size probe).
        assertThrowsKind(.io) { () throws(VipsError) in
            try fast.decode(.file(folder.path("missing.jpg")), size: .maxPixelSize(8))
        }
    }

    // MARK: - Helpers

    func greyJPEG() throws -> Data {
        let png = try ImageSynthesizer.data(width: 120, height: 80, format: .png(grey: true))
        return try ImageInput.data(png).withSource { source throws(VipsError) in
            let image = try ImageDecoder.load("grey") {
                vl_load_named(LibVips.table, "pngload_source", source, VIPS_ACCESS_SEQUENTIAL, VIPS_FAIL_ON_NONE)
            }
            var buffer: UnsafeMutableRawPointer? = nil
            var length = 0
            guard
                vl_jpegsave_options(
                    LibVips.table, image.pointer, &buffer, &length, 90, 0, VIPS_FOREIGN_SUBSAMPLE_AUTO, 1) == 0,
                let buffer
            else {
                throw VipsError(.encodeFailed, VipsRuntime.takeErrorMessage(default: "jpeg"))
            }
            return Data(bytesNoCopy: buffer, count: length, deallocator: .custom { pointer, _ in g_free(pointer) })
        }
    }

    /// The offset of the SOF segment's marker byte.
    func frameOffset(_ data: [UInt8]) -> Int? {
        var index = 2
        while index + 4 <= data.count, data[index] == 0xFF {
            let marker = data[index + 1]
            if [0xC0, 0xC1, 0xC2].contains(marker) { return index + 1 }
            index += 2 + (Int(data[index + 2]) << 8 | Int(data[index + 3]))
        }
        return nil
    }

    func withFrameMarker(_ marker: UInt8, _ data: Data) -> Data {
        var bytes = [UInt8](data)
        bytes[frameOffset(bytes)!] = marker
        return Data(bytes)
    }

    func withPrecision(_ bits: UInt8, _ data: Data) -> Data {
        var bytes = [UInt8](data)
        bytes[frameOffset(bytes)! + 3] = bits
        return Data(bytes)
    }

    func withFrameSize(width: Int, height: Int, _ data: Data) -> Data {
        var bytes = [UInt8](data)
        let at = frameOffset(bytes)! + 4
        bytes.replaceSubrange(
            at..<(at + 4), with: [UInt8(height >> 8), UInt8(height & 0xFF), UInt8(width >> 8), UInt8(width & 0xFF)])
        return Data(bytes)
    }

}
