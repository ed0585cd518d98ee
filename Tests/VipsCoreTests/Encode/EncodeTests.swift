import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// `ImageEncoder` round trips, `Bitmap` construction and in-memory `resize`.
final class EncodeTests: XCTestCase {
    let decoder = ImageDecoder()
    let encoder = ImageEncoder()

    // MARK: - Round trips

    func testJPEGRoundTrip() throws {
        let source = try ImageSynthesizer.bitmap(width: 200, height: 150, seed: 81)
        let data = try encoder.encode(source, as: .jpeg()).data
        XCTAssertEqual(ImageFormat.sniff(data), .jpeg)
        let decoded = try decoder.decode(.data(data))
        XCTAssertEqual(decoded.width, 200)
        XCTAssertEqual(decoded.height, 150)
        assertSRGB8(decoded, alpha: false)
        // The synthetic noise and hard edges cost JPEG some per-pixel accuracy
        // (about 8 at quality 85), never the overall colour.
        XCTAssertLessThan(decoded.meanAbsoluteDifference(to: source), 12)
        for (decodedMean, sourceMean) in zip(decoded.meanColour, source.meanColour) {
            XCTAssertLessThan(abs(decodedMean - sourceMean), 2)
        }
    }

    func testJPEGQualityAndProgressive() throws {
        let source = try ImageSynthesizer.bitmap(width: 200, height: 150, seed: 82)
        let high = try encoder.encode(source, as: .jpeg(quality: 95)).data
        let low = try encoder.encode(source, as: .jpeg(quality: 30)).data
        XCTAssertGreaterThan(high.count, low.count)
        XCTAssertLessThan(
            try decoder.decode(.data(high)).meanAbsoluteDifference(to: source),
            try decoder.decode(.data(low)).meanAbsoluteDifference(to: source))
        // Baseline frames start with SOF0 (FF C0), progressive ones with SOF2 (FF C2).
        func hasMarker(_ data: Data, _ marker: UInt8) -> Bool {
            let bytes = [UInt8](data)
            return zip(bytes, bytes.dropFirst()).contains { $0 == 0xFF && $1 == marker }
        }
        let baseline = try encoder.encode(source, as: .jpeg(progressive: false)).data
        let progressive = try encoder.encode(source, as: .jpeg(progressive: true)).data
        XCTAssertTrue(hasMarker(baseline, 0xC0))
        XCTAssertFalse(hasMarker(baseline, 0xC2))
        XCTAssertTrue(hasMarker(progressive, 0xC2))
        XCTAssertEqual(try decoder.decode(.data(progressive)).width, 200)
        // Out-of-range settings are refused, never clamped.
        for format in [OutputFormat.jpeg(quality: 0), .jpeg(quality: 500), .png(compression: 10), .webp(quality: 0)] {
            assertThrowsKind(
                .invalidArgument, { () throws(VipsError) in try encoder.encode(source, as: format) }, "\(format)")
        }
    }

    func testJPEGOfRGBADropsAlpha() throws {
        let source = try ImageSynthesizer.bitmap(width: 64, height: 48, seed: 83, alpha: true)
        let decoded = try decoder.decode(.data(encoder.encode(source, as: .jpeg()).data))
        XCTAssertEqual(decoded.channels, 3)
        XCTAssertEqual(decoded.width, 64)
    }

    func testJPEGCompositesTransparencyOntoWhite() throws {
        // Left half: transparent black; right half: opaque red; one pixel half-transparent blue.
        var pixels = [UInt8]()
        for y in 0..<16 {
            for x in 0..<32 {
                if x == 4 && y == 4 {
                    pixels += [0, 0, 255, 128]
                } else {
                    pixels += x < 16 ? [0, 0, 0, 0] : [255, 0, 0, 255]
                }
            }
        }
        let source = try Bitmap(width: 32, height: 16, channels: 4, pixels: pixels)
        let decoded = try decoder.decode(.data(encoder.encode(source, as: .jpeg(quality: 95)).data))
        XCTAssertLessThan(
            colourDistance(decoded.meanColour(aroundX: 10, y: 10, radius: 2), [255, 255, 255]), 6, "transparent → white"
        )
        XCTAssertLessThan(
            colourDistance(decoded.meanColour(aroundX: 26, y: 8, radius: 2), [255, 0, 0]), 12, "opaque kept")
        let png = try decoder.decode(.data(encoder.encode(source, as: .png()).data))
        XCTAssertEqual(png.channels, 4, "PNG keeps the alpha")
    }

