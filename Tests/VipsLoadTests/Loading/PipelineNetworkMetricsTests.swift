import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// A pipeline's own network counters: `ImagePipeline.metrics` and its
/// configuration's `dataLoader.networkMetrics` count the pipeline's own
/// downloader, resumed requests included.
final class PipelineNetworkMetricsTests: NetworkTestCase {
    func testAResumedDownloadIsCountedByThePipelineThatMadeIt() async throws {
        let path = "/resumed.jpg"
        let body = NetworkFixtures.versionedBody(version: 1, size: 1 << 20)
        server.route(path) { [server] request in
            .ranged(
                .data(body), for: request, etag: "\"v1\"",
                cutAfter: server!.requestCount(path) == 1 ? body.count / 2 : nil)
        }
        var http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        http.retryPolicy = HTTPRetryPolicy(maxRetries: 2, initialDelay: 0.01, maxDelay: 1)
        let pipeline = ImagePipeline(configuration: .init(dataCache: try makeCache(), http: http))
        let data = try await pipeline.data(for: ImageRequest(url: server.url(path)))
        XCTAssertEqual(NetworkFixtures.contents(of: data), body)
        XCTAssertEqual(server.requests(path).count, 2)

        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.networkRequests, 2)
        XCTAssertEqual(metrics.retries, 1)
        XCTAssertEqual(metrics.resumedRequests, 1)
        // The configuration's loader reports the same downloader, not a shared one that made no request.
        let loaderMetrics = try XCTUnwrap(pipeline.configuration.dataLoader.networkMetrics)
        XCTAssertEqual(loaderMetrics.httpRequests, 2)
        XCTAssertEqual(loaderMetrics.resumedRequests, 1)
        // Another pipeline counts only its own.
        let other = ImagePipeline(configuration: .init(http: http))
        XCTAssertEqual(other.metrics.networkRequests, 0)
        XCTAssertEqual(other.configuration.dataLoader.networkMetrics?.httpRequests, 0)
    }
}
