import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// Hostile, broken and misnamed inputs: each gives a typed error of the right kind.
final class BadInputTests: XCTestCase {
    let decoder = ImageDecoder()
    let strict = ImageDecoder(options: DecodeOptions(strict: true))

    /// Runs both entry points (probe and decode) on `input`, expecting `kind` from each.
    func assertRejected(
        _ input: ImageInput, _ kind: VipsError.Kind, by decoder: ImageDecoder? = nil,
        _ label: String, file: StaticString = #filePath, line: UInt = #line
    ) {
        let decoder = decoder ?? self.decoder
        assertThrowsKind(
            kind, { () throws(VipsError) in try decoder.info(input) }, "info: \(label)", file: file, line: line)
        assertThrowsKind(
            kind, { () throws(VipsError) in try decoder.decode(input, size: .maxPixelSize(64)) },
            "decode: \(label)", file: file, line: line)
    }

    func testEmptyInput() throws {
        let folder = try TemporaryFolder()
        assertRejected(.data(Data()), .emptyInput, "empty data")
        assertRejected(.file(try folder.write(Data(), named: "empty.jpg")), .emptyInput, "empty file")
    }

    func testRandomBytes() throws {
        var generator = SystemRandomNumberGenerator()
        for count in [1, 7, 100, 10_000] {
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            bytes[0] = 0x42 ^ 0x01 // never a signature's first byte ("BM" is bmp)
            assertRejected(.data(Data(bytes)), .unsupportedFormat, "\(count) random bytes")
        }
    }

