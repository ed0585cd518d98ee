import CVipsShim
import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// Every byte is hostile: files that lie about their size, bombs, truncated and
/// bit-flipped files, wrong magic, refused formats. Each must end in a typed
/// `VipsError` (or, in lenient mode, a valid bitmap) with bounded memory, and
/// good images must still decode exactly the same afterwards, in the same process.
final class HostileInputTests: XCTestCase {
    private let decoder = ImageDecoder()
    private let strictDecoder = ImageDecoder(options: DecodeOptions(strict: true))

    // MARK: - Format identification and the allow-list

    func testFormatComesFromMagicBytesNeverFromTheFileName() throws {
        let png = try ImageSynthesizer.data(width: 40, height: 30, format: .png())
        let folder = try HostileFiles.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }

        // A PNG named .jpg is read as the PNG it is.
        let disguised = folder.appendingPathComponent("photo.jpg")
        try png.write(to: disguised)
        let info = try decoder.info(.file(disguised.path))
        XCTAssertEqual(info.format, .png)
        XCTAssertEqual(try decoder.decode(.file(disguised.path)).width, 40)

        // Text, an archive and an executable named like images are refused before any loader runs.
        let impostors: [(String, Data)] = [
            ("notes.png", Data("just some text, not an image at all\n".utf8)),
            ("archive.jpg", Data([0x50, 0x4B, 0x03, 0x04] + [UInt8](repeating: 0, count: 60))),
            ("program.gif", Data([0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0] + [UInt8](repeating: 0, count: 56))),
            ("page.webp", Data("<!DOCTYPE html><html><body>404</body></html>".utf8))
        ]
        for (name, bytes) in impostors {
            let url = folder.appendingPathComponent(name)
            try bytes.write(to: url)
            HostileFiles.assertFails(.unsupportedFormat, name) { () throws(VipsError) in
                try decoder.info(.file(url.path))
            }
            HostileFiles.assertFails(.unsupportedFormat, name) { () throws(VipsError) in
                try decoder.decode(.data(bytes))
            }
        }
    }

    func testSniffingRecognisesEachFormatFromItsFirstBytesOnly() throws {
        let samples: [(ImageSynthesizer.Format, ImageFormat)] = [
            (.jpeg(), .jpeg), (.png(), .png), (.webp(), .webp), (.gif, .gif), (.tiff, .tiff)
        ]
        for (synthetic, format) in samples {
            let data = try ImageSynthesizer.data(width: 8, height: 8, format: synthetic)
            XCTAssertEqual(ImageFormat.sniff(data.prefix(16)), format)
            // The rest of the file plays no part: the same prefix followed by garbage sniffs the same.
            XCTAssertEqual(ImageFormat.sniff(data.prefix(16) + Data(repeating: 0xEE, count: 100)), format)
        }
        XCTAssertEqual(ImageFormat.sniff(Data("\u{FEFF}  \n<svg xmlns='http://www.w3.org/2000/svg'/>".utf8)), .svg)
        XCTAssertEqual(ImageFormat.sniff(Data("P6\n1 1\n255\n".utf8)), .ppm)
        XCTAssertEqual(ImageFormat.sniff(Data("%PDF-1.7".utf8)), .pdf)
        XCTAssertEqual(ImageFormat.sniff(Data([0, 0, 0, 0x18] + Array("ftypavif".utf8) + [0, 0, 0, 0])), .avif)
        XCTAssertEqual(ImageFormat.sniff(Data([0, 0, 0, 0x18] + Array("ftypheic".utf8) + [0, 0, 0, 0])), .heif)
        // An ISO-BMFF file of another brand (an MP4 video) is not an image.
        XCTAssertNil(ImageFormat.sniff(Data([0, 0, 0, 0x18] + Array("ftypisom".utf8) + [0, 0, 0, 0])))
        for prefix in [Data(), Data([0xFF]), Data([0xFF, 0xD8]), Data("GIF8".utf8), Data("RIFF\0\0\0\0WEB".utf8)] {
            XCTAssertNil(ImageFormat.sniff(prefix), "\(Array(prefix))")
        }
        XCTAssertEqual(
            ImageFormat.defaultAllowed, [.jpeg, .png, .webp, .gif, .heif, .avif, .tiff, .bmp, .ico, .cur, .tga])
    }

    func testDisallowedFormatIsRefusedBeforeAnyLoaderRuns() throws {
        let pngOnly = ImageDecoder(options: DecodeOptions(allowedFormats: [.png]))
        let jpeg = try ImageSynthesizer.data(width: 32, height: 24, format: .jpeg())
        // Valid JPEG magic followed by garbage: if libjpeg ran, this would be corrupt data (and a
        // libvips warning); refused by the allow-list it is an unsupported format, with no warning.
        let brokenJPEG = Data([0xFF, 0xD8, 0xFF, 0xE0]) + Data(repeating: 0x5A, count: 200)
        let warnings = VipsRuntime.warningCount
        for input in [jpeg, brokenJPEG] {
            HostileFiles.assertFails(.unsupportedFormat, "jpeg not allowed") { () throws(VipsError) in
                try pngOnly.info(.data(input))
            }
            HostileFiles.assertFails(.unsupportedFormat, "jpeg not allowed") { () throws(VipsError) in
                try pngOnly.decode(.data(input), size: .maxPixelSize(16))
            }
        }
        XCTAssertEqual(VipsRuntime.warningCount, warnings, "no loader may run for a refused format")
        // The same broken bytes, allowed, do reach libjpeg and fail as corrupt.
        HostileFiles.assertFails([.corruptData, .truncatedData], "broken jpeg") { () throws(VipsError) in
            try decoder.decode(.data(brokenJPEG))
        }
        XCTAssertEqual(
            try pngOnly.decode(.data(try ImageSynthesizer.data(width: 9, height: 7, format: .png()))).width, 9)
        // An empty allow-list refuses everything.
        let nothing = ImageDecoder(options: DecodeOptions(allowedFormats: []))
        HostileFiles.assertFails(.unsupportedFormat, "empty list") { () throws(VipsError) in
            try nothing.info(.data(jpeg))
        }
    }

    func testUntrustedLoadersAreBlockedEvenWhenTheFormatIsAllowed() throws {
        let svg = Data(
            #"<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10"><rect width="20" height="10" fill="red"/></svg>"#
                .utf8)
        var ppm = Data("P6\n4 2\n255\n".utf8)
        ppm.append(Data(repeating: 200, count: 4 * 2 * 3))
        let inputs: [(String, Data, ImageFormat, Int)] = [("svg", svg, .svg, 20), ("ppm", ppm, .ppm, 4)]
        let permissive = ImageDecoder(
            options: DecodeOptions(allowedFormats: ImageFormat.defaultAllowed.union([.svg, .ppm])))

        for (name, data, format, width) in inputs {
            XCTAssertEqual(ImageFormat.sniff(data), format)
            // Not in the default allow-list: refused before libvips sees it.
            HostileFiles.assertFails(.unsupportedFormat, name) { () throws(VipsError) in try decoder.info(.data(data)) }
            // Allowed by the options, but libvips' untrusted loaders are blocked (the runtime's default).
            let error = HostileFiles.assertFails(.unsupportedFormat, name) { () throws(VipsError) in
                try permissive.decode(.data(data), size: .maxPixelSize(16))
            }
            XCTAssertTrue(error?.message.contains("untrusted") ?? false, error?.message ?? "")

            // Proof that the block, and nothing else, refused it: unblocked, the same bytes decode.
            try VipsRuntime.setUntrustedLoadersAllowed(true)
            defer { try? VipsRuntime.setUntrustedLoadersAllowed(false) }
            XCTAssertEqual(try permissive.info(.data(data)).width, width, name)
            try VipsRuntime.setUntrustedLoadersAllowed(false)
            HostileFiles.assertFails(.unsupportedFormat, "\(name) after restoring the block") { () throws(VipsError) in
                try permissive.info(.data(data))
            }
        }
    }

    func testBrokenFileOfAnAllowedFormatIsNeverHandedToAnotherLoader() throws {
        // libvips' own format guess falls back to other loaders when the expected one
        // rejects the data: a TIFF cut in half went to ImageMagick once untrusted loaders
        // were allowed (say, for SVG). The decoder calls the sniffed format's loader only.
        try VipsRuntime.setUntrustedLoadersAllowed(true)
        defer { try? VipsRuntime.setUntrustedLoadersAllowed(false) }
        let permissive = ImageDecoder(options: DecodeOptions(allowedFormats: ImageFormat.defaultAllowed.union([.svg])))
        for original in try HostileFiles.originals() {
            let sniffed = try XCTUnwrap(ImageFormat.sniff(original.data))
            for cut in [original.data.count / 2, 16] {
                let broken = original.data.prefix(cut)
                do {
                    let info = try permissive.info(.data(broken))
                    XCTAssertEqual(info.format, sniffed, "\(original.name) cut to \(cut) was read by another loader")
                } catch {
                    HostileFiles.assertTyped(error, "\(original.name) cut to \(cut)")
                    XCTAssertFalse(error.message.lowercased().contains("magick"), "\(original.name): \(error)")
                }
            }
        }
    }

    // MARK: - Decompression bombs: refused from the header, memory bounded

    func testJPEGClaiming60000SquarePixelsFailsFromTheHeader() throws {
        let bomb = try HostileFiles.jpeg(claimingWidth: 60_000, height: 60_000)
        XCTAssertLessThan(bomb.count, 10_000)
        try assertBombRefused(bomb, "60000² jpeg")
        // Patched to its true size, the same file decodes: the refusal is the claimed size.
        XCTAssertEqual(try decoder.decode(.data(try HostileFiles.jpeg(claimingWidth: 16, height: 16))).width, 16)
    }

    func testPNGWithHugeIHDRFailsFromTheHeader() throws {
        // 1,000,000² (beyond every limit), 20,000² (sides allowed, pixels not) and 70,000×1 (a side too long).
        for (width, height) in [(1_000_000, 1_000_000), (20_000, 20_000), (70_000, 1)] {
            let bomb = HostileFiles.png(width: width, height: height, idat: HostileFiles.zlibZeros(count: 4096))
            try assertBombRefused(bomb, "\(width)×\(height) png")
        }
    }

    func testGIFWithThousandsOfFramesFailsFromTheHeader() throws {
        let bomb = HostileFiles.gif(width: 1, height: 1, frames: 5_000)
        XCTAssertLessThan(bomb.count, 200_000)
        try assertBombRefused(bomb, "5000-frame gif")
        // The same structure with few frames is a valid animation: the refusal is the frame count.
        let small = HostileFiles.gif(width: 1, height: 1, frames: 3)
        XCTAssertEqual(try decoder.info(.data(small)).pages, 3)
    }

    func testGIFAndTIFFWithHugeCanvasFailFromTheHeader() throws {
        try assertBombRefused(HostileFiles.gif(width: 65_535, height: 65_535, frames: 1), "65535² gif")
        try assertBombRefused(HostileFiles.tiff(width: 60_000, height: 60_000), "60000² tiff")
        // The TIFF writer is sound: the same file at a sane size decodes.
        XCTAssertEqual(try decoder.decode(.data(HostileFiles.tiff(width: 3, height: 2))).width, 3)
    }

    func testWebPWithHugeCanvasFailsFromTheHeader() throws {
        let bomb = try HostileFiles.webp(canvasWidth: 16_000, height: 16_000)
        try assertBombRefused(bomb, "16000² webp", kinds: [.tooLarge])
        // The same animation on a small canvas is valid: the refusal is the canvas size.
        let sane = try decoder.decode(.data(try HostileFiles.webp(canvasWidth: 8, height: 6)))
        XCTAssertEqual([sane.width, sane.height], [8, 6])
    }

    func testWebPContainerLiesGiveTypedErrorsOrBitmaps() throws {
        // The direct WebP path reads the VP8X flags and chunks itself (through libwebp's demuxer):
        // flags promising chunks that are missing, chunks the flags do not announce, a canvas
        // that does not match the frame, a garbage ALPH chunk, a RIFF size that lies.
        let lossy = [UInt8](try ImageSynthesizer.data(width: 48, height: 32, seed: 2, format: .webp(quality: 50)))
        let alpha = [UInt8](
            try ImageSynthesizer.data(width: 48, height: 32, seed: 2, alpha: true, format: .webp(quality: 50)))
        func little(_ value: Int, _ count: Int) -> [UInt8] { (0..<count).map { UInt8((value >> (8 * $0)) & 0xFF) } }
        func chunk(_ fourcc: String, _ payload: [UInt8]) -> [UInt8] {
            Array(fourcc.utf8) + little(payload.count, 4) + payload + (payload.count % 2 == 1 ? [0] : [])
        }
        func riff(_ chunks: [UInt8], sizeDelta: Int = 0) -> Data {
            let body = Array("WEBP".utf8) + chunks
            return Data(Array("RIFF".utf8) + little(body.count + sizeDelta, 4) + body)
        }
        let vp8 = Array(lossy[12...]) // the VP8 chunk, header included
        func vp8x(_ flags: UInt8, _ width: Int = 48, _ height: Int = 32) -> [UInt8] {
            chunk("VP8X", [flags, 0, 0, 0] + little(width - 1, 3) + little(height - 1, 3))
        }
        var cases: [(String, Data)] = [
            ("flags promise ICC, EXIF, alpha", riff(vp8x(0x20 | 0x08 | 0x10) + vp8)),
            ("flags promise an animation", riff(vp8x(0x02) + vp8)),
            ("ICC chunk not announced", riff(vp8x(0) + chunk("ICCP", [1, 2, 3]) + vp8)),
            ("canvas larger than the frame", riff(vp8x(0, 480, 320) + vp8)),
            ("canvas 16384 wide", riff(vp8x(0, 16384, 32) + vp8)),
            ("garbage ALPH", riff(vp8x(0x10) + chunk("ALPH", [0x01] + [UInt8](repeating: 0xA5, count: 40)) + vp8)),
            ("empty EXIF", riff(vp8x(0x08) + vp8 + chunk("EXIF", []))),
            ("RIFF size one short", riff(vp8, sizeDelta: -1)),
            ("RIFF size one long", riff(vp8, sizeDelta: 1)),
            ("RIFF size 4 GiB", riff(vp8, sizeDelta: 0xFFFF_FF00 - vp8.count))
        ]
        var cut = alpha
        cut.removeLast(alpha.count / 3)
        cases.append(("alpha file cut by a third", Data(cut)))
        for (name, data) in cases {
            for candidate in [decoder, strictDecoder] {
                for size in [TargetSize.maxPixelSize(16), .original] {
                    do {
                        HostileFiles.assertValid(try candidate.decode(.data(data), size: size), fits: size, name)
                    } catch {
                        HostileFiles.assertTyped(error, name)
                    }
                }
            }
        }
        HostileFiles.assertFails(.truncatedData, "cut alpha webp") { () throws(VipsError) in
            try decoder.decode(.data(Data(cut)))
        }
    }

    func testHEIFClaimingHugeSizeFailsFromTheHeader() throws {
        // 16,000² (256 MP) passes libheif's own limit (16384 a side) and is refused by ours;
        // 60,000² is refused by libheif itself: a typed error either way, from the header.
        try assertBombRefused(
            try HostileFiles.avif(claimingWidth: 16_000, height: 16_000), "16000² avif", kinds: [.tooLarge])
        try assertBombRefused(
            try HostileFiles.avif(claimingWidth: 60_000, height: 60_000), "60000² avif",
            kinds: [.tooLarge, .corruptData])
        // Unpatched, the stored file decodes: the refusal is the claimed size.
        let sane = try decoder.decode(.data(try HostileFiles.avif(claimingWidth: 16, height: 11)))
        XCTAssertEqual([sane.width, sane.height], [16, 11])
    }

    func testSVGWithNestedEntityExpansionFailsFast() throws {
        let bomb = HostileFiles.billionLaughsSVG()
        // Default options: SVG is not an allowed format.
        try assertBombRefused(bomb, "svg bomb, default", kinds: [.unsupportedFormat])
        // Allowed by the options: libvips' untrusted loader is blocked.
        let permissive = ImageDecoder(options: DecodeOptions(allowedFormats: [.svg]))
        try assertBombRefused(bomb, "svg bomb, svg allowed", kinds: [.unsupportedFormat], decoder: permissive)
        // Even with the block lifted, libxml2 refuses the expansion: still a typed error, bounded memory.
        try VipsRuntime.setUntrustedLoadersAllowed(true)
        defer { try? VipsRuntime.setUntrustedLoadersAllowed(false) }
        try assertBombRefused(bomb, "svg bomb, untrusted allowed", kinds: [.corruptData], decoder: permissive)
    }

    func testInputByteLimitRefusesAHugeFileWithoutReadingIt() throws {
        let folder = try HostileFiles.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        // A 4 GiB sparse file that starts like a PNG: refused from its size alone.
        let path = folder.appendingPathComponent("huge.png").path
        let png = HostileFiles.png(width: 100, height: 100, idat: HostileFiles.zlibZeros(count: 100 * 301))
        try png.write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(truncate(path, 4 << 30), 0)
        let growth = try HostileFiles.peakMemoryGrowth {
            let error = HostileFiles.assertFails(.tooLarge, "4 GiB file") { () throws(VipsError) in
                try decoder.decode(.file(path), size: .maxPixelSize(64))
            }
            XCTAssertTrue(error?.message.contains("input limit") ?? false, error?.message ?? "")
        }
        HostileFiles.assertPeakMemory(growth, below: HostileFiles.headerOnlyBudget, "4 GiB file")
        // In memory, against a small limit.
        let small = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxInputBytes: png.count - 1)))
        HostileFiles.assertFails(.tooLarge, "in-memory input limit") { () throws(VipsError) in
            try small.info(.data(png))
        }
        XCTAssertEqual(
            try ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxInputBytes: png.count)))
                .info(.data(png)).width, 100)
    }

    func testRealDecompressionBombWithinLimitsStreamsWithBoundedMemory() throws {
        // 10,000² RGB zeros: 300 MB of pixels from a 1.5 MB file, exactly at the default 100 MP limit.
        let side = 10_000
        let bomb = HostileFiles.png(
            width: side, height: side, idat: HostileFiles.zlibZeros(count: side * (side * 3 + 1)))
        XCTAssertLessThan(bomb.count, 2_000_000)
        // A tighter limit refuses it from the header.
        let tight = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 4_000_000)))
        try assertBombRefused(bomb, "10000² zero png, 4 MP limit", kinds: [.tooLarge], decoder: tight)
        // Within the limits it decodes to a thumbnail by streaming: far less than the full 300 MB is ever held.
        var thumbnail: Bitmap?
        let growth = try HostileFiles.peakMemoryGrowth {
            thumbnail = try decoder.decode(.data(bomb), size: .maxPixelSize(100))
        }
        XCTAssertEqual(thumbnail?.width, 100)
        XCTAssertEqual(thumbnail?.pixel(x: 50, y: 50), [0, 0, 0])
        HostileFiles.assertPeakMemory(growth, below: 100 << 20, "10000² zero png, 300 MB of pixels")
    }

    func testDirectPNGPathStreamsABombAndFailsTypedOnItsDamage() throws {
        // 8000² RGB zeros (192 MB of pixels from under 1 MB): the direct libspng path box-shrinks
        // it row by row, never holding the image.
        let side = 8_000
        let bomb = HostileFiles.png(
            width: side, height: side, idat: HostileFiles.zlibZeros(count: side * (side * 3 + 1)))
        XCTAssertEqual(try decoder.route(.data(bomb), size: .maxPixelSize(100)), .direct)
        var thumbnail: Bitmap?
        let growth = try HostileFiles.peakMemoryGrowth {
            thumbnail = try decoder.decodeDirectly(.data(bomb), size: .maxPixelSize(100))
        }
        XCTAssertEqual(thumbnail?.width, 100)
        XCTAssertEqual(thumbnail?.pixel(x: 50, y: 50), [0, 0, 0])
        HostileFiles.assertPeakMemory(growth, below: 40 << 20, "8000² zero png on the direct path")
        // Cut short: strict fails typed (as truncation), lenient hands it to libvips, which decodes what is there.
        let cut = Data(bomb.prefix(bomb.count / 2))
        HostileFiles.assertFails([.truncatedData], "8000² png cut in half, strict") { () throws(VipsError) in
            try strictDecoder.decode(.data(cut), size: .maxPixelSize(64))
        }
        XCTAssertNil(try decoder.decodeDirectly(.data(cut), size: .maxPixelSize(64)))
        HostileFiles.assertValid(
            try decoder.decode(.data(cut), size: .maxPixelSize(64)), fits: .maxPixelSize(64), "lenient cut")
        // An IHDR beyond the limits fails from the header on the direct path too, before any row.
        let tight = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 1_000_000)))
        HostileFiles.assertFails([.tooLarge], "8000² png, 1 MP limit") { () throws(VipsError) in
            _ = try tight.decodeDirectly(.data(bomb), size: .maxPixelSize(64))
        }
    }

    /// Asserts that every entry point refuses `bomb` with one of `kinds`, and that
    /// the process's peak memory grows by less than a header-sized budget meanwhile.
    private func assertBombRefused(
        _ bomb: Data, _ name: String, kinds: Set<VipsError.Kind> = [.tooLarge],
        decoder: ImageDecoder? = nil, file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        let decoder = decoder ?? self.decoder
        let strict = ImageDecoder(
            options: DecodeOptions(
                limits: decoder.options.limits, strict: true,
                allowedFormats: decoder.options.allowedFormats))
        let growth = try HostileFiles.peakMemoryGrowth {
            for candidate in [decoder, strict] {
                HostileFiles.assertFails(kinds, name, file: file, line: line) { () throws(VipsError) in
                    try candidate.info(.data(bomb))
                }
                for size in [TargetSize.original, .maxPixelSize(64)] {
                    HostileFiles.assertFails(kinds, "\(name) \(size)", file: file, line: line) { () throws(VipsError) in
                        try candidate.decode(.data(bomb), size: size)
                    }
                }
            }
        }
        HostileFiles.assertPeakMemory(growth, below: HostileFiles.headerOnlyBudget, name, file: file, line: line)
    }

    // MARK: - Malformed files: typed errors or valid bitmaps, never a crash

    func testMalformedFilesGiveTypedErrorsAndGoodImagesStillDecode() throws {
        let originals = try HostileFiles.originals()
        // The good images' decodes before any hostile input, to compare with afterwards.
        let before = try originals.map { try decoder.decode(.data($0.data), size: .maxPixelSize(48)) }
        let cases = HostileFiles.malformed(from: originals)
        XCTAssertGreaterThanOrEqual(cases.count, 40)
        // Every libvips object (image, source, operation) made on the way, failed or not, must be released.
        let liveObjects = VipsRuntime.liveObjectCount

        var errors = 0, bitmaps = 0
        for hostile in cases {
            let input = ImageInput.data(hostile.data)
            for (mode, candidate) in [("lenient", decoder), ("strict", strictDecoder)] {
                let name = "\(hostile.name) (\(mode))"
                for size in [TargetSize.maxPixelSize(48), .maxPixelSize(8), .original] {
                    do {
                        let bitmap = try candidate.decode(input, size: size)
                        HostileFiles.assertValid(bitmap, fits: size, name)
                        bitmaps += 1
                    } catch {
                        HostileFiles.assertTyped(error, name)
                        errors += 1
                    }
                }
                do {
                    let info = try candidate.info(input)
                    XCTAssertGreaterThan(info.pixelCount, 0, name)
                } catch {
                    HostileFiles.assertTyped(error, name)
                }
            }
        }
        XCTAssertGreaterThan(errors, 0)
        XCTAssertGreaterThan(bitmaps, 0)
        XCTAssertEqual(VipsRuntime.liveObjectCount, liveObjects, "libvips objects leaked by hostile inputs")

        // Good images decode exactly as before, in the same process.
        for (original, expected) in zip(originals, before) {
            let after = try decoder.decode(.data(original.data), size: .maxPixelSize(48))
            XCTAssertEqual(
                after.pixelData, expected.pixelData, "\(original.name) decodes differently after hostile inputs")
        }
    }

    func testHostileAndGoodInputsDecodedConcurrently() throws {
        // A pipeline decodes on several threads at once, and libvips keeps one global error
        // buffer: hostile inputs failing on some threads must not break good decodes on others.
        let lenient = decoder, strict = strictDecoder
        let originals = try HostileFiles.originals()
        let expected = try originals.map { try lenient.decode(.data($0.data), size: .maxPixelSize(48)) }
        let hostile = HostileFiles.malformed(from: originals)
        let problems = LockedState<[String]>([])
        let workers = 4
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            for (index, sample) in hostile.enumerated() where index % workers == worker {
                let candidate = index % 2 == 0 ? lenient : strict
                do throws(VipsError) {
                    let bitmap = try candidate.decode(.data(sample.data), size: .maxPixelSize(48))
                    if bitmap.width > 48 || bitmap.height > 48
                        || bitmap.cost != bitmap.width * bitmap.height * bitmap.channels
                    {
                        problems.withLock { $0.append("\(sample.name): bitmap \(bitmap.width)×\(bitmap.height)") }
                    }
                } catch {
                    if !HostileFiles.inputKinds.contains(error.kind) {
                        problems.withLock { $0.append("\(sample.name): \(error)") }
                    }
                }
                let good = index % originals.count
                do {
                    let bitmap = try lenient.decode(.data(originals[good].data), size: .maxPixelSize(48))
                    if bitmap.pixelData != expected[good].pixelData {
                        problems.withLock { $0.append("\(originals[good].name) decoded differently") }
                    }
                } catch {
                    problems.withLock { $0.append("\(originals[good].name) failed: \(error)") }
                }
            }
        }
        XCTAssertEqual(problems.withLock { $0 }, [])
    }

    func testStrictModeRefusesTruncatedPixelData() throws {
        for original in try HostileFiles.originals() {
            let count = original.data.count
            // Cut inside the pixel data (past the header, before the end): really broken.
            for fraction in [0.5, 0.75, 0.9] {
                let cut = original.data.prefix(Int(Double(count) * fraction))
                let name = "\(original.name) cut at \(Int(fraction * 100))%"
                HostileFiles.assertFails([.truncatedData, .corruptData], name) { () throws(VipsError) in
                    try strictDecoder.decode(.data(cut), size: .maxPixelSize(48))
                }
                // Lenient mode may return what it has, but only a valid bitmap.
                if let bitmap = try? decoder.decode(.data(cut), size: .maxPixelSize(48)) {
                    HostileFiles.assertValid(bitmap, fits: .maxPixelSize(48), name)
                }
            }
        }
    }

    func testMalformedFilesOnDiskLeaveNoFileDescriptorsOpen() throws {
        let folder = try HostileFiles.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let cases = HostileFiles.malformed(from: try HostileFiles.originals())
        var paths: [String] = []
        for (index, hostile) in cases.enumerated() {
            let url = folder.appendingPathComponent("\(index).img")
            try hostile.data.write(to: url)
            paths.append(url.path)
        }
        func decodeAll() {
            for path in paths {
                _ = try? decoder.info(.file(path))
                _ = try? decoder.decode(.file(path), size: .maxPixelSize(32))
                _ = try? strictDecoder.decode(.file(path), size: .maxPixelSize(32))
            }
        }
        decodeAll() // warm-up: libvips opens what it keeps open (none expected, but not ours to judge)
        let open = try HostileFiles.openFileDescriptors()
        decodeAll()
        XCTAssertEqual(try HostileFiles.openFileDescriptors(), open, "hostile files leaked file descriptors")
    }

    func testZeroLengthAndTinyInputsGiveTypedErrors() throws {
        let folder = try HostileFiles.temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let empty = folder.appendingPathComponent("empty.png")
        try Data().write(to: empty)
        HostileFiles.assertFails(.emptyInput, "empty data") { () throws(VipsError) in try decoder.decode(.data(Data()))
        }
        HostileFiles.assertFails(.emptyInput, "empty file") { () throws(VipsError) in
            try decoder.info(.file(empty.path))
        }
        HostileFiles.assertFails(.io, "directory") { () throws(VipsError) in try decoder.info(.file(folder.path)) }
        HostileFiles.assertFails(.io, "missing") { () throws(VipsError) in
            try decoder.info(.file(folder.appendingPathComponent("missing.jpg").path))
        }
        for byte in [UInt8(0x00), 0xFF, 0x89, 0x47] {
            HostileFiles.assertFails([.unsupportedFormat], "one byte \(byte)") { () throws(VipsError) in
                try decoder.decode(.data(Data([byte])))
            }
        }
    }
}

