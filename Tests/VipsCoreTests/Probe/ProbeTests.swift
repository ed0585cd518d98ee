import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// Header probes (`ImageDecoder.info`) and magic-byte sniffing.
final class ProbeTests: XCTestCase {
    let decoder = ImageDecoder()

    func testInfoOfEveryFormatFromDataAndFile() throws {
        let folder = try TemporaryFolder()
        for (variant, data) in zip(Fixtures.variants, Fixtures.variantData) {
            let path = try folder.write(data, named: "\(variant.name).\(variant.format.fileExtension)")
            for input in [ImageInput.data(data), .file(path)] {
                let info = try decoder.info(input)
                let label = "\(variant.name) from \(input.label)"
                XCTAssertEqual(info.width, 400, label)
                XCTAssertEqual(info.height, 300, label)
                XCTAssertEqual(info.pixelCount, 120_000, label)
                XCTAssertEqual(info.format, Fixtures.expectedFormat(variant.format), label)
                XCTAssertEqual(info.hasAlpha, variant.alpha, label)
                XCTAssertEqual(info.orientation, 1, label)
                XCTAssertEqual(info.pages, 1, label)
            }
        }
    }

    func testAVIFAndHEICAreToldApartThoughOneLoaderReadsBoth() throws {
        let samples = try HostileFiles.heifSamples()
        let formats = try samples.map { try ImageDecoder().info(.data($0.data)).format }
        XCTAssertEqual(samples.map(\.name), ["tiny.avif", "grid.heic"])
        XCTAssertEqual(formats, [.avif, .heif])
    }

    func testInfoReportsStoredBands() throws {
        func bands(_ format: ImageSynthesizer.Format, alpha: Bool = false) throws -> Int {
            try decoder.info(.data(ImageSynthesizer.data(width: 64, height: 48, alpha: alpha, format: format))).bands
        }
        XCTAssertEqual(try bands(.png()), 3)
        XCTAssertEqual(try bands(.png(), alpha: true), 4)
        XCTAssertEqual(try bands(.png(grey: true)), 1)
        XCTAssertEqual(try bands(.png(grey: true), alpha: true), 2)
        XCTAssertEqual(try bands(.jpeg(cmyk: true)), 4, "CMYK JPEG has four stored bands")
        let cmyk = try decoder.info(.data(ImageSynthesizer.data(width: 64, height: 48, format: .jpeg(cmyk: true))))
        XCTAssertFalse(cmyk.hasAlpha, "the fourth CMYK band is black, not alpha")
    }

    func testInfoDoesNotDecodePixels() throws {
        // A header probe must not touch the pixels: a PNG whose header claims
        // 10000×10000 (the default limit) but which holds nine bytes of pixel data probes fine.
        let info = try decoder.info(.data(craftedPNGHeader(width: 10_000, height: 10_000) + pngEnd))
        XCTAssertEqual(info.width, 10_000)
        XCTAssertEqual(info.height, 10_000)
        XCTAssertEqual(info.format, .png)
    }

