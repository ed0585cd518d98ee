import Foundation
import VipsCore
import VipsSynthesis
import XCTest

/// VipsCore's own TGA decoder: every type, depth, origin and RLE, the TGA 2.0 footer, and the sniff.
final class TGADecoderTests: XCTestCase {
    private let decoder = ImageDecoder()

    func testEveryLayoutOriginAndRLE() throws {
        let source = try LegacyFormatWriter.Pixels.generated(width: 29, height: 17, alpha: true)
        let layouts: [LegacyFormatWriter.TGALayout] = [
            .trueColour(bits: 16), .trueColour(bits: 24), .trueColour(bits: 32), .grey(alpha: false),
            .grey(alpha: true),
            .colourMapped
        ]
        for layout in layouts {
            for rle in [false, true] {
                for (top, right) in [(false, false), (true, false), (false, true), (true, true)] {
                    let (data, expected) = LegacyFormatWriter.tga(
                        source, layout: layout, rle: rle, top: top, right: right)
                    let what = "\(layout) rle \(rle) top \(top) right \(right)"
                    XCTAssertEqual(ImageFormat.sniff(data), .tga, what)
                    RasterAssert.equal(try decoder.decode(.data(data)), expected, what)
                }
            }
        }
    }

    func testTheFooterCanSayThereIsNoAlpha() throws {
        let source = try LegacyFormatWriter.Pixels.generated(width: 8, height: 8, alpha: true)
        let (data, expected) = LegacyFormatWriter.tga(source, layout: .trueColour(bits: 32), footerSaysNoAlpha: true)
        XCTAssertFalse(try decoder.info(.data(data)).hasAlpha)
        RasterAssert.equal(try decoder.decode(.data(data)), expected, "alpha ignored")
    }

    /// TGA has no magic number: random bytes and the other formats' headers are not TGA.
    func testSniffIsStrict() {
        var generator = SystemRandomNumberGenerator()
        var taken = 0
        for _ in 0..<20_000 {
            let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if ImageFormat.sniff(bytes) == .tga { taken += 1 }
        }
        XCTAssertEqual(taken, 0, "random 32-byte prefixes taken for TGA")
        XCTAssertNil(ImageFormat.sniff(Data(count: 32)), "zeros are no TGA")
    }

    func testTruncatedAndOversizedInputs() throws {
        let source = try LegacyFormatWriter.Pixels.generated(width: 40, height: 30)
        for rle in [false, true] {
            let (data, _) = LegacyFormatWriter.tga(source, layout: .trueColour(bits: 24), rle: rle)
            let short = Data(data.prefix(18 + 40 * 3 * 10))
            let bitmap = try decoder.decode(.data(short))
            XCTAssertEqual(bitmap.pixel(x: 0, y: 0), [0, 0, 0], "bottom-up: the missing top rows are black")
            let strict = ImageDecoder(options: DecodeOptions(strict: true))
            assertThrowsKind(.truncatedData) { () throws(VipsError) in try strict.decode(.data(short)) }
        }
        // 65535 × 65535 declared in an 18-byte header: refused before any allocation.
        var (huge, _) = LegacyFormatWriter.tga(source, layout: .trueColour(bits: 24))
        huge.replaceSubrange(12..<16, with: [0xFF, 0xFF, 0xFF, 0xFF])
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try decoder.decode(.data(Data(huge.prefix(40)))) }
    }
}
