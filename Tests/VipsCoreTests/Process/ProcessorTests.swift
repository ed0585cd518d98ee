import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// The built-in processors on real bitmaps.
final class ProcessorTests: XCTestCase {
    private static let grey: [UInt8] = [128, 128, 128]
    private static let red: [UInt8] = [255, 0, 0]

    /// `width` × `height` grey with a red `marker`-sized block at the top left.
    private func marked(_ width: Int, _ height: Int, marker: Int = 10) throws -> Bitmap {
        var pixels: [UInt8] = []
        for y in 0..<height { for x in 0..<width { pixels += (x < marker && y < marker) ? Self.red : Self.grey } }
        return try Bitmap(width: width, height: height, channels: 3, pixels: pixels)
    }

    func testCrop() throws {
        let bitmap = try marked(100, 50)
        let cropped = try ImageProcessors.Crop(x: 5, y: 5, width: 20, height: 10).process(bitmap)
        XCTAssertEqual([cropped.width, cropped.height], [20, 10])
        XCTAssertEqual(cropped.pixel(x: 0, y: 0), Self.red)
        XCTAssertEqual(cropped.pixel(x: 10, y: 0), Self.grey)
        assertThrowsKind(
            .invalidArgument,
            { () throws(VipsError) in
                try ImageProcessors.Crop(x: 90, y: 0, width: 20, height: 10).process(bitmap)
            }, "outside the image")
        assertThrowsKind(
            .invalidArgument,
            { () throws(VipsError) in try ImageProcessors.Crop(x: -1, y: 0, width: 2, height: 2).validate() })
        assertThrowsKind(
            .invalidArgument,
            { () throws(VipsError) in try ImageProcessors.Crop(x: 0, y: 0, width: 0, height: 2).validate() })
        assertThrowsKind(
            .invalidArgument,
            { () throws(VipsError) in
                try ImageProcessors.Crop(x: Int.max, y: 0, width: Int.max, height: 1).process(bitmap)
            }, "no overflow")
    }

    func testRoundedCornersAndCircleGainAlpha() throws {
        let bitmap = try marked(80, 60, marker: 0)
        let rounded = try ImageProcessors.RoundedCorners(radius: 20).process(bitmap)
        XCTAssertEqual([rounded.width, rounded.height, rounded.channels], [80, 60, 4])
        XCTAssertEqual(rounded.pixel(x: 0, y: 0)?[3], 0)
        XCTAssertEqual(rounded.pixel(x: 79, y: 59)?[3], 0)
        XCTAssertEqual(rounded.pixel(x: 40, y: 0), Self.grey + [255], "edge middle is inside")
        XCTAssertEqual(rounded.pixel(x: 40, y: 30), Self.grey + [255])
        let circle = try ImageProcessors.Circle().process(bitmap)
        XCTAssertEqual([circle.width, circle.height, circle.channels], [60, 60, 4])
        XCTAssertEqual(circle.pixel(x: 2, y: 2)?[3], 0)
        XCTAssertEqual(circle.pixel(x: 30, y: 1)?[3], 255)
        XCTAssertEqual(circle.pixel(x: 30, y: 30)?[3], 255)
        assertThrowsKind(
            .invalidArgument,
            { () throws(VipsError) in
                try ImageProcessors.RoundedCorners(radius: 31).process(bitmap)
            }, "radius larger than the image")
        for radius in [0, -1, Double.nan, .infinity] {
            assertThrowsKind(
                .invalidArgument,
                { () throws(VipsError) in try ImageProcessors.RoundedCorners(radius: radius).validate() })
        }
        // An RGBA input keeps its own transparency inside the shape.
        let half = try Bitmap(width: 40, height: 40, channels: 4, pixels: [UInt8](repeating: 100, count: 40 * 40 * 4))
        let roundedHalf = try ImageProcessors.RoundedCorners(radius: 10).process(half)
        XCTAssertEqual(roundedHalf.pixel(x: 20, y: 20)?[3], 100)
        XCTAssertEqual(roundedHalf.pixel(x: 0, y: 0)?[3], 0)
    }

    func testBlurSharpenGreyscale() throws {
        let bitmap = try marked(60, 60, marker: 30)
        let blurred = try ImageProcessors.GaussianBlur(sigma: 3).process(bitmap)
        XCTAssertEqual([blurred.width, blurred.height, blurred.channels], [60, 60, 3])
        let edge = try XCTUnwrap(blurred.pixel(x: 30, y: 10))
        XCTAssertTrue(edge[0] > 128 && edge[0] < 255 && edge[1] > 0 && edge[1] < 128, "the edge is blurred: \(edge)")
        for sigma in [0, -1, Double.nan, 1e9] {
            assertThrowsKind(
                .invalidArgument,
                { () throws(VipsError) in try ImageProcessors.GaussianBlur(sigma: sigma).process(bitmap) },
                "sigma \(sigma)")
        }
        let sharpened = try ImageProcessors.Sharpen().process(bitmap)
        XCTAssertEqual([sharpened.width, sharpened.height, sharpened.channels], [60, 60, 3])
        assertThrowsKind(.invalidArgument, { () throws(VipsError) in try ImageProcessors.Sharpen(sigma: 0).validate() })
        let grey = try ImageProcessors.Greyscale().process(bitmap)
        let pixel = try XCTUnwrap(grey.pixel(x: 5, y: 5))
        XCTAssertEqual(grey.channels, 3)
        XCTAssertTrue(pixel[0] == pixel[1] && pixel[1] == pixel[2] && pixel[0] < 200, "\(pixel)")
    }

