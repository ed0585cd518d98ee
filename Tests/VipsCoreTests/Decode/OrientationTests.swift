import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// EXIF orientation: decodes come out upright, probes report the upright size.
final class OrientationTests: XCTestCase {
    let decoder = ImageDecoder()

    enum Corner: CaseIterable { case topLeft, topRight, bottomLeft, bottomRight }

    /// Where the stored top-left corner is displayed, for each EXIF orientation.
    static let markerCorner: [Int: Corner] = [
        1: .topLeft, // as stored
        2: .topRight, // mirrored left-right
        3: .bottomRight, // rotated 180°
        4: .bottomLeft, // mirrored top-bottom
        5: .topLeft, // transposed (mirrored about the main diagonal)
        6: .topRight, // rotated 90° clockwise
        7: .bottomRight, // transversed
        8: .bottomLeft // rotated 90° anticlockwise
    ]

    /// Mean colour a few pixels in from `corner`, well inside the eighth-size marker.
    func colour(at corner: Corner, of bitmap: Bitmap) -> [Double] {
        let inset = max(2, min(bitmap.width, bitmap.height) / 40)
        let x = (corner == .topLeft || corner == .bottomLeft) ? inset : bitmap.width - 1 - inset
        let y = (corner == .topLeft || corner == .topRight) ? inset : bitmap.height - 1 - inset
        return bitmap.meanColour(aroundX: x, y: y, radius: 1)
    }

    func assertMarker(
        in bitmap: Bitmap, at expected: Corner, _ label: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        for corner in Corner.allCases {
            let distance = colourDistance(colour(at: corner, of: bitmap), ImageSynthesizer.markerColour)
            if corner == expected {
                XCTAssertLessThan(distance, 60, "\(label): marker expected \(corner)", file: file, line: line)
            } else {
                XCTAssertGreaterThan(distance, 120, "\(label): no marker expected \(corner)", file: file, line: line)
            }
        }
    }

    func testOrientation6And8RotateThumbnails() throws {
        for (orientation, corner) in [(6, Corner.topRight), (8, .bottomLeft)] {
            let data = try ImageSynthesizer.data(
                width: 400, height: 300, seed: 21, marker: true,
                format: .jpeg(orientation: orientation))
            let info = try decoder.info(.data(data))
            XCTAssertEqual(info.orientation, orientation)
            XCTAssertEqual(info.width, 300, "info reports the upright width")
            XCTAssertEqual(info.height, 400, "info reports the upright height")

            let thumbnail = try decoder.decode(.data(data), size: .maxPixelSize(256))
            XCTAssertEqual(thumbnail.width, 192, "orientation \(orientation)")
            XCTAssertEqual(thumbnail.height, 256, "orientation \(orientation)")
            assertMarker(in: thumbnail, at: corner, "thumbnail, orientation \(orientation)")

            let full = try decoder.decode(.data(data))
            XCTAssertEqual(full.width, 300)
            XCTAssertEqual(full.height, 400)
            assertMarker(in: full, at: corner, "original, orientation \(orientation)")

            // A box is interpreted upright: 300×100 fits the rotated 300×400 by height.
            let boxed = try decoder.decode(.data(data), size: .fit(width: 300, height: 100))
            XCTAssertEqual(boxed.width, 75)
            XCTAssertEqual(boxed.height, 100)
        }
    }

    func testEveryOrientationFromFile() throws {
        let folder = try TemporaryFolder()
        let upright = try ImageSynthesizer.data(width: 400, height: 300, seed: 22, marker: true, format: .jpeg())
        let reference = try decoder.decode(.data(upright), size: .maxPixelSize(200))
        assertMarker(in: reference, at: .topLeft, "the marker is where the synthesiser paints it")
        for orientation in 1...8 {
            let data = try ImageSynthesizer.data(
                width: 400, height: 300, seed: 22, marker: true,
                format: .jpeg(orientation: orientation))
            let path = try folder.write(data, named: "o\(orientation).jpg")
            let swapped = orientation >= 5
            let info = try decoder.info(.file(path))
            XCTAssertEqual(info.orientation, orientation)
            XCTAssertEqual(info.width, swapped ? 300 : 400, "orientation \(orientation)")
            XCTAssertEqual(info.height, swapped ? 400 : 300, "orientation \(orientation)")
            let bitmap = try decoder.decode(.file(path), size: .maxPixelSize(200))
            XCTAssertEqual(bitmap.width, swapped ? 150 : 200, "orientation \(orientation)")
            XCTAssertEqual(bitmap.height, swapped ? 200 : 150, "orientation \(orientation)")
            assertMarker(in: bitmap, at: Self.markerCorner[orientation]!, "orientation \(orientation)")
        }
    }

    func testRotatedLargeJPEGShrinksOnLoad() throws {
        // Shrink-on-load and rotation together: the 1/8 decode must still be turned upright.
        let data = try ImageSynthesizer.data(
            width: 2400, height: 1600, seed: 23, marker: true, format: .jpeg(orientation: 6))
        let bitmap = try decoder.decode(.data(data), size: .maxPixelSize(150))
        XCTAssertEqual(bitmap.width, 100)
        XCTAssertEqual(bitmap.height, 150)
        assertMarker(in: bitmap, at: .topRight, "large, orientation 6")
    }

    func testLimitsApplyToTheRotatedImage() throws {
        // 400×300 stored, 300×400 displayed: 120,000 pixels, 400 px on the long side.
        let data = try ImageSynthesizer.data(width: 400, height: 300, seed: 24, format: .jpeg(orientation: 6))
        let pixels = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 100_000)))
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try pixels.info(.data(data)) }
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try pixels.decode(.data(data), size: .maxPixelSize(50)) }
        let side = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxDimension: 350)))
        assertThrowsKind(.tooLarge) { () throws(VipsError) in try side.info(.data(data)) }
        let enough = ImageDecoder(
            options: DecodeOptions(limits: DecodeLimits(maxPixelCount: 120_000, maxDimension: 400)))
        XCTAssertEqual(try enough.info(.data(data)).height, 400)
    }
}
