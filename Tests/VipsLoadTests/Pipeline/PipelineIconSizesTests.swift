import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsLoad

/// An icon stores its own drawing at each size: a size it holds is decoded
/// from that entry, never made from a larger entry's cached bitmap.
final class PipelineIconSizesTests: XCTestCase {
    private func assertPixels(
        _ bitmap: Bitmap, _ expected: LegacyFormatWriter.Pixels, _ what: String, line: UInt = #line
    ) {
        XCTAssertEqual([bitmap.width, bitmap.height], [expected.width, expected.height], what, line: line)
        var largest = 0
        for y in 0..<min(bitmap.height, expected.height) {
            for x in 0..<min(bitmap.width, expected.width) {
                let got = bitmap.pixel(x: x, y: y) ?? []
                for (a, b) in zip(got, expected.pixel(x, y)) { largest = max(largest, abs(Int(a) - Int(b))) }
            }
        }
        XCTAssertEqual(largest, 0, "\(what): the largest channel difference from the stored entry", line: line)
    }

    func testAStoredSizeIsDecodedFromItsEntryEvenAfterALargerEntryWasCached() async throws {
        for cursor in [false, true] {
            let small = try LegacyFormatWriter.Pixels.generated(width: 16, height: 16, seed: 5, alpha: true)
            let large = try LegacyFormatWriter.Pixels.generated(width: 128, height: 128, seed: 9, alpha: true)
            let (data, expected) = try LegacyFormatWriter.ico([.init(small), .init(large)], cursor: cursor)
            let source = ImageSource.data(data, identifier: cursor ? "cursor" : "icon")
            let name = cursor ? "CUR" : "ICO"

            let fresh = ImagePipeline.testing()
            assertPixels(
                try await fresh.image(for: ImageRequest(source: source, size: .maxPixelSize(16))), expected[0],
                "\(name) 16 px from a fresh pipeline")

            let pipeline = ImagePipeline.testing()
            assertPixels(
                try await pipeline.image(for: ImageRequest(source: source, size: .maxPixelSize(128))), expected[1],
                "\(name) 128 px")
            let response = try await pipeline.response(for: ImageRequest(source: source, size: .maxPixelSize(16)))
            XCTAssertEqual(response.origin, .load, name)
            assertPixels(response.bitmap, expected[0], "\(name) 16 px after the 128 px entry was cached")
        }
    }
}