    func testRotateAndFlipMoveTheMarker() throws {
        let bitmap = try marked(100, 50)
        let turned = try ImageProcessors.Rotate(.degrees90).process(bitmap)
        XCTAssertEqual([turned.width, turned.height], [50, 100])
        XCTAssertEqual(turned.pixel(x: 45, y: 5), Self.red, "top left turns to top right")
        let half = try ImageProcessors.Rotate(.degrees180).process(bitmap)
        XCTAssertEqual(half.pixel(x: 95, y: 45), Self.red)
        let back = try ImageProcessors.Rotate(.degrees270).process(bitmap)
        XCTAssertEqual(back.pixel(x: 5, y: 95), Self.red)
        XCTAssertEqual(try ImageProcessors.Flip(.horizontal).process(bitmap).pixel(x: 95, y: 5), Self.red)
        XCTAssertEqual(try ImageProcessors.Flip(.vertical).process(bitmap).pixel(x: 5, y: 45), Self.red)
    }

    func testOverlayAtGravityWithOpacity() throws {
        let base = try marked(100, 80, marker: 0)
        let mark = try Bitmap(width: 20, height: 10, channels: 3, pixels: [UInt8](repeating: 0, count: 20 * 10 * 3))
        let placed = try ImageProcessors.Overlay(mark, gravity: .southEast).process(base)
        XCTAssertEqual([placed.width, placed.height, placed.channels], [100, 80, 3])
        XCTAssertEqual(placed.pixel(x: 95, y: 75), [0, 0, 0])
        XCTAssertEqual(placed.pixel(x: 75, y: 65), Self.grey)
        let topLeft = try ImageProcessors.Overlay(mark, gravity: .northWest, opacity: 0.5).process(base)
        let blended = try XCTUnwrap(topLeft.pixel(x: 5, y: 5))
        XCTAssertTrue(blended.allSatisfy { (60...68).contains($0) }, "half of 128 over 0: \(blended)")
        XCTAssertEqual(topLeft.pixel(x: 50, y: 50), Self.grey)
        assertThrowsKind(
            .invalidArgument,
            { () throws(VipsError) in
                try ImageProcessors.Overlay(base, gravity: .centre).process(mark)
            }, "overlay larger than the base")
        for opacity in [-0.1, 1.5, Double.nan] {
            assertThrowsKind(
                .invalidArgument,
                { () throws(VipsError) in try ImageProcessors.Overlay(mark, opacity: opacity).validate() })
        }
        XCTAssertNotEqual(ImageProcessors.Overlay(mark).identifier, ImageProcessors.Overlay(base).identifier)
    }

    func testCompositionAppliesInOrder() throws {
        let bitmap = try marked(100, 50)
        let cropThenTurn = ImageProcessors.Composition([
            ImageProcessors.Crop(x: 0, y: 0, width: 40, height: 20),
            ImageProcessors.Rotate(.degrees90)
        ])
        let turnThenCrop = ImageProcessors.Composition([
            ImageProcessors.Rotate(.degrees90),
            ImageProcessors.Crop(x: 0, y: 0, width: 40, height: 20)
        ])
        let a = try cropThenTurn.process(bitmap)
        let b = try turnThenCrop.process(bitmap)
        XCTAssertEqual([a.width, a.height], [20, 40])
        XCTAssertEqual(a.pixel(x: 15, y: 5), Self.red)
        XCTAssertEqual([b.width, b.height], [40, 20])
        XCTAssertEqual(b.pixel(x: 5, y: 5), Self.grey, "the marker went to the right before the crop")
        XCTAssertEqual(cropThenTurn.identifier, "vipsload.crop(0,0,40x20)|vipsload.rotate(90)")
        XCTAssertNotEqual(cropThenTurn.identifier, turnThenCrop.identifier)
        let bad = ImageProcessors.Composition([
            ImageProcessors.Rotate(.degrees90), ImageProcessors.GaussianBlur(sigma: .nan)
        ])
        assertThrowsKind(.invalidArgument, { () throws(VipsError) in try bad.validate() })
    }

    func testProcessorsKeepTheSource() throws {
        let data = try ImageSynthesizer.data(width: 320, height: 240, format: .jpeg())
        let bitmap = try ImageDecoder().decode(.data(data), size: .fit(width: 100, height: 100), mode: .fit)
        let processed = try ImageProcessors.Composition([
            ImageProcessors.Circle(), ImageProcessors.GaussianBlur(sigma: 1)
        ])
        .process(bitmap)
        XCTAssertEqual(processed.source?.info.width, 320)
    }
}