// MARK: - Hostile file factory

/// Builds hostile files from bytes: crafted headers, real compressed bombs and
/// mutations of generated images. Deterministic, so every failure reproduces.
enum HostileFiles {
    /// Peak memory a refusal from the header may add. The real image behind each
    /// bomb would take gigabytes; a header needs kilobytes, libvips' start-up some MB.
    static let headerOnlyBudget = 32 << 20

    struct Sample {
        let name: String
        let data: Data
    }

    // MARK: Assertions

    /// The kinds a decoder may throw for bad input.
    static let inputKinds: Set<VipsError.Kind> = [
        .emptyInput, .unsupportedFormat, .corruptData, .truncatedData, .tooLarge
    ]

    static func assertTyped(_ error: VipsError, _ name: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(inputKinds.contains(error.kind), "\(name): unexpected kind \(error)", file: file, line: line)
        XCTAssertFalse(error.message.isEmpty, "\(name): empty message", file: file, line: line)
    }

    /// Asserts `body` throws one of `kinds`; returns the error.
    @discardableResult
    static func assertFails<T>(
        _ kinds: Set<VipsError.Kind>, _ name: String, file: StaticString = #filePath,
        line: UInt = #line, _ body: () throws(VipsError) -> T
    ) -> VipsError? {
        do {
            let value = try body()
            XCTFail("\(name): expected \(kinds.map(\.rawValue).sorted()), got \(value)", file: file, line: line)
            return nil
        } catch {
            XCTAssertTrue(
                kinds.contains(error.kind), "\(name): expected \(kinds.map(\.rawValue).sorted()), got \(error)",
                file: file, line: line)
            return error
        }
    }

