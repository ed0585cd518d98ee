import Foundation
import VipsCore
import VipsSynthesis
import XCTest

/// VipsCore's own ICO and CUR decoder: entry selection by size, PNG and BMP entries, the AND mask.
final class ICODecoderTests: XCTestCase {
    private let decoder = ImageDecoder()

    private func icon(_ side: Int, seed: Int) throws -> LegacyFormatWriter.Pixels {
        try LegacyFormatWriter.Pixels.generated(width: side, height: side, seed: seed, alpha: true)
    }

    /// A favicon with 16, 32 (PNG) and 48 px entries: each box gets the smallest entry at least as
    /// large as it, else the largest; the original size is the largest.
    func testTheEntryThatFitsTheBoxIsDecoded() throws {
        let (data, expected) = try LegacyFormatWriter.ico([
            .init(try icon(16, seed: 1), layout: .palette(bits: 8)), .init(try icon(32, seed: 2), png: true),
            .init(try icon(48, seed: 3), layout: .thirtyTwo(alpha: true))
        ])
        XCTAssertEqual(ImageFormat.sniff(data), .ico)
        let info = try decoder.info(.data(data))
        XCTAssertEqual([info.width, info.height, info.bands], [48, 48, 4])
        XCTAssertEqual(info.format, .ico)
        RasterAssert.equal(try decoder.decode(.data(data)), expected[2], "original: the 48 px entry")
        RasterAssert.equal(try decoder.decode(.data(data), size: .maxPixelSize(16)), expected[0], "16: the 16 px entry")
        RasterAssert.equal(try decoder.decode(.data(data), size: .maxPixelSize(32)), expected[1], "32: the PNG entry")
        // Larger than every entry: the largest.
        XCTAssertEqual(try decoder.decode(.data(data), size: .maxPixelSize(256)).width, 48)
    }

    /// Between sizes: the next larger entry, shrunk (not the smaller one enlarged, nor the largest).
    func testABoxBetweenSizesTakesTheNextLargerEntry() throws {
        func solid(_ side: Int, _ colour: [UInt8]) -> LegacyFormatWriter.Pixels {
            LegacyFormatWriter.Pixels(
                width: side, height: side, rgba: Array([[UInt8]](repeating: colour, count: side * side).joined()))
        }
        let (data, _) = try LegacyFormatWriter.ico([
            .init(solid(16, [255, 0, 0, 255]), layout: .twentyFour), .init(solid(32, [0, 255, 0, 255]), png: true),
            .init(solid(48, [0, 0, 255, 255]), layout: .twentyFour)
        ])
        let twenty = try decoder.decode(.data(data), size: .maxPixelSize(20))
        XCTAssertEqual([twenty.width, twenty.height], [20, 20])
        XCTAssertEqual(twenty.pixel(x: 10, y: 10).map { Array($0.prefix(3)) }, [0, 255, 0], "the 32 px entry")
        XCTAssertEqual(
            try decoder.decode(.data(data), size: .fit(width: 400, height: 40)).pixel(x: 5, y: 5)?.prefix(3).map { $0 },
            [0, 0, 255])
    }

    /// Entries that disagree in shape (a broken or hostile file): one wider or taller than the largest
    /// is left out, so no box gets an image outside the size `info` reports (fuzzer-found: a 16×16
    /// entry beside a 3328×7 one gave 9×9 for a 16×9 box).
    func testAnEntryOutsideTheLargestIsLeftOut() throws {
        let (data, expected) = try LegacyFormatWriter.ico([
            .init(try LegacyFormatWriter.Pixels.generated(width: 40, height: 4, seed: 7, alpha: true), png: true),
            .init(try icon(12, seed: 8), layout: .thirtyTwo(alpha: true))
        ])
        let info = try decoder.info(.data(data))
        XCTAssertEqual([info.width, info.height], [40, 4], "the largest entry by area")
        for size in [TargetSize.original, .maxPixelSize(12), .fit(width: 16, height: 9), .maxPixelSize(64)] {
            let bitmap = try decoder.decode(.data(data), size: size)
            XCTAssertLessThanOrEqual(bitmap.width, 40, "\(size)")
            XCTAssertLessThanOrEqual(bitmap.height, 4, "\(size): never the 12×12 entry")
        }
        RasterAssert.equal(try decoder.decode(.data(data)), expected[0], "original: the 40×4 entry")
    }

