import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// Resize modes and one-sided targets on real generated images.
final class GeometryTests: XCTestCase {
    private let decoder = ImageDecoder()

    /// A PNG made from exact pixels: `paint` gives each pixel's RGB.
    static func png(width: Int, height: Int, _ paint: (Int, Int) -> [UInt8]) throws -> Data {
        var pixels: [UInt8] = []
        pixels.reserveCapacity(width * height * 3)
        for y in 0..<height { for x in 0..<width { pixels += paint(x, y) } }
        let bitmap = try Bitmap(width: width, height: height, channels: 3, pixels: pixels)
        return try ImageEncoder().encode(bitmap, as: .png(compression: 1)).data
    }

    private static let grey: [UInt8] = [128, 128, 128]
    private static let red: [UInt8] = [255, 0, 0]
    private static let blue: [UInt8] = [0, 0, 255]

    func testExactOutputSizeForEveryMode() throws {
        let data = try ImageSynthesizer.data(width: 640, height: 480, format: .jpeg())
        func size(_ target: TargetSize, _ mode: ResizeMode, upscale: Bool = false, scale: Double = 1) throws -> [Int] {
            let bitmap = try decoder.decode(.data(data), size: target, mode: mode, scale: scale, allowUpscale: upscale)
            return [bitmap.width, bitmap.height]
        }
        XCTAssertEqual(try size(.fit(width: 256, height: 256), .fit), [256, 192])
        XCTAssertEqual(try size(.fit(width: 256, height: 256), .fill()), [256, 256])
        XCTAssertEqual(try size(.fit(width: 300, height: 100), .fill(.attention)), [300, 100])
        XCTAssertEqual(try size(.fit(width: 100, height: 300), .fill(.entropy)), [100, 300])
        XCTAssertEqual(try size(.fit(width: 256, height: 256), .contain()), [256, 256])
        XCTAssertEqual(try size(.fit(width: 256, height: 100), .stretch), [256, 100])
        XCTAssertEqual(try size(.maxPixelSize(128), .fill(), scale: 2), [256, 256], "points × scale = pixels")
        XCTAssertEqual(try size(.width(100), .fit), [100, 75])
        XCTAssertEqual(try size(.height(60), .fit), [80, 60])
        XCTAssertEqual(try size(.width(50), .fit, scale: 2), [100, 75])
        // Upscaling stays opt-in: without it no side exceeds the image's.
        XCTAssertEqual(try size(.fit(width: 1000, height: 100), .fill()), [640, 100])
        XCTAssertEqual(try size(.fit(width: 1000, height: 100), .fill(), upscale: true), [1000, 100])
        XCTAssertEqual(try size(.fit(width: 1000, height: 1000), .stretch), [640, 480])
        XCTAssertEqual(try size(.fit(width: 1000, height: 900), .stretch, upscale: true), [1000, 900])
        XCTAssertEqual(
            try size(.fit(width: 1000, height: 1000), .contain()), [1000, 1000], "contain pads, never enlarges")
        XCTAssertEqual(try size(.width(1000), .fit), [640, 480])
        XCTAssertEqual(try size(.width(1280), .fit, upscale: true), [1280, 960])
    }

    func testSourceInfoIsRecorded() throws {
        let data = try ImageSynthesizer.data(width: 640, height: 480, format: .jpeg(orientation: 6))
        let bitmap = try decoder.decode(.data(data), size: .fit(width: 64, height: 64), mode: .fill())
        let source = try XCTUnwrap(bitmap.source)
        XCTAssertEqual([source.info.width, source.info.height], [480, 640])
        XCTAssertEqual(source.info.format, .jpeg)
        XCTAssertEqual(source.info.orientation, 6)
        XCTAssertEqual(source.info.pages, 1)
        XCTAssertFalse(source.decodedLeniently)
        XCTAssertNotNil(bitmap.withScale(2).source, "retagging keeps the source")
    }