    @discardableResult
    static func assertFails<T>(
        _ kind: VipsError.Kind, _ name: String, file: StaticString = #filePath,
        line: UInt = #line, _ body: () throws(VipsError) -> T
    ) -> VipsError? {
        assertFails([kind], name, file: file, line: line, body)
    }

    /// A bitmap VipsCore may hand out: 8-bit RGB(A), consistent size, within the box asked for.
    static func assertValid(
        _ bitmap: Bitmap, fits size: TargetSize, _ name: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertTrue(
            bitmap.width > 0 && bitmap.height > 0 && (bitmap.channels == 3 || bitmap.channels == 4),
            "\(name): \(bitmap.width)×\(bitmap.height)×\(bitmap.channels)", file: file, line: line)
        XCTAssertEqual(bitmap.cost, bitmap.width * bitmap.height * bitmap.channels, name, file: file, line: line)
        if let box = size.pixelBox(scale: 1) {
            XCTAssertTrue(
                bitmap.width <= box.width && bitmap.height <= box.height,
                "\(name): \(bitmap.width)×\(bitmap.height) does not fit \(size)", file: file, line: line)
        }
    }

    // MARK: Process measurements

    /// Whether a sanitizer runtime is linked in (scripts/sanitize.sh). Its allocator keeps
    /// freed memory in quarantine and pads every block, so peak memory then measures the
    /// sanitizer, not the decoder: memory bounds are asserted in normal runs only.
    static let sanitized = dlsym(nil, "__asan_init") != nil || dlsym(nil, "__tsan_init") != nil

