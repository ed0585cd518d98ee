import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// The formats imgproxy writes beyond the web's five: JPEG XL, HEIC and TIFF
/// through libvips, BMP and ICO written in Swift; quality steps; greyscale
/// output; the colour profile kept without the rest of the metadata.
final class MoreFormatsEncodeTests: XCTestCase {
    let encoder = ImageEncoder()
    /// JPEG XL is off by default for decoding: these tests read back what they wrote.
    let decoder = ImageDecoder(options: DecodeOptions(allowedFormats: ImageFormat.defaultAllowed.union([.jxl])))

    func testJXLHEICAndTIFFRoundTrip() throws {
        // The JPEG XL loader is untrusted (blocked); its saver is not. Reading back needs the loader.
        try VipsRuntime.setUntrustedLoadersAllowed(true)
        defer { try? VipsRuntime.setUntrustedLoadersAllowed(false) }
        let source = try ImageSynthesizer.bitmap(width: 120, height: 90, seed: 301)
        for (format, sniffed, tolerance) in [
            (OutputFormat.jxl(), ImageFormat.jxl, 12.0), (.jxl(lossless: true), .jxl, 0.0),
            (.heic(), .heif, 14.0), (.tiff(), .tiff, 0.0)
        ] {
            let encoded = try encoder.encode(source, as: format)
            XCTAssertEqual(ImageFormat.sniff(encoded.data.prefix(64)), sniffed, "\(format)")
            XCTAssertEqual(encoded.format.imageFormat, sniffed)
            let decoded = try decoder.decode(.data(encoded.data))
            XCTAssertEqual(decoded.width, 120, "\(format)")
            XCTAssertEqual(decoded.height, 90, "\(format)")
            XCTAssertLessThanOrEqual(decoded.meanAbsoluteDifference(to: source), tolerance, "\(format)")
        }
        let alpha = try ImageSynthesizer.bitmap(width: 40, height: 30, seed: 302, alpha: true)
        for format in [OutputFormat.jxl(), .heic(), .tiff()] {
            XCTAssertTrue(try decoder.decode(.data(encoder.encode(alpha, as: format).data)).hasAlpha, "\(format)")
        }
    }

    func testBMPIsExactForRGBAndRGBA() throws {
        for alpha in [false, true] {
            // An odd width: 24-bit rows are padded to four bytes.
            let source = try ImageSynthesizer.bitmap(width: 33, height: 17, seed: 303, alpha: alpha)
            let data = try encoder.encode(source, as: .bmp).data
            XCTAssertEqual(ImageFormat.sniff(data.prefix(64)), .bmp)
            let rowBytes = (33 * (alpha ? 4 : 3) + 3) & ~3
            XCTAssertEqual(data.count, 14 + (alpha ? 108 : 40) + rowBytes * 17)
            let decoded = try decoder.decode(.data(data))
            XCTAssertEqual(decoded.channels, alpha ? 4 : 3)
            XCTAssertEqual(decoded.meanAbsoluteDifference(to: source), 0, "alpha \(alpha): BMP is lossless")
        }
    }

    func testICOHoldsOnePNGAndRefusesOver256() throws {
        let source = try ImageSynthesizer.bitmap(width: 256, height: 48, seed: 304, alpha: true)
        let data = try encoder.encode(source, as: .ico).data
        XCTAssertEqual(ImageFormat.sniff(data.prefix(64)), .ico)
        XCTAssertEqual(Array(data.prefix(8)), [0, 0, 1, 0, 1, 0, 0, 48], "one icon; 0 is 256 wide")
        XCTAssertEqual(Array(data[22..<30]), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "a PNG inside")
        let decoded = try decoder.decode(.data(data))
        XCTAssertEqual(decoded.width, 256)
        XCTAssertEqual(decoded.height, 48)
        XCTAssertEqual(decoded.meanAbsoluteDifference(to: source), 0)
        let large = try ImageSynthesizer.bitmap(width: 257, height: 10, seed: 305)
        XCTAssertThrowsError(try encoder.encode(large, as: .ico)) { error in
            XCTAssertEqual((error as? VipsError)?.kind, .invalidArgument)
        }
    }