    func testSniffRecognisesEachFormatsMagicBytes() throws {
        for variant in Fixtures.variants {
            let data = try ImageSynthesizer.data(width: 32, height: 24, alpha: variant.alpha, format: variant.format)
            XCTAssertEqual(ImageFormat.sniff(data), Fixtures.expectedFormat(variant.format), variant.name)
            XCTAssertEqual(
                ImageFormat.sniff(data.prefix(16)), Fixtures.expectedFormat(variant.format),
                "16 bytes are enough: \(variant.name)")
        }
        let encoded = try ImageEncoder().encode(
            ImageSynthesizer.bitmap(width: 32, height: 24), as: .webp(lossless: true)
        ).data
        XCTAssertEqual(ImageFormat.sniff(encoded), .webp)

        let ascii = { (text: String) in Array(text.utf8) }
        let magic: [(bytes: [UInt8], format: ImageFormat)] = [
            ([0xFF, 0xD8, 0xFF, 0xE0], .jpeg),
            ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], .png),
            (ascii("GIF87a"), .gif),
            (ascii("GIF89a"), .gif),
            (ascii("RIFF") + [0x10, 0, 0, 0] + ascii("WEBPVP8 "), .webp),
            ([0x49, 0x49, 0x2A, 0x00], .tiff),
            ([0x4D, 0x4D, 0x00, 0x2A], .tiff),
            ([0x49, 0x49, 0x2B, 0x00], .tiff),
            ([0, 0, 0, 0x1C] + ascii("ftypavif"), .avif),
            ([0, 0, 0, 0x18] + ascii("ftypheic"), .heif),
            ([0, 0, 0, 0x18] + ascii("ftypmif1"), .heif),
            ([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20], .jp2k),
            ([0xFF, 0x4F, 0xFF, 0x51], .jp2k),
            ([0xFF, 0x0A], .jxl),
            ([0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20], .jxl),
            (ascii("%PDF-1.7"), .pdf),
            (ascii("BM") + [0x36, 0x10], .bmp),
            (ascii("P6\n4 4\n255\n"), .ppm),
            (ascii("<svg xmlns="), .svg),
            ([0xEF, 0xBB, 0xBF] + ascii(" \n<?xml version"), .svg),
            (ascii("<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\""), .svg),
            (ascii("<!doctype svg>"), .svg)
        ]
        for (bytes, format) in magic {
            XCTAssertEqual(ImageFormat.sniff(bytes), format, "\(bytes.prefix(12))")
        }
    }

    func testSniffRejectsJunk() {
        var generator = SystemRandomNumberGenerator()
        let ascii = { (text: String) in Array(text.utf8) }
        let junk: [[UInt8]] = [
            [],
            [0xFF],
            [0xFF, 0xD8], // JPEG SOI without a marker
            [0x89, 0x50, 0x4E, 0x47], // PNG signature cut short
            ascii("GIF88a"),
            ascii("RIFF") + [0, 0, 0, 0] + ascii("WAVE"), // a RIFF that is not WebP
            [0, 0, 0, 0x18] + ascii("ftypisom"), // an MP4, not HEIF
            ascii("hello, world: this is plain text"),
            ascii("<html><body>not an image</body></html>"),
            ascii("<!DOCTYPE html><html><body>404</body></html>"),
            ascii("<!doctype sv"),
            ascii("P7\n"),
            [UInt8](repeating: 0, count: 32)
        ]
        for bytes in junk {
            XCTAssertNil(ImageFormat.sniff(bytes), "\(bytes)")
        }
        // Random bytes that happen to start like a known signature are vanishingly rare;
        // avoid the few leading bytes that begin one.
        for _ in 0..<50 {
            var bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            bytes[0] = UInt8.random(in: 0x01...0x20, using: &generator)
            XCTAssertNil(ImageFormat.sniff(bytes), "\(bytes)")
        }
    }
}

// MARK: - Crafted PNG headers

/// A PNG chunk: length, type, data, CRC.
func pngChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
    let body = Array(type.utf8) + data
    return bigEndian(UInt32(data.count)) + body + bigEndian(crc32(body))
}

/// A PNG signature, a valid IHDR for an 8-bit RGB image of any size, and
/// the start of an IDAT chunk (a tiny zlib stream, far too short for the size).
func craftedPNGHeader(width: UInt32, height: UInt32) -> Data {
    let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    // Bit depth 8, colour type 2 (RGB), compression 0, filter 0, no interlace.
    let header = pngChunk("IHDR", bigEndian(width) + bigEndian(height) + [8, 2, 0, 0, 0])
    let pixels = pngChunk("IDAT", [0x78, 0x9C, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01])
    return Data(signature + header + pixels)
}

/// An IEND chunk.
let pngEnd = Data(pngChunk("IEND", []))
