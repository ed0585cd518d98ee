import Foundation
import XCTest
@testable import VipsCore
@_spi(Testing) import VipsCore

/// Colour conversion: whatever the source colour model and depth, the output
/// is 8-bit sRGB that looks like the picture that was encoded.
final class ColourTests: XCTestCase {
    let decoder = ImageDecoder()

    /// The thumbnail of the plain 8-bit RGB PNG of `seed`: the colour reference.
    func reference(seed: Int, alpha: Bool = false, grey: Bool = false) throws -> Bitmap {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: seed, alpha: alpha, format: .png(grey: grey))
        return try decoder.decode(.data(data), size: .maxPixelSize(200))
    }

    func assertLooksLike(_ bitmap: Bitmap, _ reference: Bitmap, meanTolerance: Double, pixelTolerance: Double,
                         _ label: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(bitmap.width, reference.width, label, file: file, line: line)
        XCTAssertEqual(bitmap.height, reference.height, label, file: file, line: line)
        let mean = bitmap.meanColour, expected = reference.meanColour
        for channel in 0..<3 {
            XCTAssertLessThan(abs(mean[channel] - expected[channel]), meanTolerance,
                              "\(label): channel \(channel) mean \(mean[channel]) vs \(expected[channel])", file: file, line: line)
        }
        // The mean alone would pass a blurred or channel-swapped picture of similar tone.
        XCTAssertLessThan(bitmap.meanAbsoluteDifference(to: reference), pixelTolerance, label, file: file, line: line)
    }

    func testCMYKJPEGComesOutAsPlausibleSRGB() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 31, format: .jpeg(cmyk: true))
        XCTAssertEqual(try decoder.info(.data(data)).bands, 4)
        let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(200))
        assertSRGB8(bitmap, alpha: false, "CMYK")
        assertLooksLike(bitmap, try reference(seed: 31), meanTolerance: 12, pixelTolerance: 16, "CMYK JPEG")
        // The full-size path (no resize) must convert too.
        let full = try decoder.decode(.data(data))
        assertSRGB8(full, alpha: false, "CMYK original")
        XCTAssertEqual(full.width, 400)
    }

    func testSixteenBitPNGComesOutAsEightBitSRGB() throws {
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 32, format: .png(sixteenBit: true))
        let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(200))
        assertSRGB8(bitmap, alpha: false, "16-bit")
        assertLooksLike(bitmap, try reference(seed: 32), meanTolerance: 2, pixelTolerance: 2, "16-bit PNG")

        let withAlpha = try ImageSynthesizer.data(width: 400, height: 300, seed: 32, alpha: true, format: .png(sixteenBit: true))
        let alphaBitmap = try decoder.decode(.data(withAlpha), size: .maxPixelSize(200))
        assertSRGB8(alphaBitmap, alpha: true, "16-bit with alpha")
        let alphaReference = try reference(seed: 32, alpha: true)
        XCTAssertLessThan(abs(alphaBitmap.meanColour[3] - alphaReference.meanColour[3]), 2, "alpha scaled, not clipped")
        assertLooksLike(alphaBitmap, alphaReference, meanTolerance: 2, pixelTolerance: 2, "16-bit PNG with alpha")
    }

    func testGreyComesOutAsNeutralRGB() throws {
        for format: ImageSynthesizer.Format in [.png(grey: true), .png(sixteenBit: true, grey: true)] {
            let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 33, format: format)
            let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(200))
            assertSRGB8(bitmap, alpha: false, "\(format)")
            for y in stride(from: 0, to: bitmap.height, by: 13) {
                for x in stride(from: 0, to: bitmap.width, by: 13) {
                    let pixel = bitmap.pixel(x: x, y: y)!
                    XCTAssertTrue(pixel[0] == pixel[1] && pixel[1] == pixel[2], "\(format): grey at \(x),\(y) is \(pixel)")
                }
            }
            assertLooksLike(bitmap, try reference(seed: 33, grey: true), meanTolerance: 2, pixelTolerance: 2, "\(format)")
        }
    }

    func testEveryFormatKeepsThePicturesColours() throws {
        // Lossy and palette formats shift colours a little, never a lot.
        let expected = try reference(seed: 34)
        let formats: [(ImageSynthesizer.Format, Double)] = [
            (.jpeg(), 6), (.jpeg(progressive: true), 6), (.webp(), 10), (.webp(lossless: true), 3),
            (.png(palette: true), 10), (.png(interlaced: true), 1), (.gif, 14), (.tiff, 1),
        ]
        for (format, tolerance) in formats {
            let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 34, format: format)
            let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(200))
            assertLooksLike(bitmap, expected, meanTolerance: 6, pixelTolerance: tolerance, "\(format)")
        }
    }

    func testDifferentSeedsAreDifferentPictures() throws {
        // Guards the colour tests above: they would prove nothing if every seed looked alike.
        let a = try reference(seed: 35), b = try reference(seed: 36)
        XCTAssertGreaterThan(a.meanAbsoluteDifference(to: b), 20)
    }
}
