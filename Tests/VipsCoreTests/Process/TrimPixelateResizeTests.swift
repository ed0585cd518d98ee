import Foundation
import VipsCore
import XCTest

/// `ImageProcessors.Trim`, `Pixelate` and `Resize`, and `DecodePlan.apply(to:)`, on bitmaps built
/// pixel by pixel so every expected box and value follows by construction.
final class TrimPixelateResizeTests: XCTestCase {
    private func bitmap(
        _ width: Int, _ height: Int, channels: Int = 3, _ colour: (Int, Int) -> [UInt8]
    ) throws
        -> Bitmap
    {
        var pixels: [UInt8] = []
        for y in 0..<height { for x in 0..<width { pixels += colour(x, y) } }
        return try Bitmap(width: width, height: height, channels: channels, pixels: pixels)
    }

    /// 60×40 white with a black 20×10 block at (10, 5): 10 pixels of margin left, 30 right, 5 above,
    /// 25 below; equal sides cut 10 from each side across and 5 from each down.
    private func block() throws -> Bitmap {
        try bitmap(60, 40) { x, y in (10..<30).contains(x) && (5..<15).contains(y) ? [0, 0, 0] : [255, 255, 255] }
    }

    func testTrimFindsTheBoxAndEqualisesOppositeSides() throws {
        let source = try block()
        XCTAssertEqual(try ImageProcessors.Trim(threshold: 10).process(source).size, [20, 10], "the corner's white")
        XCTAssertEqual(
            try ImageProcessors.Trim(threshold: 10, equalHorizontal: true).process(source).size, [40, 10],
            "10 cut from the left and from the right")
        XCTAssertEqual(
            try ImageProcessors.Trim(threshold: 10, equalHorizontal: true, equalVertical: true).process(source).size,
            [40, 30])
        // A background that is not the border's: nothing differs by less, so nothing is cut.
        XCTAssertEqual(
            try ImageProcessors.Trim(threshold: 10, background: Colour(red: 255, green: 0, blue: 0)).process(source)
                .size, [60, 40])
        // All background: left as it is.
        let white = try bitmap(8, 8) { _, _ in [255, 255, 255] }
        XCTAssertEqual(try ImageProcessors.Trim(threshold: 10).process(white).size, [8, 8])
        XCTAssertThrowsError(try ImageProcessors.Trim(threshold: -1).validate())
    }

    func testTrimCountsTransparencyAsMagenta() throws {
        // Transparent rows 0–9 of 30, then opaque green.
        let source = try bitmap(20, 30, channels: 4) { _, y in y < 10 ? [0, 0, 0, 0] : [0, 255, 0, 255] }
        let trimmed = try ImageProcessors.Trim(threshold: 1, background: Colour(red: 255, green: 0, blue: 255))
            .process(source)
        XCTAssertEqual(trimmed.size, [20, 20])
        XCTAssertEqual(try ImageProcessors.Trim(threshold: 1).process(source).size, [20, 20], "the corner's magenta")
    }

    func testPixelateAveragesWholeBlocks() throws {
        let source = try bitmap(4, 2) { x, _ in [UInt8(x * 40), 0, 0] }
        let result = try ImageProcessors.Pixelate(size: 2).process(source)
        XCTAssertEqual(result.size, [4, 2])
        XCTAssertEqual((0..<4).map { result.pixel(x: $0, y: 1)?[0] }, [20, 20, 100, 100])
        XCTAssertEqual(try ImageProcessors.Pixelate(size: 1).process(source).pixel(x: 1, y: 0)?[0], 40, "none")
    }

    func testResizeGivesTheExactSizeWithAndWithoutAlpha() throws {
        for channels in [3, 4] {
            let source = try bitmap(37, 23, channels: channels) { x, y in
                [UInt8(x * 6), UInt8(y * 10), 128] + (channels == 4 ? [255] : [])
            }
            for (width, height) in [(10, 23), (74, 5), (1, 1), (36, 24)] {
                let resized = try ImageProcessors.Resize(width: width, height: height).process(source)
                XCTAssertEqual(resized.size, [width, height], "\(channels) channels")
                XCTAssertEqual(resized.channels, channels)
            }
        }
        XCTAssertThrowsError(try ImageProcessors.Resize(width: 0, height: 3).validate())
    }

    func testAPlanAppliedToPixels() throws {
        let source = try block()
        let plan = DecodePlan(crop: .rect(x: 10, y: 5, width: 20, height: 10), width: 40, height: 20)
        let result = try plan.apply(to: source)
        XCTAssertEqual(result.size, [40, 20])
        XCTAssertEqual(result.pixel(x: 20, y: 10)?.prefix(3).map { $0 }, [0, 0, 0], "the black block, doubled")
        let cropped = try DecodePlan(width: 30, height: 20, resultCrop: .rect(x: 0, y: 0, width: 15, height: 20))
            .apply(to: source)
        XCTAssertEqual(cropped.size, [15, 20])
        XCTAssertThrowsError(
            try DecodePlan(crop: .rect(x: 50, y: 0, width: 20, height: 10), width: 10, height: 10).apply(to: source))
    }
}

extension Bitmap {
    fileprivate var size: [Int] { [width, height] }
}
