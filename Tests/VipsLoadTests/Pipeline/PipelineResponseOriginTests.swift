import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// `response(for:)` tells a download from a data-cache hit and from a memory-cache hit or a bitmap made from one.
final class PipelineResponseOriginTests: NetworkTestCase {
    func testResponseSaysWhetherTheBytesCameFromTheDataCache() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 200, height: 100, seed: 7)
        server.route("/photo.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
        let http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        func pipeline() throws -> ImagePipeline {
            ImagePipeline(
                configuration: .init(
                    decodeConcurrency: 1, memoryCache: MemoryCache(), dataCache: try makeCache(), http: http))
        }
        let request = ImageRequest(
            url: server.url("/photo.jpg"), size: .fit(width: 50, height: 50), mode: .fill(.north))
        let downloaded = try await pipeline().response(for: request)
        XCTAssertEqual(downloaded.origin, .load)
        XCTAssertEqual([downloaded.bitmap.width, downloaded.bitmap.height], [50, 50])
        let second = try pipeline()
        let fromDisk = try await second.response(for: request)
        XCTAssertEqual(fromDisk.origin, .dataCache)
        XCTAssertEqual([fromDisk.sourceInfo?.width, fromDisk.sourceInfo?.height], [200, 100])
        XCTAssertEqual(server.requestCount("/photo.jpg"), 1)
        let fromMemory = try await second.response(for: request)
        XCTAssertEqual(fromMemory.origin, .memoryCache)
    }

    func testASizeMadeFromACachedBitmapIsAMemoryHitInItsResponseAndEvents() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 640, height: 480)
        let pipeline = ImagePipeline.testing()
        let large = try await pipeline.response(for: ImageRequest(path: path, size: .maxPixelSize(256)))
        XCTAssertEqual(large.origin, .load)

        // A smaller size: downscaled from the cached 256 px bitmap, not decoded.
        let task = pipeline.imageTask(with: ImageRequest(path: path, size: .maxPixelSize(64)))
        let events = task.events
        let bitmap = try await task.image
        XCTAssertEqual(bitmap.width, 64)
        var seen: [ImageTask.Event] = []
        for await event in events { seen.append(event) }
        guard case .cacheHit(.memory)? = seen.first, case .finished(.success)? = seen.last, seen.count == 2 else {
            return XCTFail("events \(seen)")
        }
        XCTAssertEqual(task.origin, .derivedFromMemoryCache)
        let smaller = try await pipeline.response(for: ImageRequest(path: path, size: .maxPixelSize(32)))
        XCTAssertEqual(smaller.origin, .derivedFromMemoryCache)
        XCTAssertEqual(smaller.sourceInfo?.width, 640, "the source's header, as for a decode")

        // Processors over the cached decode: made from memory too.
        var turned = ImageRequest(path: path, size: .maxPixelSize(256))
        turned.processors = [ImageProcessors.Rotate(.degrees90)]
        let processed = try await pipeline.response(for: turned)
        XCTAssertEqual(processed.origin, .derivedFromMemoryCache)
        XCTAssertEqual([processed.bitmap.width, processed.bitmap.height], [192, 256])
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.decodesStarted, 1)
        XCTAssertEqual(metrics.memoryResizes, 2)
        // Served again: plain memory hits.
        let again = try await pipeline.response(for: ImageRequest(path: path, size: .maxPixelSize(64)))
        XCTAssertEqual(again.origin, .memoryCache)
    }

    func testARequestThatDisablesResizingFromLargerBitmapsIsDecodedAsIfNothingWereCached() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 640, height: 480)
        let fresh = try await ImagePipeline.testing().response(for: ImageRequest(path: path, size: .maxPixelSize(64)))
        let pipeline = ImagePipeline.testing()
        _ = try await pipeline.response(for: ImageRequest(path: path, size: .maxPixelSize(256)))
        var request = ImageRequest(path: path, size: .maxPixelSize(64))
        request.options.insert(.disableResizingFromLargerCachedImages)
        let smaller = try await pipeline.response(for: request)
        XCTAssertEqual(smaller.origin, .load)
        XCTAssertEqual(pipeline.metrics.memoryResizes, 0)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 2)
        XCTAssertEqual(
            smaller.bitmap.withUnsafeBytes { Data($0) }, fresh.bitmap.withUnsafeBytes { Data($0) },
            "the bytes of a decode with nothing cached")
        // Its own size, cached, is still a memory hit.
        let again = try await pipeline.response(for: request)
        XCTAssertEqual(again.origin, .memoryCache)
    }
}
