import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// VipsCore's own BMP decoder, on BMPs written from generated pixels by `LegacyFormatWriter`.
final class BMPDecoderTests: XCTestCase {
    private let decoder = ImageDecoder()

    private func pixels(alpha: Bool = false) throws -> LegacyFormatWriter.Pixels {
        // Odd sides: rows need padding at every depth.
        try LegacyFormatWriter.Pixels.generated(width: 37, height: 23, alpha: alpha)
    }

    func testEveryLayoutDecodesToItsPixels() throws {
        let source = try pixels(alpha: true)
        let layouts: [LegacyFormatWriter.BMPLayout] = [
            .palette(bits: 1), .palette(bits: 2), .palette(bits: 4), .palette(bits: 8), .rle(bits: 8), .rle(bits: 4),
            .sixteen(rgb565: false), .sixteen(rgb565: true), .twentyFour, .thirtyTwo(alpha: false),
            .thirtyTwo(alpha: true)
        ]
        for layout in layouts {
            let (data, expected) = LegacyFormatWriter.bmp(source, layout: layout)
            let bitmap = try decoder.decode(.data(data))
            RasterAssert.equal(bitmap, expected, "\(layout)")
            let info = try decoder.info(.data(data))
            XCTAssertEqual(info.format, .bmp)
            XCTAssertEqual(info.hasAlpha, layout == .thirtyTwo(alpha: true), "\(layout)")
            XCTAssertEqual(bitmap.channels, info.bands, "\(layout)")
        }
    }

    func testEveryHeaderAndBothRowOrders() throws {
        let source = try pixels()
        let cases: [(LegacyFormatWriter.BMPHeaderKind, LegacyFormatWriter.BMPLayout)] = [
            (.core, .palette(bits: 8)), (.core, .twentyFour), (.os2, .palette(bits: 4)), (.info, .twentyFour),
            (.v4, .sixteen(rgb565: true)), (.v5, .thirtyTwo(alpha: true))
        ]
        for (header, layout) in cases {
            for topDown in header == .core ? [false] : [false, true] {
                let (data, expected) = LegacyFormatWriter.bmp(source, layout: layout, header: header, topDown: topDown)
                RasterAssert.equal(try decoder.decode(.data(data)), expected, "\(header) \(layout) top-down \(topDown)")
            }
        }
    }

    func testThumbnailFitsTheBoxAsLibvipsFitsAnyImage() throws {
        let (data, _) = LegacyFormatWriter.bmp(
            try LegacyFormatWriter.Pixels.generated(width: 300, height: 200), layout: .twentyFour)
        let thumb = try decoder.decode(.data(data), size: .maxPixelSize(64))
        XCTAssertEqual([thumb.width, thumb.height], [64, 43])
        XCTAssertEqual(thumb.source?.info.width, 300)
        // Quality mode and upscaling have no libvips loader to fall back on: still decoded here.
        let quality = ImageDecoder(options: DecodeOptions(shrinkOnLoad: .quality))
        XCTAssertEqual(try quality.decode(.data(data), size: .maxPixelSize(50)).width, 50)
        let upscaled = try decoder.decode(.data(data), size: .maxPixelSize(600), allowUpscale: true)
        XCTAssertEqual([upscaled.width, upscaled.height], [600, 400])
        XCTAssertEqual(try decoder.route(.data(data), size: .maxPixelSize(64)), .direct)
    }

    func testTruncatedPixelsAreBlackWhenLenientAndAnErrorWhenStrict() throws {
        let source = try pixels()
        let (data, expected) = LegacyFormatWriter.bmp(source, layout: .twentyFour)
        // Cut in the middle of the stored rows (bottom-up: the top rows are missing).
        let cut = data.prefix(data.count - 10 * ((37 * 3 + 3) / 4 * 4) - 5)
        let bitmap = try decoder.decode(.data(Data(cut)))
        XCTAssertEqual(bitmap.pixel(x: 0, y: 0), [0, 0, 0], "a missing row is black")
        XCTAssertEqual(bitmap.pixel(x: 5, y: 22), Array(expected.pixel(5, 22).prefix(3)), "a stored row is kept")
        let strict = ImageDecoder(options: DecodeOptions(strict: true))
        assertThrowsKind(.truncatedData) { () throws(VipsError) in try strict.decode(.data(Data(cut))) }
        for kind in [LegacyFormatWriter.BMPLayout.rle(bits: 8), .rle(bits: 4)] {
            let (rle, _) = LegacyFormatWriter.bmp(source, layout: kind)
            let short = Data(rle.prefix(rle.count - 40))
            XCTAssertNoThrow(try decoder.decode(.data(short)), "\(kind)")
            assertThrowsKind(.truncatedData) { () throws(VipsError) in try strict.decode(.data(short)) }
        }
    }

    func testHeaderCutShortOrNonsenseIsATypedError() throws {
        let (data, _) = LegacyFormatWriter.bmp(try pixels(), layout: .twentyFour)
        assertThrowsKind(.truncatedData) { () throws(VipsError) in try decoder.info(.data(Data(data.prefix(20)))) }
        var zeroWidth = data
        zeroWidth.replaceSubrange(18..<22, with: [0, 0, 0, 0])
        assertThrowsKind(.corruptData) { () throws(VipsError) in try decoder.info(.data(zeroWidth)) }
        var depth = data
        depth.replaceSubrange(28..<30, with: [7, 0])
        assertThrowsKind(.unsupportedFeature) { () throws(VipsError) in try decoder.decode(.data(depth)) }
        var jpeg = data
        jpeg.replaceSubrange(30..<34, with: [4, 0, 0, 0])
        assertThrowsKind(.unsupportedFeature) { () throws(VipsError) in try decoder.decode(.data(jpeg)) }
    }

    /// A header declaring a huge image is refused from the header: nothing is allocated (the
    /// file is 60 bytes; a decode would need 64 GB).
    func testPixelLimitIsCheckedFromTheHeader() throws {
        var (data, _) = LegacyFormatWriter.bmp(try pixels(), layout: .twentyFour)
        data.replaceSubrange(18..<26, with: [0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x02, 0x00]) // 131072 × 131072
        let error = assertThrowsKind(.tooLarge) { () throws(VipsError) in
            try decoder.decode(.data(Data(data.prefix(60))))
        }
        XCTAssertTrue(error?.message.contains("exceeds the limit") == true, "\(String(describing: error))")
        let small = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 100)))
        let (fine, _) = LegacyFormatWriter.bmp(try pixels(), layout: .twentyFour)
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try small.info(.data(fine)) }
    }

    func testBareDIBIsSniffedAsBMP() throws {
        let (data, expected) = LegacyFormatWriter.bmp(try pixels(), layout: .palette(bits: 8))
        // A clipboard DIB: the BMP without its 14-byte file header (pixels right after the palette).
        let dib = Data(data.dropFirst(14))
        XCTAssertEqual(ImageFormat.sniff(dib), .bmp)
        RasterAssert.equal(try decoder.decode(.data(dib)), expected, "bare DIB")
    }

    func testCancellationStopsBetweenRows() throws {
        let (data, _) = LegacyFormatWriter.bmp(
            try LegacyFormatWriter.Pixels.generated(width: 64, height: 300), layout: .twentyFour)
        let cancellation = DecodeCancellation()
        cancellation.cancel()
        assertThrowsKind(.cancelled) { () throws(VipsError) in
            try cancellation.run { () throws(VipsError) in try decoder.decode(.data(data)) }
        }
    }
}