    func testTextFileNamedJPEG() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write(
            Data("This is not a photograph, whatever the name says.\n".utf8), named: "photo.jpg")
        assertRejected(.file(path), .unsupportedFormat, "text file named .jpg")
        let html = try folder.write(Data("<!DOCTYPE html><html><body>404</body></html>".utf8), named: "image.png")
        assertRejected(.file(html), .unsupportedFormat, "HTML error page named .png")
    }

    func testRecognisedButGarbledData() throws {
        // Valid magic bytes followed by junk: the format is known, the data is not an image.
        // (libvips hands a TIFF its own loader refuses to ImageMagick, which is blocked:
        // still corrupt data, not an unsupported format.)
        // Seeded, so every run sees the same junk (random junk made the GIF case
        // come out as truncated rather than corrupt now and then).
        var generator = SplitMix64(seed: 0x0BAD_DA7A)
        let junk = (0..<2_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let signatures: [[UInt8]] = [
            [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], Array("GIF89a".utf8), [0x49, 0x49, 0x2A, 0x00],
            // (A RIFF size matching the 2,016 bytes: one declaring more is a truncated file, truncatedData.)
            Array("RIFF".utf8) + [0xD8, 0x07, 0, 0] + Array("WEBPVP8 ".utf8)
        ]
        for signature in signatures {
            let input = ImageInput.data(Data(signature + junk))
            for decoder in [decoder, strict] {
                let error = assertThrowsKind(
                    .corruptData, { () throws(VipsError) in try decoder.decode(input, size: .maxPixelSize(64)) },
                    "\(signature)")
                XCTAssertTrue(
                    error?.message.contains("bytes>") ?? false, "the message names the input: \(error?.message ?? "")")
            }
        }
    }

    func testLenientWarningsDoNotLeakIntoLaterErrors() throws {
        // A lenient decode of a truncated JPEG succeeds with libjpeg's "premature end"
        // warnings in libvips' global error buffer; they must not become the reason
        // (or decide the kind) of the next, unrelated failure.
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 46, format: .jpeg())
        let garbled = Data(Array("GIF89a".utf8) + [UInt8](repeating: 0x5A, count: 500))
        for _ in 0..<3 {
            XCTAssertEqual(
                try decoder.decode(.data(Data(data.prefix(data.count / 3))), size: .maxPixelSize(64)).width, 64)
            let error = assertThrowsKind(.corruptData) { () throws(VipsError) in
                try decoder.decode(.data(garbled), size: .maxPixelSize(64))
            }
            XCTAssertFalse(error?.message.contains("JPEG") ?? true, "stale JPEG warning in: \(error?.message ?? "")")
        }
    }

    func testTruncatedJPEG() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 41, format: .jpeg())
        let half = Data(data.prefix(data.count / 2))

        // Strict: refused.
        let error = assertThrowsKind(.truncatedData) { () throws(VipsError) in
            try strict.decode(.data(half), size: .maxPixelSize(64))
        }
        XCTAssertNotNil(error)
        // The header is intact, so a probe still works in strict mode.
        XCTAssertEqual(try strict.info(.data(half)).width, 400)

        // Lenient: decodes (the missing half grey), and the warnings are counted, not printed.
        let before = VipsRuntime.warningCount
        let bitmap = try decoder.decode(.data(half), size: .maxPixelSize(200))
        XCTAssertEqual(bitmap.width, 200)
        XCTAssertEqual(bitmap.height, 150)
        XCTAssertGreaterThan(VipsRuntime.warningCount, before, "libjpeg's premature-end warning is counted")

        // The top half is the picture; the bottom is libjpeg's grey fill.
        let complete = try decoder.decode(.data(data), size: .maxPixelSize(200))
        let top = bitmap.pixel(x: 100, y: 10)!, expectedTop = complete.pixel(x: 100, y: 10)!
        XCTAssertLessThan(colourDistance(top.map(Double.init), expectedTop), 30)
        let bottom = bitmap.pixel(x: 100, y: 145)!
        XCTAssertLessThan(colourDistance(bottom.map(Double.init), [128, 128, 128]), 10, "grey fill: \(bottom)")
    }

    func testTruncatedFiles() throws {
        let folder = try TemporaryFolder()
        for format: ImageSynthesizer.Format in [
            .jpeg(progressive: true), .png(), .png(interlaced: true), .webp(), .gif, .tiff
        ] {
            let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 42, format: format)
            let path = try folder.write(Data(data.prefix(data.count / 2)), named: "half.\(format.fileExtension)")
            do {
                _ = try strict.decode(.file(path), size: .maxPixelSize(64))
                XCTFail("strict decode of half a \(format) file must fail")
            } catch {
                XCTAssertTrue([.truncatedData, .corruptData].contains(error.kind), "\(format): \(error)")
            }
        }
    }

    func testValidDecodesCountNoWarnings() throws {
        // The warning counter counts problems, not libvips' informational chatter.
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 43, format: .jpeg())
        let png = try ImageSynthesizer.data(width: 400, height: 300, seed: 43, alpha: true, format: .png())
        let before = VipsRuntime.warningCount
        _ = try decoder.decode(.data(data), size: .maxPixelSize(100))
        _ = try decoder.decode(.data(png), size: .maxPixelSize(100))
        _ = try decoder.info(.data(data))
        XCTAssertEqual(VipsRuntime.warningCount, before)
    }

    func testHeaderCutShortIsTruncated() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 44, format: .jpeg())
        for count in [4, 20, 100] {
            assertRejected(.data(Data(data.prefix(count))), .truncatedData, "JPEG cut to \(count) bytes")
        }
        // libpng reports its errors only as GLib warnings (the error buffer
        // stays empty); the runtime keeps the thread's last one as the reason.
        let png = try ImageSynthesizer.data(width: 400, height: 300, seed: 44, format: .png())
        for count in [9, 20, 40, 60] {
            let cut = ImageInput.data(Data(png.prefix(count)))
            assertRejected(cut, .truncatedData, "PNG cut to \(count) bytes")
            let error = assertThrowsKind(.truncatedData) { () throws(VipsError) in try decoder.info(cut) }
            XCTAssertTrue(error?.message.hasSuffix(": not enough data") ?? false, "\(String(describing: error))")
        }
    }

    // MARK: - Limits

    func testPixelLimitFromSynthesisedImage() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 45, format: .png())
        let limited = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 119_999)))
        assertRejected(.data(data), .tooLarge, by: limited, "one pixel over")
        let exact = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 120_000)))
        XCTAssertEqual(try exact.decode(.data(data), size: .maxPixelSize(64)).width, 64)
        let narrow = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxDimension: 399)))
        assertRejected(.data(data), .tooLarge, by: narrow, "too wide")
        let small = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxInputBytes: data.count - 1)))
        assertRejected(.data(data), .tooLarge, by: small, "too many bytes")
    }

    func testCraftedPNGClaiming60000x60000() throws {
        // A 60-byte file whose valid IHDR claims 3.6 gigapixels: refused from the header.
        let data = craftedPNGHeader(width: 60_000, height: 60_000) + pngEnd
        let folder = try TemporaryFolder()
        let path = try folder.write(data, named: "bomb.png")
        for input in [ImageInput.data(data), .file(path)] {
            assertRejected(input, .tooLarge, "crafted 60000×60000")
        }
        // A claim past every limit, including the per-side one.
        assertRejected(.data(craftedPNGHeader(width: 1_000_000, height: 1)), .tooLarge, "1,000,000 px wide")
    }

    func testPageLimit() throws {
        // A still GIF declares one page: a limit of none refuses it from the header.
        let data = try ImageSynthesizer.data(width: 40, height: 30, format: .gif)
        let noPages = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPages: 0)))
        assertRejected(.data(data), .tooLarge, by: noPages, "pages over the limit")
    }

    // MARK: - Files and arguments

    func testMissingFileAndDirectory() throws {
        let folder = try TemporaryFolder()
        assertRejected(.file(folder.path("does-not-exist.jpg")), .io, "missing file")
        assertRejected(.file(folder.url.path), .io, "directory")
    }

    func testDisallowedFormat() throws {
        let png = try ImageSynthesizer.data(width: 40, height: 30, format: .png())
        let jpeg = try ImageSynthesizer.data(width: 40, height: 30, format: .jpeg())
        let noPNG = ImageDecoder(options: DecodeOptions(allowedFormats: [.jpeg, .webp]))
        assertRejected(.data(png), .unsupportedFormat, by: noPNG, "png not allowed")
        XCTAssertEqual(try noPNG.decode(.data(jpeg)).width, 40, "allowed formats still decode")
        // Formats outside the default set are refused by default, even when libvips could read them.
        let ppm = Data("P6\n2 2\n255\n".utf8) + Data(repeating: 200, count: 12)
        assertRejected(.data(ppm), .unsupportedFormat, "ppm is not allowed by default")
        // Allowed, but its libvips loader is blocked as untrusted: still not an error in the data.
        let withPPM = ImageDecoder(options: DecodeOptions(allowedFormats: [.ppm]))
        let blocked = assertThrowsKind(.unsupportedFormat) { () throws(VipsError) in try withPPM.decode(.data(ppm)) }
        XCTAssertTrue(blocked?.message.contains("setUntrustedLoadersAllowed") ?? false, blocked?.message ?? "")
        try VipsRuntime.setUntrustedLoadersAllowed(true)
        defer { try? VipsRuntime.setUntrustedLoadersAllowed(false) }
        let bitmap = try withPPM.decode(.data(ppm))
        XCTAssertEqual(bitmap.width, 2)
        XCTAssertEqual(bitmap.pixel(x: 1, y: 1), [200, 200, 200])
    }

    func testInvalidTargetSizes() throws {
        let data = try ImageSynthesizer.data(width: 40, height: 30, format: .png())
        let invalid: [(TargetSize, Double)] = [
            (.maxPixelSize(0), 1), (.maxPixelSize(-1), 1), (.fit(width: 0, height: 10), 1),
            (.fit(width: 10, height: -5), 1),
            (.maxPixelSize(10), 0), (.maxPixelSize(10), -2), (.maxPixelSize(10), .nan), (.maxPixelSize(10), .infinity),
            (.original, 0), (.original, .nan)
        ]
        for (size, scale) in invalid {
            assertThrowsKind(
                .invalidArgument, { () throws(VipsError) in try decoder.decode(.data(data), size: size, scale: scale) },
                "\(size) at \(scale)")
        }
        // Arguments are checked before the input: a bad size on bad data is still an argument error.
        assertThrowsKind(.invalidArgument) { () throws(VipsError) in
            try decoder.decode(.data(Data()), size: .maxPixelSize(0))
        }
    }

    func testUpscaleBeyondTheLimitsIsRefused() throws {
        let data = try ImageSynthesizer.data(width: 40, height: 30, format: .png())
        let limited = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 1_000_000)))
        assertThrowsKind(.tooLarge) { () throws(VipsError) in
            try limited.decode(.data(data), size: .maxPixelSize(2_000), allowUpscale: true)
        }
        assertThrowsKind(.tooLarge) { () throws(VipsError) in
            try decoder.decode(.data(data), size: .maxPixelSize(.max), allowUpscale: true)
        }
        XCTAssertEqual(try limited.decode(.data(data), size: .maxPixelSize(1_000), allowUpscale: true).width, 1_000)
    }

    func testErrorsAreNotStickyAcrossCalls() throws {
        // libvips keeps one global error buffer: a failure must not leak into the next call's message or result.
        let good = try ImageSynthesizer.data(width: 40, height: 30, format: .jpeg())
        let bad = Data([0xFF, 0xD8, 0xFF] + [UInt8](repeating: 0x17, count: 200))
        for _ in 0..<5 {
            let error = assertThrowsKind(.corruptData) { () throws(VipsError) in
                try decoder.decode(.data(bad), size: .maxPixelSize(16))
            }
            XCTAssertNotNil(error)
            XCTAssertEqual(try decoder.decode(.data(good), size: .maxPixelSize(16)).width, 16)
        }
    }
}
