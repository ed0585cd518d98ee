import Foundation
import VipsSynthesis
import XCTest

@testable import VipsCore

/// `ImageDecoder.decode(_:geometry:)`: a plan made from the header, decoded
/// straight to it (shrink-on-load, the crop at the shrunk scale, the exact
/// resize, the result crop), against libvips' crop and resize of the
/// full-size upright image.
final class PlannedDecodeTests: XCTestCase {
    private let decoder = ImageDecoder()

    /// A fixed plan, whatever the header.
    private struct Fixed: ImageGeometry {
        let plan: DecodePlan
        var identifier: String { plan.description }
        func plan(for info: ImageInfo) -> DecodePlan { plan }
    }

    /// The mean absolute difference per channel (colour only) of two bitmaps of one size.
    private func difference(_ a: Bitmap, _ b: Bitmap) -> Double {
        var total = 0
        for y in 0..<a.height {
            for x in 0..<a.width {
                guard let p = a.pixel(x: x, y: y), let q = b.pixel(x: x, y: y) else { continue }
                for channel in 0..<3 { total += abs(Int(p[channel]) - Int(q[channel])) }
            }
        }
        return Double(total) / Double(a.width * a.height * 3)
    }

    /// libvips' own: the full-size upright decode, cropped, then resized to fit `size`.
    private func reference(
        _ input: ImageInput, crop: (x: Int, y: Int, width: Int, height: Int), size: (Int, Int)
    ) throws -> Bitmap {
        let full = try decoder.decode(input)
        let cropped = try ImageProcessors.Crop(x: crop.x, y: crop.y, width: crop.width, height: crop.height)
            .process(full)
        return try decoder.resize(cropped, to: .fit(width: size.0, height: size.1), scale: 1)
    }

    func testACropOfEveryOrientationIsCutFromTheUprightImage() throws {
        for orientation in 1...8 {
            let data = try ImageSynthesizer.data(
                width: 1600, height: 1200, seed: 31, marker: true, format: .jpeg(quality: 95, orientation: orientation))
            let swapped = orientation >= 5
            // Off centre, so a crop taken from the wrong corner differs.
            let crop = swapped ? (x: 100, y: 200, width: 800, height: 1000) : (x: 200, y: 100, width: 1000, height: 800)
            let size = swapped ? (200, 250) : (250, 200)
            let plan = DecodePlan(
                crop: .rect(x: crop.x, y: crop.y, width: crop.width, height: crop.height), width: size.0,
                height: size.1)
            let bitmap = try decoder.decode(.data(data), geometry: Fixed(plan: plan))
            XCTAssertEqual([bitmap.width, bitmap.height], [size.0, size.1], "orientation \(orientation)")
            XCTAssertEqual(bitmap.source?.loadShrink, 4, "orientation \(orientation): 1000 → 250 at 1/4")
            let expected = try reference(.data(data), crop: crop, size: size)
            XCTAssertLessThan(difference(bitmap, expected), 4, "orientation \(orientation)")
        }
    }

    func testResultCropsSmartCropsEnlargementAndAlpha() throws {
        let jpeg = try ImageSynthesizer.data(width: 1200, height: 800, seed: 32, format: .jpeg(quality: 95))
        // The whole image to a size a fit gives, then a result crop.
        var bitmap = try decoder.decode(
            .data(jpeg),
            geometry: Fixed(
                plan: DecodePlan(width: 300, height: 200, resultCrop: .rect(x: 50, y: 0, width: 200, height: 200))))
        XCTAssertEqual([bitmap.width, bitmap.height], [200, 200])
        XCTAssertEqual(bitmap.source?.loadShrink, 4)
        let fitted = try decoder.decode(.data(jpeg), size: .fit(width: 300, height: 200))
        XCTAssertLessThan(
            difference(bitmap, try ImageProcessors.Crop(x: 50, y: 0, width: 200, height: 200).process(fitted)), 1)
        // A smart crop of the source, and of the result.
        bitmap = try decoder.decode(
            .data(jpeg),
            geometry: Fixed(
                plan: DecodePlan(
                    crop: .smart(width: 400, height: 400, gravity: .attention),
                    width: 100, height: 100)))
        XCTAssertEqual([bitmap.width, bitmap.height, Int(bitmap.source?.loadShrink ?? 0)], [100, 100, 4])
        bitmap = try decoder.decode(
            .data(jpeg),
            geometry: Fixed(
                plan: DecodePlan(width: 150, height: 100, resultCrop: .smart(width: 80, height: 100, gravity: .entropy))
            ))
        XCTAssertEqual([bitmap.width, bitmap.height], [80, 100])
        // Enlarged: a crop resized past its own size.
        bitmap = try decoder.decode(
            .data(jpeg),
            geometry: Fixed(plan: DecodePlan(crop: .rect(x: 0, y: 0, width: 100, height: 50), width: 300, height: 150)))
        XCTAssertEqual([bitmap.width, bitmap.height, Int(bitmap.source?.loadShrink ?? 0)], [300, 150, 1])
        // Stretched, with alpha (premultiplied), from a PNG (no shrink-on-load), and a WebP (scaled on load).
        let png = try ImageSynthesizer.data(width: 600, height: 400, seed: 33, alpha: true, format: .png())
        bitmap = try decoder.decode(
            .data(png),
            geometry: Fixed(
                plan: DecodePlan(crop: .rect(x: 100, y: 0, width: 400, height: 400), width: 100, height: 50)))
        XCTAssertEqual(
            [bitmap.width, bitmap.height, bitmap.channels, Int(bitmap.source?.loadShrink ?? 0)], [100, 50, 4, 1])
        let webp = try ImageSynthesizer.data(width: 1200, height: 800, seed: 34, format: .webp())
        bitmap = try decoder.decode(
            .data(webp),
            geometry: Fixed(plan: DecodePlan(crop: .rect(x: 0, y: 0, width: 600, height: 800), width: 150, height: 200))
        )
        XCTAssertEqual([bitmap.width, bitmap.height], [150, 200])
        XCTAssertEqual(bitmap.source?.loadShrink ?? 0, 4, accuracy: 0.01)
        let expected = try reference(.data(webp), crop: (0, 0, 600, 800), size: (150, 200))
        XCTAssertLessThan(difference(bitmap, expected), 4)
    }

    func testPlansThatDoNotFitTheImageAreRefused() throws {
        let png = try ImageSynthesizer.data(width: 60, height: 40, seed: 35, format: .png())
        for plan in [
            DecodePlan(width: 0, height: 10),
            DecodePlan(
                crop: .rect(x: 50, y: 0, width: 20, height: 10), width: 5,
                height: 5),
            DecodePlan(width: 10, height: 10, resultCrop: .rect(x: 0, y: 0, width: 11, height: 10)),
            DecodePlan(crop: .smart(width: 61, height: 10, gravity: .attention), width: 5, height: 5)
        ] {
            XCTAssertThrowsError(try decoder.decode(.data(png), geometry: Fixed(plan: plan)), "\(plan)") { error in
                XCTAssertEqual((error as? VipsError)?.kind, .invalidArgument, "\(plan)")
            }
        }
        // Over the decoder's limits: an enlargement is bounded like any image.
        let limited = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 10_000)))
        XCTAssertThrowsError(
            try limited.decode(.data(png), geometry: Fixed(plan: DecodePlan(width: 1000, height: 1000)))
        ) { error in XCTAssertEqual((error as? VipsError)?.kind, .tooLarge) }
    }
}