    func testPNGRoundTripIsLossless() throws {
        for alpha in [false, true] {
            let source = try ImageSynthesizer.bitmap(width: 200, height: 150, seed: 84, alpha: alpha)
            let data = try encoder.encode(source, as: .png()).data
            XCTAssertEqual(ImageFormat.sniff(data), .png)
            XCTAssertEqual(try decoder.info(.data(data)).hasAlpha, alpha)
            let decoded = try decoder.decode(.data(data))
            XCTAssertEqual(decoded.width, 200)
            XCTAssertEqual(decoded.height, 150)
            XCTAssertEqual(decoded.channels, alpha ? 4 : 3)
            XCTAssertEqual(decoded.bytes, source.bytes, "alpha: \(alpha)")
        }
        let source = try ImageSynthesizer.bitmap(width: 200, height: 150, seed: 85)
        let stored = try encoder.encode(source, as: .png(compression: 0)).data
        let packed = try encoder.encode(source, as: .png(compression: 9)).data
        XCTAssertGreaterThan(stored.count, packed.count)
        XCTAssertGreaterThanOrEqual(stored.count, 200 * 150 * 3, "compression 0 stores the pixels")
        XCTAssertEqual(try decoder.decode(.data(stored)).bytes, source.bytes)
    }

    func testWebPRoundTrips() throws {
        let rgb = try ImageSynthesizer.bitmap(width: 200, height: 150, seed: 86)
        let lossy = try encoder.encode(rgb, as: .webp()).data
        XCTAssertEqual(ImageFormat.sniff(lossy), .webp)
        let decodedLossy = try decoder.decode(.data(lossy))
        XCTAssertEqual(decodedLossy.width, 200)
        XCTAssertEqual(decodedLossy.height, 150)
        XCTAssertEqual(decodedLossy.channels, 3)
        XCTAssertLessThan(decodedLossy.meanAbsoluteDifference(to: rgb), 8)

        let lossless = try encoder.encode(rgb, as: .webp(lossless: true)).data
        XCTAssertEqual(try decoder.decode(.data(lossless)).bytes, rgb.bytes)

        let rgba = try ImageSynthesizer.bitmap(width: 200, height: 150, seed: 87, alpha: true)
        for format: OutputFormat in [.webp(), .webp(lossless: true)] {
            let decoded = try decoder.decode(.data(encoder.encode(rgba, as: format).data))
            XCTAssertEqual(decoded.channels, 4, "\(format) keeps alpha")
            var maxAlphaError = 0
            for y in stride(from: 0, to: 150, by: 5) {
                for x in stride(from: 0, to: 200, by: 5) {
                    maxAlphaError = max(
                        maxAlphaError, abs(Int(decoded.pixel(x: x, y: y)![3]) - Int(rgba.pixel(x: x, y: y)![3])))
                }
            }
            XCTAssertLessThanOrEqual(maxAlphaError, 3, "\(format)")
        }
    }

    func testEncodedFileDecodesFromDisk() throws {
        let folder = try TemporaryFolder()
        let source = try ImageSynthesizer.bitmap(width: 120, height: 80, seed: 88)
        for format: OutputFormat in [.jpeg(), .png(), .webp()] {
            let path = try folder.write(
                try encoder.encode(source, as: format).data, named: "out.\(format.fileExtension)")
            let decoded = try decoder.decode(.file(path), size: .maxPixelSize(60))
            XCTAssertEqual(decoded.width, 60, "\(format)")
            XCTAssertEqual(decoded.height, 40, "\(format)")
        }
    }

    // MARK: - Bitmap

    func testBitmapFromPixels() throws {
        var pixels: [UInt8] = []
        for y in 0..<3 { for x in 0..<4 { pixels += [UInt8(x * 60), UInt8(y * 100), 7] } }
        let bitmap = try Bitmap(width: 4, height: 3, channels: 3, scale: 2, pixels: pixels)
        XCTAssertEqual(bitmap.width, 4)
        XCTAssertEqual(bitmap.height, 3)
        XCTAssertEqual(bitmap.bytesPerRow, 12)
        XCTAssertEqual(bitmap.cost, 36)
        XCTAssertEqual(bitmap.pointSize.width, 2)
        XCTAssertEqual(bitmap.pointSize.height, 1.5)
        XCTAssertFalse(bitmap.hasAlpha)
        XCTAssertEqual(bitmap.pixel(x: 3, y: 2), [180, 200, 7])
        XCTAssertEqual(bitmap.pixel(x: 0, y: 1), [0, 100, 7])
        XCTAssertNil(bitmap.pixel(x: 4, y: 0))
        XCTAssertNil(bitmap.pixel(x: 0, y: -1))
        XCTAssertEqual([UInt8](bitmap.pixelData), pixels)
        XCTAssertEqual(bitmap.withScale(3).scale, 3)
        XCTAssertEqual(bitmap.withScale(3).bytes, pixels)

        // The pixels are copied: changing the caller's array afterwards changes nothing.
        var mutable = pixels
        let copy = try Bitmap(width: 4, height: 3, channels: 3, pixels: mutable)
        mutable[0] = 255
        XCTAssertEqual(copy.pixel(x: 0, y: 0), [0, 0, 7])

        let rgba = try Bitmap(width: 1, height: 1, channels: 4, pixels: Data([1, 2, 3, 4]))
        XCTAssertTrue(rgba.hasAlpha)
        XCTAssertEqual(rgba.pixel(x: 0, y: 0), [1, 2, 3, 4])
        // A hand-built bitmap encodes and decodes like any other.
        XCTAssertEqual(try decoder.decode(.data(encoder.encode(bitmap, as: .png()).data)).bytes, pixels)
    }