    func testDamagedDataIsReportedAsLenient() throws {
        let data = try ImageSynthesizer.data(width: 640, height: 480, format: .jpeg())
        let cut = data.prefix(data.count * 2 / 3)
        let bitmap = try decoder.decode(.data(Data(cut)), size: .fit(width: 64, height: 64), mode: .fit)
        XCTAssertEqual(bitmap.source?.decodedLeniently, true)
        // Intact files of every output format decode without being marked.
        let photo = try ImageSynthesizer.bitmap(width: 64, height: 48)
        for format in [OutputFormat.avif(), .webp(), .png(), .gif, .jpeg()] {
            let intact = try ImageEncoder().encode(photo, as: format).data
            XCTAssertEqual(
                try decoder.decode(.data(intact), size: .maxPixelSize(32), mode: .fit).source?.decodedLeniently, false,
                "\(format)")
        }
        let strict = ImageDecoder(options: DecodeOptions(strict: true))
        XCTAssertThrowsError(try strict.decode(.data(Data(cut)), size: .fit(width: 64, height: 64), mode: .fit))
    }

    func testFillCoversThroughTheSameShrinkOnLoadAsTheCoveringSide() throws {
        // 4000×3000 filled into 256×256 covers with height 256: the loader's
        // factor is 3000/256 ≈ 11.7, so the JPEG is decoded at 1/8, as fit does.
        let info = ImageInfo(
            width: 4000, height: 3000, format: .jpeg, bands: 3, hasAlpha: false, orientation: 1, pages: 1)
        XCTAssertEqual(ImageDecoder.coveringSide(info, box: (256, 256)), .height(256))
        XCTAssertEqual(ImageDecoder.coveringSide(info, box: (400, 100)), .width(400))
        let data = try ImageSynthesizer.data(width: 1600, height: 1200, format: .jpeg())
        let filled = try decoder.decode(.data(data), size: .fit(width: 256, height: 256), mode: .fill())
        let covering = try decoder.decode(.data(data), size: .height(256))
        XCTAssertEqual([covering.width, covering.height], [341, 256])
        let cropped = try ImageDecoder.crop(covering, to: (256, 256), gravity: .centre, label: "test")
        XCTAssertEqual(filled.meanAbsoluteDifference(to: cropped), 0, "fill is the covering decode, cropped")
    }

    func testGravityPutsTheMarkerWhereItBelongs() throws {
        // Wide: 400×200, red block top left, blue block bottom right.
        let wide = try Self.png(width: 400, height: 200) { x, y in
            if x < 40, y < 40 { return Self.red }
            if x >= 360, y >= 160 { return Self.blue }
            return Self.grey
        }
        func fill(_ data: Data, _ gravity: Gravity, _ box: (Int, Int)) throws -> Bitmap {
            try decoder.decode(.data(data), size: .fit(width: box.0, height: box.1), mode: .fill(gravity))
        }
        for gravity in [Gravity.west, .northWest, .southWest] {
            let bitmap = try fill(wide, gravity, (100, 200))
            XCTAssertEqual(bitmap.pixel(x: 5, y: 5), Self.red, "\(gravity)")
            XCTAssertEqual(bitmap.pixel(x: 95, y: 195), Self.grey, "\(gravity)")
        }
        for gravity in [Gravity.east, .northEast, .southEast] {
            let bitmap = try fill(wide, gravity, (100, 200))
            XCTAssertEqual(bitmap.pixel(x: 5, y: 5), Self.grey, "\(gravity)")
            XCTAssertEqual(bitmap.pixel(x: 95, y: 195), Self.blue, "\(gravity)")
        }
        let centred = try fill(wide, .centre, (100, 200))
        XCTAssertEqual(centred.pixel(x: 5, y: 5), Self.grey)
        XCTAssertEqual(centred.pixel(x: 95, y: 195), Self.grey)
        // Tall: 200×400, red block top left, blue block bottom right.
        let tall = try Self.png(width: 200, height: 400) { x, y in
            if x < 40, y < 40 { return Self.red }
            if x >= 160, y >= 360 { return Self.blue }
            return Self.grey
        }
        XCTAssertEqual(try fill(tall, .north, (200, 100)).pixel(x: 5, y: 5), Self.red)
        XCTAssertEqual(try fill(tall, .south, (200, 100)).pixel(x: 195, y: 95), Self.blue)
        XCTAssertEqual(try fill(tall, .south, (200, 100)).pixel(x: 5, y: 5), Self.grey)
    }

