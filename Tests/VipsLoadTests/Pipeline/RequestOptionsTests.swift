import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// Per-request cache options, counted at the loopback server and in the metrics.
final class RequestOptionsTests: NetworkTestCase {
    private func makePipeline(
        cache: DiskCache?, memory: Bool = true,
        loader: any ImageDataLoading = DataLoader()
    ) -> ImagePipeline {
        let http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        return ImagePipeline(
            configuration: .init(
                decodeConcurrency: 2, dataLoader: loader,
                memoryCache: memory ? MemoryCache(costLimit: 64 << 20) : nil,
                dataCache: cache, http: http))
    }

    private func routeImage(_ path: String, seed: Int = 51) throws {
        let jpeg = try NetworkFixtures.jpeg(width: 120, height: 60, seed: seed)
        server.route(path, .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
    }

    func testReloadSkipsMemoryAndDiskReadsButStillWritesBoth() async throws {
        try routeImage("/reload.jpg")
        let pipeline = makePipeline(cache: try makeCache())
        let request = ImageRequest(url: server.url("/reload.jpg"), size: .maxPixelSize(60))
        _ = try await pipeline.image(for: request)
        XCTAssertEqual(server.requestCount("/reload.jpg"), 1)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)

        var reload = request
        reload.options = .reloadIgnoringCachedData
        let reloaded = try await pipeline.image(for: reload)
        XCTAssertEqual([reloaded.width, reloaded.height], [60, 30])
        XCTAssertEqual(server.requestCount("/reload.jpg"), 2, "downloaded again despite the fresh disk entry")
        XCTAssertEqual(pipeline.metrics.decodesStarted, 2, "decoded again despite the memory entry")
        XCTAssertEqual(pipeline.metrics.diskHits, 0)

        // What the reload stored serves the next plain request from memory,
        // and a new pipeline from disk.
        _ = try await pipeline.image(for: request)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 2)
        let next = makePipeline(cache: try makeCache())
        _ = try await next.image(for: request)
        XCTAssertEqual(server.requestCount("/reload.jpg"), 2)
        XCTAssertEqual(next.metrics.diskHits, 1)
    }

    func testCacheOnlyServesMemoryAndDiskAndAMissIsNotCachedWithoutARequest() async throws {
        try routeImage("/offline.jpg")
        let url = server.url("/offline.jpg")
        let offline = ImageRequest(url: url, size: .maxPixelSize(60), options: .returnCacheDataDontLoad)

        // Nothing cached: notCached, and the server never hears of it.
        let empty = makePipeline(cache: try makeCache())
        await assertThrows(kind: .notCached) { try await empty.image(for: offline) }
        let noDataCache = makePipeline(cache: nil)
        await assertThrows(kind: .notCached) { try await noDataCache.image(for: offline) }
        XCTAssertEqual(server.requestCount("/offline.jpg"), 0)
        XCTAssertEqual(empty.metrics.decodesStarted, 0)

        _ = try await empty.image(for: ImageRequest(url: url, size: .maxPixelSize(60)))
        XCTAssertEqual(server.requestCount("/offline.jpg"), 1)
        // A memory hit.
        let fromMemory = try await empty.image(for: offline)
        XCTAssertEqual([fromMemory.width, fromMemory.height], [60, 30])
        // A disk hit in a new pipeline, another size: decoded from the stored data.
        let next = makePipeline(cache: try makeCache())
        var smaller = offline
        smaller.size = .maxPixelSize(30)
        let fromDisk = try await next.image(for: smaller)
        XCTAssertEqual([fromDisk.width, fromDisk.height], [30, 15])
        XCTAssertEqual(next.metrics.diskHits, 1)
        XCTAssertEqual(server.requestCount("/offline.jpg"), 1)
    }

    func testCacheOnlyNeverCallsACustomLoader() async throws {
        let loader = CountingLoader(bytes: try NetworkFixtures.jpeg(width: 40, height: 40, seed: 52))
        let pipeline = makePipeline(cache: try makeCache(), loader: loader)
        let url = URL(string: "https://images.invalid/offline.jpg")!
        await assertThrows(kind: .notCached) {
            try await pipeline.image(for: ImageRequest(url: url, options: .returnCacheDataDontLoad))
        }
        await assertThrows(kind: .notCached) {
            try await pipeline.image(
                for: ImageRequest(
                    source: .data(Data([1, 2, 3]), identifier: "bytes"),
                    options: .returnCacheDataDontLoad))
        }
        XCTAssertEqual(loader.calls.withLock { $0 }, 0)
        _ = try await pipeline.image(for: ImageRequest(url: url))
        _ = try await makePipeline(cache: try makeCache(), loader: loader)
            .image(for: ImageRequest(url: url, options: .returnCacheDataDontLoad))
        XCTAssertEqual(loader.calls.withLock { $0 }, 1)
    }

    func testDataCacheReadsAndWritesCanBeTurnedOffSeparately() async throws {
        try routeImage("/switches.jpg")
        let url = server.url("/switches.jpg")
        // Writes off: downloaded, nothing stored.
        let first = makePipeline(cache: try makeCache(), memory: false)
        _ = try await first.image(for: ImageRequest(url: url, options: .disableDataCacheWrites))
        XCTAssertEqual(try makeCache().cachedData(for: ImageSource.url(url).dataCacheKey) == nil, true)
        _ = try await first.image(for: ImageRequest(url: url))
        XCTAssertEqual(server.requestCount("/switches.jpg"), 2)
        // Stored now: a plain request hits it, one with reads off downloads.
        let second = makePipeline(cache: try makeCache(), memory: false)
        _ = try await second.image(for: ImageRequest(url: url))
        XCTAssertEqual(second.metrics.diskHits, 1)
        XCTAssertEqual(server.requestCount("/switches.jpg"), 2)
        _ = try await second.image(for: ImageRequest(url: url, options: .disableDataCacheReads))
        XCTAssertEqual(server.requestCount("/switches.jpg"), 3)
        XCTAssertEqual(second.metrics.diskHits, 1)
        _ = try await second.image(for: ImageRequest(url: url, options: .disableDataCache))
        XCTAssertEqual(server.requestCount("/switches.jpg"), 4)
        XCTAssertEqual(second.metrics.decodesStarted, 3)
    }

    func testContradictoryOptionsAreInvalidArguments() async throws {
        let pipeline = makePipeline(cache: nil)
        for options: ImageRequest.Options in [
            [.returnCacheDataDontLoad, .reloadIgnoringCachedData],
            [.returnCacheDataDontLoad, .disableDataCacheReads]
        ] {
            let error = await assertThrows(kind: .invalidArgument) {
                try await pipeline.image(for: ImageRequest(url: self.server.url("/x.jpg"), options: options))
            }
            XCTAssertTrue(error?.message.contains("returnCacheDataDontLoad") == true, "\(String(describing: error))")
        }
        XCTAssertEqual(server.totalRequestCount, 0)
    }

    func testAReloadDoesNotJoinALoadOfCachedDataInFlight() async throws {
        let gate = ServerGate()
        let jpeg = try NetworkFixtures.jpeg(width: 80, height: 40, seed: 53)
        server.route("/slow.jpg") { _ in
            gate.pass()
            return .ok(jpeg)
        }
        let pipeline = makePipeline(cache: nil)
        let url = server.url("/slow.jpg")
        let plain = pipeline.imageTask(with: ImageRequest(url: url))
        await waitUntil("the first download reached the server") { self.server.requestCount("/slow.jpg") == 1 }
        let reload = pipeline.imageTask(with: ImageRequest(url: url, options: .reloadIgnoringCachedData))
        await waitUntil("the reload made its own request") { self.server.requestCount("/slow.jpg") == 2 }
        gate.open()
        _ = try await plain.image
        _ = try await reload.image
        XCTAssertEqual(pipeline.metrics.decodesStarted, 2)
    }
}

/// A loader of its own for any source, counting its calls.
final class CountingLoader: ImageDataLoading {
    let bytes: Data
    let calls = LockedState(0)
    init(bytes: Data) { self.bytes = bytes }
    func loadData(for source: ImageSource) async throws(VipsError) -> ImageData {
        calls.withLock { $0 += 1 }
        return ImageData(input: .data(bytes), byteCount: bytes.count)
    }
}
