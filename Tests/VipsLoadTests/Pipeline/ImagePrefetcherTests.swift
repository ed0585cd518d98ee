import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// `ImagePrefetcher` over the loopback server.
final class ImagePrefetcherTests: NetworkTestCase {
    private func makePipeline(cache: DiskCache? = nil) -> ImagePipeline {
        ImagePipeline(
            configuration: .init(
                decodeConcurrency: 2, memoryCache: MemoryCache(costLimit: 64 << 20),
                dataCache: cache,
                http: HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)))
    }

    private func routeGated(_ paths: [String], gate: ServerGate, seed: Int = 81) throws {
        let jpeg = try NetworkFixtures.jpeg(width: 80, height: 40, seed: seed)
        for path in paths {
            server.route(path) { _ in
                gate.pass()
                return .ok(jpeg, headers: [("Cache-Control", "max-age=3600")])
            }
        }
    }

    func testARealRequestJoinsAPrefetchAndRaisesItsPriority() async throws {
        let gate = ServerGate()
        try routeGated(["/joined.jpg"], gate: gate)
        let pipeline = makePipeline()
        let prefetcher = ImagePrefetcher(pipeline: pipeline)
        let request = ImageRequest(url: server.url("/joined.jpg"), size: .maxPixelSize(40))
        prefetcher.startPrefetching(with: [request])
        await waitUntil("the prefetch's download reached the server") { self.server.requestCount("/joined.jpg") == 1 }
        let work = try request.validated().workKey
        XCTAssertEqual(pipeline.engine.lock.perform { _ in pipeline.engine.decodes[work]?.priority }, .veryLow)

        var real = request
        real.priority = .high
        let task = pipeline.imageTask(with: real)
        XCTAssertEqual(
            pipeline.engine.lock.perform { _ in pipeline.engine.decodes[work]?.priority }, .high,
            "the real request raised the shared decode's priority")
        gate.open()
        let bitmap = try await task.image
        XCTAssertEqual([bitmap.width, bitmap.height], [40, 20])
        XCTAssertEqual(server.requestCount("/joined.jpg"), 1, "one download")
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1, "one decode")
        XCTAssertEqual(pipeline.metrics.coalesced, 1)
        await waitUntil("the prefetch finished") { prefetcher.counts == (0, 0) }
    }

    func testAtMostTwoRunAndPauseAndStopHoldTheRest() async throws {
        let gate = ServerGate()
        let paths = (0..<5).map { "/row-\($0).jpg" }
        try routeGated(paths, gate: gate)
        let pipeline = makePipeline()
        let prefetcher = ImagePrefetcher(pipeline: pipeline)
        let requests = paths.map { ImageRequest(url: server.url($0)) }
        prefetcher.isPaused = true
        prefetcher.startPrefetching(with: requests + requests)
        XCTAssertEqual(prefetcher.counts.pending, 5, "duplicates are not queued twice")
        XCTAssertEqual(prefetcher.counts.running, 0, "paused")
        prefetcher.isPaused = false
        await waitUntil("two downloads reached the server") { self.server.totalRequestCount == 2 }
        XCTAssertEqual(prefetcher.counts.running, 2)
        XCTAssertEqual(prefetcher.counts.pending, 3)

        // The last one is dropped before it starts.
        prefetcher.stopPrefetching(with: [requests[4]])
        XCTAssertEqual(prefetcher.counts.pending, 2)
        gate.open()
        await waitUntil("every remaining prefetch finished") { prefetcher.counts == (0, 0) }
        XCTAssertEqual(server.totalRequestCount, 4)
        for request in requests.prefix(4) { XCTAssertNotNil(pipeline.cachedImage(for: request)) }
        XCTAssertNil(pipeline.cachedImage(for: requests[4]))
        XCTAssertEqual(pipeline.metrics.decodesStarted, 4)
    }

    func testStopAllCancelsRunningPrefetches() async throws {
        let gate = ServerGate()
        try routeGated(["/a.jpg", "/b.jpg", "/c.jpg"], gate: gate)
        let pipeline = makePipeline()
        let prefetcher = ImagePrefetcher(pipeline: pipeline)
        prefetcher.startPrefetching(with: ["/a.jpg", "/b.jpg", "/c.jpg"].map { server.url($0) })
        await waitUntil("two downloads reached the server") { self.server.totalRequestCount == 2 }
        prefetcher.stopAll()
        XCTAssertEqual(prefetcher.counts.pending, 0)
        XCTAssertEqual(prefetcher.counts.running, 0)
        await waitUntil("the cancelled loads left the engine") { pipeline.inFlight.dataLoads == 0 }
        gate.open()
        XCTAssertEqual(pipeline.metrics.decodesStarted, 0)
        XCTAssertEqual(server.requestCount("/c.jpg"), 0)
    }

    func testADiskPrefetchDownloadsWithoutDecodingAndARealRequestThenHitsTheDisk() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 80, height: 40, seed: 82)
        server.route("/disk.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
        let pipeline = makePipeline(cache: try makeCache())
        let prefetcher = ImagePrefetcher(pipeline: pipeline, destination: .diskCache)
        let request = ImageRequest(url: server.url("/disk.jpg"), size: .maxPixelSize(40))
        prefetcher.startPrefetching(with: [request])
        await waitUntil("the prefetch finished") { prefetcher.counts == (0, 0) }
        XCTAssertEqual(server.requestCount("/disk.jpg"), 1)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 0, "downloaded, not decoded")
        XCTAssertNil(pipeline.cachedImage(for: request))

        let bitmap = try await pipeline.image(for: request)
        XCTAssertEqual([bitmap.width, bitmap.height], [40, 20])
        XCTAssertEqual(server.requestCount("/disk.jpg"), 1)
        XCTAssertEqual(pipeline.metrics.diskHits, 1)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)
    }

    func testADiskPrefetchJoinedByARealRequestDownloadsOnce() async throws {
        let gate = ServerGate()
        try routeGated(["/shared.jpg"], gate: gate, seed: 83)
        let pipeline = makePipeline(cache: try makeCache())
        let prefetcher = ImagePrefetcher(pipeline: pipeline, destination: .diskCache)
        let request = ImageRequest(url: server.url("/shared.jpg"), size: .maxPixelSize(40))
        prefetcher.startPrefetching(with: [request])
        await waitUntil("the prefetch's download reached the server") { self.server.requestCount("/shared.jpg") == 1 }
        let task = pipeline.imageTask(with: request)
        gate.open()
        _ = try await task.image
        XCTAssertEqual(server.requestCount("/shared.jpg"), 1)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)
        XCTAssertEqual(pipeline.metrics.dataLoadsShared, 1)
        await waitUntil("the prefetch finished") { prefetcher.counts == (0, 0) }
    }
}