    func testBitmapValidation() {
        let twelve = [UInt8](repeating: 9, count: 12)
        let invalid: [(width: Int, height: Int, channels: Int, scale: Double, count: Int)] = [
            (0, 4, 3, 1, 0), (4, 0, 3, 1, 0), (-1, 4, 3, 1, 12), (2, 2, 1, 1, 4), (2, 2, 2, 1, 8), (2, 2, 5, 1, 20),
            (2, 2, 3, 0, 12), (2, 2, 3, -1, 12), (2, 2, 3, .nan, 12), (2, 2, 3, .infinity, 12),
            (2, 2, 3, 1, 11), (2, 2, 3, 1, 13), (2, 2, 4, 1, 12), (Int.max, 2, 3, 1, 12), (1 << 62, 1 << 62, 4, 1, 0),
            (1 << 61, 1, 4, 1, 0) // the pixel count fits an Int, the byte count does not
        ]
        for args in invalid {
            assertThrowsKind(
                .invalidArgument,
                { () throws(VipsError) in
                    try Bitmap(
                        width: args.width, height: args.height, channels: args.channels, scale: args.scale,
                        pixels: [UInt8](repeating: 1, count: args.count))
                }, "\(args)")
        }
        XCTAssertNoThrow(try Bitmap(width: 2, height: 2, channels: 3, pixels: twelve))
        XCTAssertNoThrow(try Bitmap(width: 3, height: 1, channels: 4, pixels: twelve))
    }

    // MARK: - Resize

    func testResizeDownscalesInMemory() throws {
        let source = try ImageSynthesizer.bitmap(width: 400, height: 300, seed: 89)
        let small = try decoder.resize(source, to: .maxPixelSize(100), scale: 1)
        XCTAssertEqual(small.width, 100)
        XCTAssertEqual(small.height, 75)
        XCTAssertEqual(small.channels, 3)
        let retina = try decoder.resize(source, to: .fit(width: 100, height: 100), scale: 2)
        XCTAssertEqual(retina.width, 200)
        XCTAssertEqual(retina.height, 150)
        XCTAssertEqual(retina.scale, 2)

        // The same picture as decoding a lossless file of it to that size.
        let png = try encoder.encode(source, as: .png()).data
        let decoded = try decoder.decode(.data(png), size: .maxPixelSize(100))
        XCTAssertLessThan(small.meanAbsoluteDifference(to: decoded), 1)

        let rgba = try ImageSynthesizer.bitmap(width: 400, height: 300, seed: 89, alpha: true)
        XCTAssertEqual(try decoder.resize(rgba, to: .maxPixelSize(50), scale: 1).channels, 4)
    }

    func testResizeNeverUpscales() throws {
        let source = try ImageSynthesizer.bitmap(width: 120, height: 90, seed: 90)
        for size: TargetSize in [
            .maxPixelSize(120), .maxPixelSize(1000), .fit(width: 500, height: 91), .maxPixelSize(.max)
        ] {
            let resized = try decoder.resize(source, to: size, scale: 1)
            XCTAssertEqual(resized.width, 120, "\(size)")
            XCTAssertEqual(resized.height, 90, "\(size)")
            XCTAssertEqual(resized.bytes, source.bytes, "\(size): nothing to do, nothing changed")
        }
        let original = try decoder.resize(source, to: .original, scale: 3)
        XCTAssertEqual(original.scale, 3)
        XCTAssertEqual(original.bytes, source.bytes)
        let scaled = try decoder.resize(source, to: .maxPixelSize(100), scale: 2)
        XCTAssertEqual(scaled.width, 120, "200 px box: no upscale")
        XCTAssertEqual(scaled.scale, 2)
    }

    func testResizeRejectsInvalidSizes() throws {
        let source = try ImageSynthesizer.bitmap(width: 40, height: 30, seed: 91)
        let invalid: [(TargetSize, Double)] = [
            (.maxPixelSize(0), 1), (.fit(width: -1, height: 5), 1), (.maxPixelSize(10), 0),
            (.maxPixelSize(10), .infinity),
            (.maxPixelSize(10), .nan), (.original, 0), (.original, -1), (.original, .nan)
        ]
        for (size, scale) in invalid {
            assertThrowsKind(
                .invalidArgument, { () throws(VipsError) in try decoder.resize(source, to: size, scale: scale) },
                "\(size) at \(scale)")
        }
    }
}
