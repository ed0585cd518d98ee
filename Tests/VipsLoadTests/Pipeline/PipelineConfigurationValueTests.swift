import Foundation
import VipsCore
import XCTest

@testable import VipsLoad

/// `ImagePipeline.Configuration` is a value: pipelines made from one value get
/// a memory cache each, unless one instance is set on purpose.
final class PipelineConfigurationValueTests: XCTestCase {
    func testPipelinesMadeFromOneConfigurationValueDoNotShareTheDefaultMemoryCache() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 320, height: 240)
        let request = ImageRequest(path: path, size: .maxPixelSize(64))
        let configuration = ImagePipeline.Configuration(decodeConcurrency: 1)
        configuration.memoryCache?.costLimit = 32 << 20
        let first = ImagePipeline(configuration: configuration)
        _ = try await first.image(for: request)
        XCTAssertNotNil(first.cachedImage(for: request))

        let second = ImagePipeline(configuration: configuration)
        XCTAssertNil(second.cachedImage(for: request), "a new pipeline answered from another's memory")
        XCTAssertFalse(first.memoryCache === second.memoryCache)
        XCTAssertTrue(second.memoryCache === second.configuration.memoryCache)
        XCTAssertEqual(second.memoryCache?.costLimit, 32 << 20, "the value's limits are kept")
        let response = try await second.response(for: request)
        XCTAssertEqual(response.origin, .load)
        XCTAssertEqual(second.metrics.decodesStarted, 1)
    }

    func testOneCacheSetOnPurposeIsShared() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 320, height: 240)
        let request = ImageRequest(path: path, size: .maxPixelSize(64))
        let shared = MemoryCache(costLimit: 32 << 20)
        let configuration = ImagePipeline.Configuration(decodeConcurrency: 1, memoryCache: shared)
        let first = ImagePipeline(configuration: configuration)
        _ = try await first.image(for: request)
        let second = ImagePipeline(configuration: configuration)
        XCTAssertTrue(second.memoryCache === shared)
        XCTAssertNotNil(second.cachedImage(for: request))
    }
}