    func testQualityIsReadAndReplacedOnlyWhereTheFormatHasOne() throws {
        XCTAssertEqual(OutputFormat.jxl(quality: 60).withQuality(30), .jxl(quality: 30))
        XCTAssertEqual(OutputFormat.heic(quality: 60, effort: 2).withQuality(30), .heic(quality: 30, effort: 2))
        XCTAssertEqual(OutputFormat.tiff(quality: 60).quality, 60)
        XCTAssertNil(OutputFormat.webp(lossless: true).quality)
        for format in [OutputFormat.png(), .gif, .bmp, .ico] {
            XCTAssertNil(format.quality)
            XCTAssertEqual(format.withQuality(10), format)
        }
        XCTAssertThrowsError(try OutputFormat.jxl(effort: 0).validate())
        XCTAssertThrowsError(try OutputFormat.heic(quality: 101).validate())
        XCTAssertEqual(OutputFormat(name: "jxl"), .jxl())
        XCTAssertEqual(OutputFormat(name: "ico"), .ico)
    }

    /// One band for grey, two with alpha: the PNG's colour type and the JPEG's component count say so.
    func testGreyscaleOutputHasOneBandOrTwoWithAlpha() throws {
        let grey = try decoder.decode(
            .data(ImageSynthesizer.data(width: 64, height: 48, seed: 306, format: .png(grey: true))))
        XCTAssertEqual(grey.channels, 3, "decoded as RGB")
        let png = try encoder.encode(grey, as: .png(), greyscale: true).data
        XCTAssertEqual(png[25], 0, "PNG colour type 0: grey")
        let rgbPNG = try encoder.encode(grey, as: .png()).data
        XCTAssertEqual(rgbPNG[25], 2, "without the switch: RGB")
        let decoded = try decoder.decode(.data(png))
        XCTAssertLessThanOrEqual(decoded.meanAbsoluteDifference(to: grey), 1, "the same greys")
        let jpeg = try encoder.encode(grey, as: .jpeg(), greyscale: true).data
        XCTAssertEqual(JPEGSegments.components(jpeg), 1)
        XCTAssertEqual(JPEGSegments.components(try encoder.encode(grey, as: .jpeg()).data), 3)
        let alpha = try ImageSynthesizer.bitmap(width: 32, height: 32, seed: 307, alpha: true)
        XCTAssertEqual(try encoder.encode(alpha, as: .png(), greyscale: true).data[25], 4, "grey and alpha")
    }

    /// The sRGB profile alone: `keepingColorProfile` without the EXIF block.
    func testColourProfileIsKeptWithoutTheOtherMetadata() throws {
        let plain = try ImageSynthesizer.bitmap(width: 64, height: 48, seed: 308)
        // What a decode keeping metadata records for a source with a profile.
        let bitmap = Bitmap(
            width: plain.width, height: plain.height, channels: plain.channels, scale: 1, storage: plain.storage,
            source: BitmapSource(
                info: ImageInfo(
                    width: 64, height: 48, format: .jpeg, bands: 3, hasAlpha: false, orientation: 1, pages: 1),
                decodedLeniently: false, metadata: ImageMetadata(exif: nil, hadICCProfile: true)))
        let stripped = try encoder.encode(bitmap, as: .jpeg()).data
        XCTAssertFalse(JPEGSegments.contains(stripped, marker: 0xE2), "no ICC by default")
        let profiled = try encoder.encode(bitmap, as: .jpeg(), keepingColorProfile: true).data
        // (libvips writes a minimal EXIF block of its own, resolution and orientation, whenever it does not strip.)
        XCTAssertTrue(JPEGSegments.contains(profiled, marker: 0xE2), "APP2: the ICC profile")
        let kept = try encoder.encode(bitmap, as: .jpeg(), keepingMetadata: true).data
        XCTAssertTrue(JPEGSegments.contains(kept, marker: 0xE2), "kept metadata keeps the profile by default")
        let noProfile = try encoder.encode(bitmap, as: .jpeg(), keepingMetadata: true, keepingColorProfile: false).data
        XCTAssertFalse(JPEGSegments.contains(noProfile, marker: 0xE2), "the profile stripped, the metadata kept")
        XCTAssertFalse(
            JPEGSegments.contains(try encoder.encode(plain, as: .jpeg(), keepingColorProfile: true).data, marker: 0xE2),
            "a source without a profile gets none")
    }
}
