import Foundation
import VipsCore
import XCTest

@testable import VipsLoad

/// `ImagePipeline.placeholder(for:)`: a small decode framed as the request frames it.
final class PipelinePlaceholderTests: XCTestCase {
    private func makePipeline() -> ImagePipeline {
        ImagePipeline(configuration: .init(decodeConcurrency: 2, memoryCache: MemoryCache(costLimit: 16 << 20)))
    }

    func testThePlaceholderIsMadeFromASmallDecodeOfTheSource() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("wide", width: 900, height: 300, seed: 5)
        let pipeline = makePipeline()
        let placeholder = try await pipeline.placeholder(for: ImageRequest(path: path))
        // The same small decode, made by hand: the original's aspect, 100 pixels on the longer side.
        let small = try ImageDecoder().decode(.file(path), size: .maxPixelSize(100), mode: .fit)
        XCTAssertEqual([small.width, small.height], [100, 33])
        XCTAssertEqual(placeholder, try ImagePlaceholder(small))
    }

    func testThePlaceholderFollowsTheRequestsFramingWithoutItsProcessors() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 800, height: 600, seed: 9)
        let request = ImageRequest(
            path: path, size: .fit(width: 400, height: 200), mode: .fill(.north), scale: 2,
            processors: [ImageProcessors.GaussianBlur(sigma: 30)])
        let small = ImagePipeline.placeholderRequest(for: request)
        XCTAssertEqual(small.size, .fit(width: 100, height: 50), "the box's 2:1 aspect, 100 pixels across")
        XCTAssertEqual(small.mode, .fill(.north))
        XCTAssertEqual(small.scale, 1)
        XCTAssertTrue(small.processors.isEmpty)

        let pipeline = makePipeline()
        let placeholder = try await pipeline.placeholder(for: request)
        let expected = try ImageDecoder().decode(
            .file(path), size: .fit(width: 100, height: 50), mode: .fill(.north))
        XCTAssertEqual(placeholder, try ImagePlaceholder(expected))
        XCTAssertEqual(Int(placeholder.thumbHash[4]) >> 7, 1, "landscape, as the 2:1 fill is")

        // A box already small is kept; one side only, or the original, gives the source's aspect.
        XCTAssertEqual(
            ImagePipeline.placeholderRequest(for: ImageRequest(path: path, size: .fit(width: 40, height: 60))).size,
            .fit(width: 40, height: 60))
        XCTAssertEqual(
            ImagePipeline.placeholderRequest(for: ImageRequest(path: path, size: .width(300))).size, .maxPixelSize(100))
    }

    func testAPlaceholderOfABadSourceFailsWithTheDecodersErrorAndIsNotCached() async throws {
        let folder = try ImageFolder()
        let path = try folder.write("broken.png", Data("not an image".utf8))
        let pipeline = makePipeline()
        do {
            _ = try await pipeline.placeholder(for: ImageRequest(path: path))
            XCTFail("a text file has no placeholder")
        } catch {
            XCTAssertEqual(error.kind, .unsupportedFormat)
        }
        // Fixed in place: the next call decodes the new bytes, nothing of the failure was kept.
        try FileManager.default.removeItem(atPath: path)
        _ = try folder.write(
            "broken.png", try Data(contentsOf: URL(fileURLWithPath: folder.png("good", width: 50, height: 40))))
        let placeholder = try await pipeline.placeholder(for: ImageRequest(path: path))
        XCTAssertEqual(placeholder.blurHash.count, 28)
    }
}