    func testAttentionKeepsAnOffCentreSubject() throws {
        // A flat grey field with a saturated, high-contrast patch near the right edge.
        let data = try Self.png(width: 600, height: 200) { x, y in
            guard (470..<570).contains(x), (50..<150).contains(y) else { return Self.grey }
            return (x / 10 + y / 10) % 2 == 0 ? [255, 40, 40] : [20, 200, 20]
        }
        for gravity in [Gravity.attention, .entropy] {
            let bitmap = try decoder.decode(.data(data), size: .fit(width: 200, height: 200), mode: .fill(gravity))
            XCTAssertEqual([bitmap.width, bitmap.height], [200, 200])
            var saturated = 0
            for y in stride(from: 0, to: 200, by: 4) {
                for x in stride(from: 0, to: 200, by: 4) {
                    if let pixel = bitmap.pixel(x: x, y: y), pixel != Self.grey { saturated += 1 }
                }
            }
            XCTAssertGreaterThan(saturated, 400, "\(gravity) keeps the subject (a centre crop would have none)")
        }
    }

    func testContainPadsWithTheBackground() throws {
        let data = try Self.png(width: 400, height: 200) { _, _ in Self.red }
        let blue = Colour(red: 0, green: 0, blue: 255)
        let padded = try decoder.decode(
            .data(data), size: .fit(width: 100, height: 100), mode: .contain(background: blue))
        XCTAssertEqual([padded.width, padded.height, padded.channels], [100, 100, 3])
        XCTAssertEqual(padded.pixel(x: 50, y: 5), Self.blue)
        XCTAssertEqual(padded.pixel(x: 50, y: 50), Self.red)
        XCTAssertEqual(padded.pixel(x: 50, y: 95), Self.blue)
        let top = try decoder.decode(
            .data(data), size: .fit(width: 100, height: 100),
            mode: .contain(background: blue, gravity: .north))
        XCTAssertEqual(top.pixel(x: 50, y: 5), Self.red)
        XCTAssertEqual(top.pixel(x: 50, y: 95), Self.blue)
        let clear = try decoder.decode(
            .data(data), size: .fit(width: 100, height: 100), mode: .contain(background: .transparent))
        XCTAssertEqual(clear.channels, 4)
        XCTAssertEqual(clear.pixel(x: 50, y: 5)?[3], 0)
        XCTAssertEqual(clear.pixel(x: 50, y: 50), [255, 0, 0, 255])
    }

    func testBadGeometryIsAnInvalidArgument() throws {
        let data = try ImageSynthesizer.data(width: 64, height: 48, format: .png())
        for size in [TargetSize.width(0), .height(-3), .fit(width: 0, height: 10), .maxPixelSize(-1)] {
            assertThrowsKind(
                .invalidArgument,
                { () throws(VipsError) in
                    try decoder.decode(.data(data), size: size, mode: .fill())
                }, "\(size)")
        }
        assertThrowsKind(
            .invalidArgument,
            { () throws(VipsError) in
                try decoder.decode(.data(data), size: .width(10), mode: .fill())
            }, "fill needs a box")
        assertThrowsKind(
            .invalidArgument,
            { () throws(VipsError) in
                try decoder.decode(.data(data), size: .fit(width: 10, height: 10), mode: .contain(gravity: .attention))
            })
        assertThrowsKind(
            .invalidArgument,
            { () throws(VipsError) in
                try decoder.decode(.data(data), size: .fit(width: 10, height: 10), mode: .fill(), scale: .nan)
            })
    }

    func testColourParsing() throws {
        XCTAssertEqual(try Colour(parsing: "#ff000080"), Colour(red: 255, green: 0, blue: 0, alpha: 128))
        XCTAssertEqual(try Colour(parsing: "0f0"), Colour(red: 0, green: 255, blue: 0))
        XCTAssertEqual(try Colour(parsing: "10, 20, 30"), Colour(red: 10, green: 20, blue: 30))
        XCTAssertEqual(try Colour(parsing: "transparent"), .transparent)
        for bad in ["", "#12345", "300,0,0", "purple-ish", "1,2"] {
            XCTAssertThrowsError(try Colour(parsing: bad), bad)
        }
        XCTAssertEqual(Gravity(name: "north-east"), .northEast)
        XCTAssertEqual(Gravity(name: "center"), .centre)
        XCTAssertNil(Gravity(name: "up"))
    }
}