    func testAnEntryOfAnotherShapeIsNeverPickedForABox() throws {
        let (data, expected) = try LegacyFormatWriter.ico([
            .init(try icon(32, seed: 9), layout: .thirtyTwo(alpha: true)),
            .init(try LegacyFormatWriter.Pixels.generated(width: 24, height: 8, seed: 10, alpha: true), png: true),
            .init(try icon(16, seed: 11), layout: .thirtyTwo(alpha: true))
        ])
        // A 12 px box: the 24×8 entry is the smallest covering it, but it is another picture.
        RasterAssert.equal(try decoder.decode(.data(data), size: .maxPixelSize(16)), expected[2], "the 16×16 entry")
        let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(12), mode: .fill(.centre))
        XCTAssertEqual([bitmap.width, bitmap.height], [12, 12], "from the 16×16 entry, not the 24×8")
    }

    func testTiesGoToTheDeeperEntry() throws {
        let (data, expected) = try LegacyFormatWriter.ico([
            .init(try icon(24, seed: 4), layout: .palette(bits: 4)),
            .init(try icon(24, seed: 5), layout: .thirtyTwo(alpha: true)),
            .init(try icon(24, seed: 6), layout: .palette(bits: 1))
        ])
        RasterAssert.equal(try decoder.decode(.data(data), size: .maxPixelSize(24)), expected[1], "the 32-bit entry")
    }

    /// Entries below 32 bits carry transparency in their AND mask only.
    func testTheANDMaskIsAppliedAsAlpha() throws {
        let source = try icon(19, seed: 7)
        for layout in [LegacyFormatWriter.BMPLayout.palette(bits: 1), .palette(bits: 4), .palette(bits: 8), .twentyFour]
        {
            for cursor in [false, true] {
                let (data, expected) = try LegacyFormatWriter.ico([.init(source, layout: layout)], cursor: cursor)
                XCTAssertEqual(ImageFormat.sniff(data), cursor ? .cur : .ico)
                let bitmap = try decoder.decode(.data(data))
                RasterAssert.equal(bitmap, expected[0], "\(layout) cursor \(cursor)")
                let transparent = (0..<(19 * 19)).filter { expected[0].rgba[$0 * 4 + 3] == 0 }.count
                XCTAssertGreaterThan(transparent, 0, "the generated icon has transparent pixels")
            }
        }
    }

    func testBrokenDirectoriesAreTypedErrors() throws {
        let (data, _) = try LegacyFormatWriter.ico([.init(try icon(16, seed: 8), layout: .twentyFour)])
        // The directory points past the end: no entry can be read.
        var outside = data
        outside.replaceSubrange(18..<22, with: [0xFF, 0xFF, 0x00, 0x00])
        assertThrowsKind(.corruptData) { () throws(VipsError) in try decoder.info(.data(outside)) }
        // The entry's DIB cut short: lenient decodes what is there, strict fails.
        let short = Data(data.prefix(data.count - 300))
        XCTAssertNoThrow(try decoder.decode(.data(short)))
        let strict = ImageDecoder(options: DecodeOptions(strict: true))
        assertThrowsKind(.truncatedData) { () throws(VipsError) in try strict.decode(.data(short)) }
        // An entry declaring a huge PNG is refused from its IHDR, before any allocation.
        var huge = try LegacyFormatWriter.ico([.init(try icon(16, seed: 9), png: true)]).data
        huge.replaceSubrange((22 + 16)..<(22 + 24), with: [0, 1, 0, 0, 0, 1, 0, 0]) // 65536 × 65536
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try decoder.decode(.data(huge)) }
    }
}