    static func assertPeakMemory(
        _ growth: Int, below budget: Int, _ name: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        guard !sanitized else { return }
        XCTAssertLessThan(growth, budget, "\(name): peak memory grew by \(growth >> 20) MB", file: file, line: line)
    }

    /// How much the process's peak resident memory rises above its current
    /// size while `body` runs (the kernel's high-water mark, reset first).
    static func peakMemoryGrowth(_ body: () throws -> Void) throws -> Int {
        // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux ≥ 4.0).
        try Data("5".utf8).write(to: URL(fileURLWithPath: "/proc/self/clear_refs"))
        let start = try statusValue("VmRSS")
        try body()
        return try statusValue("VmHWM") - start
    }

    private static func statusValue(_ key: String) throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }),
            let kilobytes = Int(line.dropFirst(key.count + 1).trimmingCharacters(in: .whitespaces).dropLast(3))
        else {
            throw VipsError(.io, "no \(key) in /proc/self/status")
        }
        return kilobytes << 10
    }

    static func openFileDescriptors() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
    }

    static func temporaryFolder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("hostile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    // MARK: Generated originals and their mutations

    /// Good images of every format and variant, generated.
    static func originals() throws -> [Sample] {
        let specs: [(String, Int, Int, Bool, ImageSynthesizer.Format)] = [
            ("baseline.jpg", 160, 120, false, .jpeg(quality: 80)),
            ("progressive.jpg", 320, 240, false, .jpeg(quality: 70, progressive: true)),
            ("rotated.jpg", 64, 48, false, .jpeg(quality: 80, orientation: 6)),
            ("rgb.png", 96, 64, false, .png()),
            ("interlaced-rgba.png", 64, 48, true, .png(interlaced: true)),
            ("palette.png", 48, 40, false, .png(palette: true)),
            ("grey16.png", 40, 32, false, .png(sixteenBit: true, grey: true)),
            ("lossy.webp", 96, 64, false, .webp(quality: 70)),
            ("lossless-alpha.webp", 64, 48, true, .webp(lossless: true)),
            // VP8X + ALPH + EXIF: the direct WebP path's container reading and rotation.
            ("rotated-lossy-alpha.webp", 64, 48, true, .webp(quality: 60, orientation: 6)),
            ("still.gif", 64, 48, false, .gif),
            ("deflate.tif", 64, 48, false, .tiff)
        ]
        return try specs.map { name, width, height, alpha, format in
            Sample(
                name: name,
                data: try ImageSynthesizer.data(width: width, height: height, seed: 11, alpha: alpha, format: format))
        } + heifSamples()
    }

    /// A 16×11 AVIF (331 bytes) and a 16×11 HEIC in a 64×64 grid tile (604 bytes), made with
    /// `vips copy small.png small.avif[Q=40,strip]` (and `.heic[compression=hevc]`): VipsCore
    /// does not encode HEIF, so these two are stored.
    static func heifSamples() throws -> [Sample] {
        let encoded = [
            (
                "tiny.avif",
                "AAAAHGZ0eXBhdmlmAAAAAGF2aWZtaWYxbWlhZgAAAOptZXRhAAAAAAAAACFoZGxyAAAAAAAAAABwaWN0AAAAAAAAAAAAAAAA"
                    + "AAAAAA5waXRtAAAAAAABAAAAImlsb2MAAAAAREAAAQABAAAAAAEOAAEAAAAAAAAAPQAAACNpaW5mAAAAAAABAAAAFWluZmUC"
                    + "AAAAAAEAAGF2MDEAAAAAamlwcnAAAABLaXBjbwAAABNjb2xybmNseAACAAIABoAAAAAMYXYxQ4EADAAAAAAUaXNwZQAAAAAA"
                    + "AAAQAAAACwAAABBwaXhpAAAAAAMICAgAAAAXaXBtYQAAAAAAAAABAAEEgYIDhAAAAEVtZGF0EgAKCRgM/pggQEDQgDIuGYAA"
                    + "AFAvT5NJq6TpP0zfQNrEGzsrDr1I2RwStUcyTgM7k1ejb0wlOVxZV6W5WA=="
            ),
            (
                "grid.heic",
                "AAAAGGZ0eXBoZWljAAAAAG1pZjFoZWljAAABrW1ldGEAAAAAAAAAIWhkbHIAAAAAAAAAAHBpY3QAAAAAAAAAAAAAAAAAAAAA"
                    + "DnBpdG0AAAAAAAIAAAAQaWRhdAAAAAAAEAALAAAAOGlsb2MBAAAAREAAAgABAAAAAAAAAc0AAQAAAAAAAACPAAIAAQAAAAAA"
                    + "AAABAAAAAAAAAAgAAAA4aWluZgAAAAAAAgAAABVpbmZlAgAAAQABAABodmMxAAAAABVpbmZlAgAAAAACAABncmlkAAAAANhp"
                    + "cHJwAAAAtmlwY28AAAB2aHZjQwEDcAAAAAAAAAAAAB7wAPz9+PgAAA8DIAABABhAAQwB//8DcAAAAwCQAAADAAADAB66AkAh"
                    + "AAEAKkIBAQNwAAADAJAAAAMAAAMAHqAggQWW6q6a5uBAQMCAAAADAIAAAAMAhCIAAQAGRAHBc8GJAAAAFGlzcGUAAAAAAAAA"
                    + "QAAAAEAAAAAUaXNwZQAAAAAAAAAQAAAACwAAABBwaXhpAAAAAAMICAgAAAAaaXBtYQAAAAAAAAACAAECgQIAAgIDhAAAABpp"
                    + "cmVmAAAAAAAAAA5kaW1nAAIAAQABAAAAl21kYXQAAACLKAGvUh7ZkND48e3yiTVc2KUn2W0c1x5y/0scyKkrjMlpizgsANew"
                    + "XsoW+xG2m0gFTwM+L/GiMII/i0Q4ydxRGt3xDV8d5tGWstjsSGx/a9yDxArbWXwSTeLaw6FKtevQjnJW9Px1nxrAs0VB/+bO"
                    + "AFbiwzZNhgYsI+Q2f19AufFDtXQ/0K5M/BPewA=="
            )
        ]
        return try encoded.map { name, base64 in
            guard let data = Data(base64Encoded: base64) else { throw VipsError(.internal, "bad base64 for \(name)") }
            return Sample(name: name, data: data)
        }
    }

    /// The stored AVIF with its image-size property (`ispe`) claiming `width` × `height`.
    static func avif(claimingWidth width: Int, height: Int) throws -> Data {
        var bytes = [UInt8](try heifSamples()[0].data)
        let tag = Array("ispe".utf8)
        guard let at = (0..<bytes.count - 16).first(where: { Array(bytes[$0..<$0 + 4]) == tag }) else {
            throw VipsError(.internal, "no ispe box in the stored AVIF")
        }
        // "ispe", version and flags (4 bytes), then width and height as big-endian 32-bit.
        bytes.replaceSubrange(at + 8..<at + 16, with: bigEndian32(width) + bigEndian32(height))
        return Data(bytes)
    }

    /// Truncations at many offsets, single and multiple bit flips, wrong magic,
    /// zeroed headers, zero length and the magic alone, for every original.
    static func malformed(from originals: [Sample]) -> [Sample] {
        var random = SplitMix64(seed: 0x5EED)
        var cases = [Sample(name: "zero-length", data: Data())]
        for original in originals {
            let bytes = [UInt8](original.data)
            let count = bytes.count
            let cuts = Set([
                1, 2, 3, 4, 8, 12, 16, 24, 33, 64, count / 4, count / 2, 3 * count / 4, count - 2, count - 1
            ])
            for cut in cuts.sorted() where cut > 0 && cut < count {
                cases.append(Sample(name: "\(original.name) truncated to \(cut)", data: Data(bytes[..<cut])))
            }
            for flip in 0..<8 {
                var mutated = bytes
                // Half in the first 64 bytes (headers), half anywhere.
                let position = Int(random.next() % UInt64(flip < 4 ? min(64, count) : count))
                mutated[position] ^= 1 << UInt8(random.next() % 8)
                cases.append(Sample(name: "\(original.name) bit flip at \(position)", data: Data(mutated)))
            }
            var burst = bytes
            for _ in 0..<24 { burst[Int(random.next() % UInt64(count))] = UInt8(truncatingIfNeeded: random.next()) }
            cases.append(Sample(name: "\(original.name) 24 random bytes", data: Data(burst)))
            var wrongMagic = bytes
            wrongMagic.replaceSubrange(0..<4, with: Array("XXXX".utf8))
            cases.append(Sample(name: "\(original.name) wrong magic", data: Data(wrongMagic)))
            var zeroedHeader = bytes
            for index in min(count, 4)..<min(count, 48) { zeroedHeader[index] = 0 }
            cases.append(Sample(name: "\(original.name) zeroed header", data: Data(zeroedHeader)))
            var tail = bytes
            tail.replaceSubrange(count / 2..<count, with: [UInt8](repeating: 0xFF, count: count - count / 2))
            cases.append(Sample(name: "\(original.name) second half 0xFF", data: Data(tail)))
        }
        return cases
    }

    // MARK: Crafted headers

    /// A real baseline JPEG (with EXIF `orientation`) whose frame header (SOF0) claims `width` × `height`.
    static func jpeg(claimingWidth width: Int, height: Int, orientation: Int = 1) throws -> Data {
        var bytes = [UInt8](
            try ImageSynthesizer.data(width: 16, height: 16, format: .jpeg(quality: 50, orientation: orientation)))
        guard let sof = (0..<bytes.count - 9).first(where: { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xC0 }) else {
            throw VipsError(.internal, "no SOF0 in the generated JPEG")
        }
        bytes[sof + 5] = UInt8(height >> 8); bytes[sof + 6] = UInt8(height & 0xFF)
        bytes[sof + 7] = UInt8(width >> 8); bytes[sof + 8] = UInt8(width & 0xFF)
        return Data(bytes)
    }

    /// An 8-bit RGB PNG with the given IHDR and one IDAT chunk of `idat` (a zlib stream).
    static func png(width: Int, height: Int, idat: [UInt8]) -> Data {
        var bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        bytes += pngChunk("IHDR", bigEndian32(width) + bigEndian32(height) + [8, 2, 0, 0, 0])
        bytes += pngChunk("IDAT", idat)
        bytes += pngChunk("IEND", [])
        return Data(bytes)
    }

    private static func pngChunk(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + payload
        return bigEndian32(payload.count) + body + bigEndian32(Int(crc32(body)))
    }

    private static func bigEndian32(_ value: Int) -> [UInt8] {
        [
            UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
            UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)
        ]
    }

    private static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc >> 1) ^ (crc & 1 == 0 ? 0 : 0xEDB8_8320) }
        }
        return ~crc
    }

    /// A zlib stream of `count` zero bytes: one fixed-Huffman deflate block of a
    /// literal 0 and (length 258, distance 1) copies, about 13 bits per 258 bytes,
    /// the shape of a real decompression bomb.
    static func zlibZeros(count: Int) -> [UInt8] {
        var writer = BitWriter()
        writer.bytes = [0x78, 0x01]
        writer.write(1, bits: 1) // BFINAL
        writer.write(1, bits: 2) // BTYPE 01: fixed Huffman
        // Fixed codes are sent most significant bit first; literals 0–143 are 0x30 + value in 8 bits.
        writer.writeCode(0x30, length: 8)
        var remaining = count - 1
        /// Lengths 3–258 as (symbol, extra bits, base length): RFC 1951, 3.2.5.
        let lengthCodes: [(symbol: Int, extraBits: Int, base: Int)] = [
            (257, 0, 3), (258, 0, 4), (259, 0, 5), (260, 0, 6), (261, 0, 7), (262, 0, 8), (263, 0, 9), (264, 0, 10),
            (265, 1, 11), (266, 1, 13), (267, 1, 15), (268, 1, 17), (269, 2, 19), (270, 2, 23), (271, 2, 27),
            (272, 2, 31), (273, 3, 35), (274, 3, 43), (275, 3, 51), (276, 3, 59), (277, 4, 67), (278, 4, 83),
            (279, 4, 99), (280, 4, 115), (281, 5, 131), (282, 5, 163), (283, 5, 195), (284, 5, 227), (285, 0, 258)
        ]
        while remaining > 0 {
            guard remaining >= 3 else {
                writer.writeCode(0x30, length: 8)
                remaining -= 1
                continue
            }
            // Copy 258 at a time, leaving at least 3 for the last copy.
            let length = remaining > 258 ? min(258, remaining - 3) : remaining
            guard let code = lengthCodes.last(where: { $0.base <= length }) else { break }
            // Symbols 256–279 are 7-bit codes from 0; 280–287 are 8-bit codes from 0xC0.
            if code.symbol < 280 {
                writer.writeCode(code.symbol - 256, length: 7)
            } else {
                writer.writeCode(0xC0 + code.symbol - 280, length: 8)
            }
            writer.write(UInt32(length - code.base), bits: code.extraBits)
            writer.writeCode(0, length: 5) // distance code 0: distance 1
            remaining -= length
        }
        writer.writeCode(0, length: 7) // end of block (256)
        writer.flush()
        // Adler-32 of zeros: a stays 1, b adds 1 per byte.
        let adler = UInt32((count % 65_521) << 16 | 1)
        writer.bytes += [
            UInt8(adler >> 24), UInt8((adler >> 16) & 0xFF), UInt8((adler >> 8) & 0xFF), UInt8(adler & 0xFF)
        ]
        return writer.bytes
    }

    private struct BitWriter {
        var bytes: [UInt8] = []
        var buffer: UInt32 = 0
        var filled = 0

        /// Writes `bits` bits of `value`, least significant first (deflate's order for non-code fields).
        mutating func write(_ value: UInt32, bits: Int) {
            for bit in 0..<bits { push(value >> UInt32(bit) & 1) }
        }

        /// Writes a Huffman code, most significant bit first.
        mutating func writeCode(_ code: Int, length: Int) {
            for bit in stride(from: length - 1, through: 0, by: -1) { push(UInt32(code >> bit) & 1) }
        }

        private mutating func push(_ bit: UInt32) {
            buffer |= bit << UInt32(filled)
            filled += 1
            if filled == 8 { flush() }
        }

        mutating func flush() {
            if filled > 0 { bytes.append(UInt8(buffer & 0xFF)) }
            buffer = 0
            filled = 0
        }
    }

    /// A GIF89a with a `width` × `height` logical screen and `frames` frames of the same
    /// declared size holding one pixel of data (an animation with a loop extension when
    /// there is more than one frame).
    static func gif(width: Int, height: Int, frames: Int) -> Data {
        func little16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF)] }
        var bytes = Array("GIF89a".utf8) + little16(width) + little16(height)
        bytes += [0x80, 0, 0] // global colour table of 2 entries
        bytes += [0, 0, 0, 255, 255, 255]
        if frames > 1 { bytes += [0x21, 0xFF, 0x0B] + Array("NETSCAPE2.0".utf8) + [0x03, 0x01, 0, 0, 0] }
        for _ in 0..<frames {
            bytes += [0x21, 0xF9, 0x04, 0x04, 0x01, 0x00, 0x00, 0x00] // graphic control: 10 ms, keep
            bytes += [0x2C, 0, 0, 0, 0] + little16(width) + little16(height) + [0] // image at 0,0
            bytes += [0x02, 0x02, 0x44, 0x01, 0x00] // LZW, minimum code size 2: clear, colour 0, end
        }
        bytes.append(0x3B)
        return Data(bytes)
    }

    /// A little-endian, uncompressed, 8-bit grey TIFF claiming `width` × `height` with one tiny strip.
    static func tiff(width: Int, height: Int) -> Data {
        func little16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF)] }
        func little32(_ value: Int) -> [UInt8] { little16(value & 0xFFFF) + little16((value >> 16) & 0xFFFF) }
        let entries: [(tag: Int, type: Int, value: Int)] = [
            (256, 4, width), (257, 4, height), (258, 3, 8), (259, 3, 1), (262, 3, 1),
            (273, 4, 0), (277, 3, 1), (278, 4, height), (279, 4, width * height)
        ]
        let ifdOffset = 8
        let dataOffset = ifdOffset + 2 + entries.count * 12 + 4
        var bytes: [UInt8] = [0x49, 0x49, 0x2A, 0x00] + little32(ifdOffset)
        bytes += little16(entries.count)
        for entry in entries {
            let value = entry.tag == 273 ? dataOffset : entry.value
            bytes += little16(entry.tag) + little16(entry.type) + little32(1)
            bytes += entry.type == 3 ? little16(value) + [0, 0] : little32(value)
        }
        bytes += little32(0)
        bytes += [UInt8](repeating: 0x80, count: min(width * height, 64))
        return Data(bytes)
    }

    /// An animated WebP whose canvas claims `canvasWidth` × `height`, with one real 4×4
    /// lossless frame. (A still image must match its canvas, which libwebp checks; an
    /// animation's frames may be smaller, which is what makes a small file claim a huge canvas.)
    static func webp(canvasWidth: Int, height: Int) throws -> Data {
        let simple = [UInt8](try ImageSynthesizer.data(width: 4, height: 4, format: .webp(lossless: true)))
        // "RIFF", size, "WEBP", then chunks (fourcc, little-endian size, payload padded to even): keep VP8L.
        var offset = 12
        var imageChunk: [UInt8] = []
        while offset + 8 <= simple.count {
            let size =
                Int(simple[offset + 4]) | Int(simple[offset + 5]) << 8 | Int(simple[offset + 6]) << 16
                | Int(simple[offset + 7]) << 24
            let end = min(simple.count, offset + 8 + size + size % 2)
            if Array(simple[offset..<offset + 4]) == Array("VP8L".utf8) { imageChunk = Array(simple[offset..<end]) }
            offset = end
        }
        guard !imageChunk.isEmpty else { throw VipsError(.internal, "the generated lossless WebP has no VP8L chunk") }
        func little24(_ value: Int) -> [UInt8] {
            [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF), UInt8((value >> 16) & 0xFF)]
        }
        func little32(_ value: Int) -> [UInt8] { little24(value) + [UInt8((value >> 24) & 0xFF)] }
        func chunk(_ fourcc: String, _ payload: [UInt8]) -> [UInt8] {
            Array(fourcc.utf8) + little32(payload.count) + payload + (payload.count % 2 == 1 ? [0] : [])
        }
        // VP8X: animation flag, canvas size minus one.
        let vp8x = chunk("VP8X", [0x02, 0, 0, 0] + little24(canvasWidth - 1) + little24(height - 1))
        let anim = chunk("ANIM", [0, 0, 0, 0, 0, 0]) // background colour, loop forever
        // ANMF: offset 0,0, frame 4×4, 100 ms, then the frame's image chunk.
        let anmf = chunk(
            "ANMF", little24(0) + little24(0) + little24(3) + little24(3) + little24(100) + [0] + imageChunk)
        let body = Array("WEBP".utf8) + vp8x + anim + anmf
        return Data(Array("RIFF".utf8) + little32(body.count) + body)
    }

    /// An SVG whose text is a nine-level nested entity expansion ("billion laughs": 10⁹ copies).
    static func billionLaughsSVG() -> Data {
        var entities = [#"<!ENTITY a0 "lol">"#]
        for level in 1...9 {
            entities.append("<!ENTITY a\(level) \"" + String(repeating: "&a\(level - 1);", count: 10) + "\">")
        }
        let text =
            "<?xml version=\"1.0\"?>\n<!DOCTYPE svg [\n" + entities.joined(separator: "\n") + "\n]>\n"
            + #"<svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"><text y="20">&a9;</text></svg>"#
        return Data(text.utf8)
    }
}
