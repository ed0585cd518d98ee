import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// `response(for:)` tells a download from a data-cache hit.
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
}
