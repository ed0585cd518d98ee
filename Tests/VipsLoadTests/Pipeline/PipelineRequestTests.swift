import Foundation
import XCTest

@testable import VipsLoad

/// What goes into a request's cache key, and what does not.
final class PipelineRequestTests: XCTestCase {
    func testCacheKeyHoldsWhatChangesThePixelsAndNothingElse() {
        let source = ImageSource.file("/images/a.jpg")
        let base = ImageRequest(source: source, size: .maxPixelSize(100), scale: 2)

        // Same pixel box (200 × 200): same key, whatever the spelling.
        XCTAssertEqual(base.cacheKey, ImageRequest(source: source, size: .fit(width: 200, height: 200)).cacheKey)
        XCTAssertEqual(
            base.cacheKey,
            ImageRequest(source: .url(URL(fileURLWithPath: "/images/a.jpg")), size: .maxPixelSize(200)).cacheKey)
        // Priority and cache switches do not change pixels.
        var other = base
        other.priority = .veryHigh
        other.options = .disableMemoryCache
        XCTAssertEqual(base.cacheKey, other.cacheKey)

        // Source, box and upscaling do.
        XCTAssertNotEqual(
            base.cacheKey, ImageRequest(source: .file("/images/b.jpg"), size: .maxPixelSize(100), scale: 2).cacheKey)
        XCTAssertNotEqual(base.cacheKey, ImageRequest(source: source, size: .maxPixelSize(100), scale: 1).cacheKey)
        XCTAssertNotEqual(base.cacheKey, ImageRequest(source: source, size: .fit(width: 200, height: 100)).cacheKey)
        XCTAssertNotEqual(
            base.cacheKey,
            ImageRequest(source: source, size: .maxPixelSize(100), scale: 2, options: .allowUpscale).cacheKey)
        // ... except upscaling at the original size, which cannot change anything.
        XCTAssertEqual(
            ImageRequest(source: source).cacheKey,
            ImageRequest(source: source, scale: 3, options: .allowUpscale).cacheKey)
        XCTAssertTrue(ImageRequest(source: source, scale: 3).cacheKey.isOriginal)
        XCTAssertFalse(base.cacheKey.isOriginal)
    }

    func testDataSourcesAreKeyedByTheirIdentifier() {
        let one = ImageRequest(source: .data(Data([1, 2, 3]), identifier: "avatar-42"))
        let same = ImageRequest(source: .data(Data([1, 2, 3]), identifier: "avatar-42"))
        let other = ImageRequest(source: .data(Data([1, 2, 3]), identifier: "avatar-43"))
        XCTAssertEqual(one.cacheKey, same.cacheKey)
        XCTAssertNotEqual(one.cacheKey, other.cacheKey)
        XCTAssertEqual(ImageRequest.Priority.allCases.sorted(), [.veryLow, .low, .normal, .high, .veryHigh])
    }
}
