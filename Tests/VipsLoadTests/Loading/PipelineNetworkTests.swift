import Foundation
import TestSupport
import VipsLoad
import XCTest

/// URLs through the whole pipeline against a real server on 127.0.0.1:
/// coalescing, memory → disk → network, revalidation, errors, cancellation.
final class PipelineNetworkTests: NetworkTestCase {
    /// A pipeline downloading into this test's folders, through `cache` when given.
    private func makePipeline(
        cache: DiskCache? = nil, memoryCache: MemoryCache? = MemoryCache(costLimit: 64 << 20),
        _ adjust: (inout HTTPDataLoader.Configuration) -> Void = { _ in }
    ) -> ImagePipeline {
        var http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        adjust(&http)
        return ImagePipeline(
            configuration: .init(decodeConcurrency: 2, memoryCache: memoryCache, dataCache: cache, http: http))
    }

    /// The error a request fails with, or nil when it succeeds.
    private func failure(of task: ImageTask) async -> VipsError? {
        do throws(VipsError) {
            _ = try await task.image
            return nil
        } catch {
            return error
        }
    }

    func testAHundredConcurrentRequestsForOneURLMakeOneHTTPRequestAndOneDecode() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 640, height: 480, seed: 21)
        let gate = ServerGate()
        server.route("/one.jpg") { _ in
            gate.pass()
            return .ok(jpeg)
        }
        let pipeline = makePipeline(cache: try makeCache())
        let request = ImageRequest(url: server.url("/one.jpg"), size: .maxPixelSize(100))
        let all = Task {
            try await withThrowingTaskGroup(of: [Int].self) { group in
                for _ in 0..<100 {
                    group.addTask {
                        let bitmap = try await pipeline.image(for: request)
                        return [bitmap.width, bitmap.height]
                    }
                }
                var sizes: [[Int]] = []
                for try await size in group { sizes.append(size) }
                return sizes
            }
        }
        // The response is held until every caller is waiting on the one request.
        await waitUntil("100 callers wait on one request") {
            pipeline.inFlight.tasks == 100 && self.server.requestCount("/one.jpg") == 1
        }
        gate.open()
        let sizes = try await all.value
        XCTAssertEqual(sizes.count, 100)
        XCTAssertEqual(Set(sizes), [[100, 75]])
        XCTAssertEqual(server.requestCount("/one.jpg"), 1, "the server counted one request")
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.requests, 100)
        XCTAssertEqual(metrics.coalesced, 99)
        XCTAssertEqual(metrics.dataLoadsStarted, 1)
        XCTAssertEqual(metrics.decodesStarted, 1, "one decode served all 100 callers")
        XCTAssertEqual(metrics.networkRequests, 1)
        XCTAssertEqual(metrics.downloads, 1)
        XCTAssertEqual(metrics.bytesDownloaded, jpeg.count)
        XCTAssertEqual(metrics.failed, 0)
    }

    func testLookupOrderIsMemoryThenDiskThenNetwork() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 22)
        server.route("/order.jpg", .ok(jpeg, headers: [("Cache-Control", "public, max-age=3600")]))
        let pipeline = makePipeline(cache: try makeCache())
        let request = ImageRequest(url: server.url("/order.jpg"), size: .maxPixelSize(64))

        _ = try await pipeline.image(for: request)
        var metrics = pipeline.metrics
        XCTAssertEqual([metrics.networkRequests, metrics.diskHits, metrics.memoryHits], [1, 0, 0], "first: the network")

        _ = try await pipeline.image(for: request)
        metrics = pipeline.metrics
        XCTAssertEqual([metrics.networkRequests, metrics.diskHits, metrics.memoryHits], [1, 0, 1], "then: memory")

        var skippingMemory = request
        skippingMemory.options = .disableMemoryCacheReads
        let bitmap = try await pipeline.image(for: skippingMemory)
        XCTAssertEqual([bitmap.width, bitmap.height], [64, 48])
        metrics = pipeline.metrics
        XCTAssertEqual(
            [metrics.networkRequests, metrics.diskHits, metrics.memoryHits], [1, 1, 1], "past memory: the disk")
        XCTAssertEqual(metrics.decodesStarted, 2)
        XCTAssertEqual(metrics.bytesDownloaded, jpeg.count)
        XCTAssertEqual(server.requestCount("/order.jpg"), 1)
    }

    func testAFreshPipelineOnTheSameCacheFolderServesTheImageWithoutARequest() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 23)
        server.route("/kept.jpg", .ok(jpeg, headers: [("Cache-Control", "public, max-age=3600")]))
        let request = ImageRequest(url: server.url("/kept.jpg"), size: .maxPixelSize(80))
        do {
            let first = makePipeline(cache: try makeCache())
            _ = try await first.image(for: request)
            XCTAssertEqual(first.metrics.networkRequests, 1)
        }
        // A "restart": a new cache object and pipeline on the same folder.
        let pipeline = makePipeline(cache: try makeCache())
        let bitmap = try await pipeline.image(for: request)
        XCTAssertEqual([bitmap.width, bitmap.height], [80, 60])
        XCTAssertEqual(server.requestCount("/kept.jpg"), 1, "only the first pipeline asked the server")
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.networkRequests, 0)
        XCTAssertEqual(metrics.diskHits, 1)
        XCTAssertEqual(metrics.bytesDownloaded, 0)
        XCTAssertEqual(metrics.bytesLoaded, jpeg.count, "the cached bytes were decoded")
        XCTAssertEqual(metrics.decodesStarted, 1)
    }

    func testAStaleEntryIsRevalidatedWithOneConditionalRequestAndNotDownloadedAgain() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 24)
        let etag = "\"v24\""
        server.route("/stale.jpg") { request in
            if request.header("If-None-Match") == etag {
                return TestHTTPServer.Response(status: 304, headers: [("ETag", etag), ("Cache-Control", "max-age=0")])
            }
            return .ok(jpeg, headers: [("ETag", etag), ("Cache-Control", "max-age=0")])
        }
        let request = ImageRequest(url: server.url("/stale.jpg"), size: .maxPixelSize(50))
        do {
            _ = try await makePipeline(cache: try makeCache()).image(for: request)
        }
        let pipeline = makePipeline(cache: try makeCache())
        let bitmap = try await pipeline.image(for: request)
        XCTAssertEqual([bitmap.width, bitmap.height], [50, 38])
        let requests = server.requests("/stale.jpg")
        XCTAssertEqual(requests.count, 2)
        XCTAssertEqual(requests.last?.header("If-None-Match"), etag, "the second request was conditional")
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.networkRequests, 1)
        XCTAssertEqual(metrics.revalidations, 1, "answered 304")
        XCTAssertEqual(metrics.downloads, 0, "and not downloaded again")
        XCTAssertEqual(metrics.bytesDownloaded, 0)
        XCTAssertEqual(metrics.diskHits, 0, "a stale entry is not a plain disk hit")
    }

    func testErrorsAreTypedReachEveryCallerAreNotCachedAndAreRetried() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 640, height: 480, seed: 25)
        let html = Data("<!DOCTYPE html><html><body>Not found</body></html>".utf8)
        let cases: [(path: String, response: TestHTTPServer.Response, kind: VipsError.Kind)] = [
            ("/missing.jpg", .status(404, body: "no such image"), .httpStatus),
            ("/oversized.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]), .tooLarge),
            (
                "/page.jpg", .ok(html, contentType: "image/jpeg", headers: [("Cache-Control", "max-age=3600")]),
                .unsupportedFormat
            )
        ]
        let cache = try makeCache()
        let pipeline = makePipeline(cache: cache) { $0.maxBodyBytes = jpeg.count / 2 }
        for (path, response, kind) in cases {
            let gate = ServerGate()
            server.route(path) { _ in
                gate.pass()
                return response
            }
            let request = ImageRequest(url: server.url(path), size: .maxPixelSize(64))
            for round in 1...2 {
                gate.close()
                let callers = (0..<4).map { _ in pipeline.imageTask(with: request) }
                await waitUntil("\(path): four callers wait on request \(round)") {
                    pipeline.inFlight.tasks == 4 && self.server.requestCount(path) == round
                }
                gate.open()
                for caller in callers {
                    let error = await failure(of: caller)
                    XCTAssertEqual(error?.kind, kind, "\(path) round \(round): \(String(describing: error))")
                }
                XCTAssertEqual(
                    server.requestCount(path), round, "\(path): one request per round, none reused from a failure")
                XCTAssertNil(pipeline.cachedImage(for: request), "\(path): no error or image in memory")
                XCTAssertNil(cache.entry(for: request.source.key), "\(path): nothing on disk")
            }
        }
        XCTAssertEqual(pipeline.metrics.failed, 3 * 2 * 4)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 0)
        XCTAssertEqual(NetworkFixtures.files(in: cacheDirectory.appendingPathComponent("entries")), [])
        await waitUntil("failed downloads leave no files") { self.leftoverFiles().isEmpty }
    }

    func testCancellingTheLastCallerOfASlowDownloadClosesTheConnection() async throws {
        // One caller of two leaving does not stop the download.
        let jpeg = try NetworkFixtures.jpeg(width: 800, height: 600, seed: 26)
        server.route(
            "/slow.jpg",
            TestHTTPServer.Response(
                status: 200, headers: [("Content-Type", "image/jpeg")],
                body: .data(jpeg), chunkSize: 16 * 1024, chunkDelay: 0.02))
        let cache = try makeCache()
        let pipeline = makePipeline(cache: cache)
        let slow = ImageRequest(url: server.url("/slow.jpg"), size: .maxPixelSize(64))
        let leaving = pipeline.imageTask(with: slow)
        let staying = pipeline.imageTask(with: slow)
        await waitUntil("the download started") { self.server.requestCount("/slow.jpg") == 1 }
        leaving.cancel()
        let bitmap = try await staying.image
        XCTAssertEqual([bitmap.width, bitmap.height], [64, 48])
        let leavingError = await failure(of: leaving)
        XCTAssertTrue(leavingError?.kind == .cancelled, "\(String(describing: leavingError))")
        XCTAssertEqual(server.clientCloseCount("/slow.jpg"), 0)

        // The last caller leaving a large download mid-body hangs up on the server.
        server.route(
            "/large.jpg",
            TestHTTPServer.Response(
                status: 200, headers: [("Content-Type", "image/jpeg")],
                body: .pattern(count: 256 << 20), chunkSize: 16 * 1024,
                chunkDelay: 0.01))
        let large = ImageRequest(url: server.url("/large.jpg"), size: .maxPixelSize(64))
        let first = pipeline.imageTask(with: large)
        let second = pipeline.imageTask(with: ImageRequest(url: server.url("/large.jpg"), size: .maxPixelSize(64)))
        let temporary = cacheDirectory.appendingPathComponent("tmp")
        await waitUntil("the body streams into the cache") {
            NetworkFixtures.files(in: temporary).contains { $0.split(separator: "/").last?.hasPrefix("w-") == true }
        }
        first.cancel()
        second.cancel()
        await waitUntil("the server sees the connection close") { self.server.clientCloseCount("/large.jpg") == 1 }
        let firstError = await failure(of: first)
        XCTAssertTrue(firstError?.kind == .cancelled, "\(String(describing: firstError))")
        let secondError = await failure(of: second)
        XCTAssertTrue(secondError?.kind == .cancelled, "\(String(describing: secondError))")
        await waitUntil("nothing is left in flight") { pipeline.inFlight.isIdle }
        await waitUntil("the partial body is deleted") { self.leftoverFiles().isEmpty }
        XCTAssertNil(cache.entry(for: large.source.key))
        XCTAssertEqual(server.requestCount("/large.jpg"), 1)
        XCTAssertEqual(pipeline.metrics.cancelled, 3)
    }

    func testDifferentSizesOfOneURLShareOneDownload() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 320, height: 240, seed: 27)
        let gate = ServerGate()
        server.route("/sizes.jpg") { _ in
            gate.pass()
            return .ok(jpeg)
        }
        let pipeline = makePipeline()
        let url = server.url("/sizes.jpg")
        let sizes: [TargetSize] = [.maxPixelSize(32), .maxPixelSize(64), .fit(width: 128, height: 128), .original]
        let tasks = sizes.map { pipeline.imageTask(with: ImageRequest(url: url, size: $0)) }
        await waitUntil("four sizes wait on one download") {
            pipeline.inFlight.decodeJobs == 4 && self.server.requestCount("/sizes.jpg") == 1
        }
        gate.open()
        var results: [[Int]] = []
        for task in tasks {
            let bitmap = try await task.image
            results.append([bitmap.width, bitmap.height])
        }
        XCTAssertEqual(results, [[32, 24], [64, 48], [128, 96], [320, 240]])
        XCTAssertEqual(server.requestCount("/sizes.jpg"), 1)
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.dataLoadsStarted, 1)
        XCTAssertEqual(metrics.dataLoadsShared, 3)
        XCTAssertEqual(metrics.decodesStarted, 4)
        XCTAssertEqual(metrics.downloads, 1)
    }

    func testTheDefaultPipelineLoadsPathsFileURLsAndHTTPURLsThroughOneRequestType() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 300, height: 200, seed: 28)
        server.route("/plain.jpg", .ok(jpeg))
        let file = downloadDirectory.appendingPathComponent("local.jpg")
        try jpeg.write(to: file)
        // No data loader, no HTTP settings: the defaults.
        let pipeline = ImagePipeline(configuration: .init(memoryCache: nil))
        for request in [
            ImageRequest(path: file.path, size: .maxPixelSize(30)),
            ImageRequest(url: file, size: .maxPixelSize(30)),
            ImageRequest(url: server.url("/plain.jpg"), size: .maxPixelSize(30))
        ] {
            let bitmap = try await pipeline.image(for: request)
            XCTAssertEqual([bitmap.width, bitmap.height], [30, 20], "\(request)")
        }
        XCTAssertEqual(server.requestCount("/plain.jpg"), 1)
        XCTAssertEqual(pipeline.metrics.networkRequests, 1)
        XCTAssertEqual(pipeline.metrics.diskHits, 0, "no disk cache by default")

        do {
            _ = try await pipeline.image(for: ImageRequest(url: URL(string: "ftp://127.0.0.1/x.jpg")!))
            XCTFail("an ftp URL loaded")
        } catch {
            XCTAssertEqual(error.kind, .unsupportedSource, "\(error)")
        }
    }

    func testWithDiskCacheTurnsTheCacheOnAtTheGivenFolder() async throws {
        XCTAssertTrue(DiskCache.defaultDirectory.path.hasSuffix("/vipsload/images"), DiskCache.defaultDirectory.path)
        let jpeg = try NetworkFixtures.jpeg(seed: 29)
        server.route("/preset.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
        var configuration = try ImagePipeline.Configuration.withDiskCache(directory: cacheDirectory, sizeLimit: 8 << 20)
        configuration.http.temporaryDirectory = downloadDirectory
        XCTAssertEqual((configuration.dataCache as? DiskCache)?.configuration.sizeLimit, 8 << 20)
        let pipeline = ImagePipeline(configuration: configuration)
        let request = ImageRequest(url: server.url("/preset.jpg"))
        _ = try await pipeline.image(for: request)
        let entry = try XCTUnwrap((configuration.dataCache as? DiskCache)?.entry(for: request.source.key))
        XCTAssertEqual(entry.byteCount, jpeg.count)
    }

    func testDataLoaderPassedInIsTheDefaultLoadersLane() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 64, height: 48, seed: 23)
        let folder = try ImageFolder()
        let path = try folder.jpeg("local", width: 80, height: 60)
        let http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        let configurations = [
            ImagePipeline.Configuration(dataLoadingConcurrency: 1, http: http),
            ImagePipeline.Configuration(dataLoadingConcurrency: 1, dataLoader: DataLoader(), http: http)
        ]
        for (index, configuration) in configurations.enumerated() {
            let gate = ServerGate()
            server.route("/held-\(index).jpg") { _ in
                gate.pass()
                return .ok(jpeg)
            }
            let pipeline = ImagePipeline(configuration: configuration)
            let held = pipeline.imageTask(with: ImageRequest(url: server.url("/held-\(index).jpg")))
            await waitUntil("the download holds the one network slot") {
                self.server.requestCount("/held-\(index).jpg") == 1 && pipeline.inFlight.runningLoads == 1
            }
            // The local file is read on the I/O lane: it does not wait for the held download.
            let local = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(40)))
            XCTAssertEqual(local.width, 40, "configuration \(index)")
            XCTAssertEqual(held.state, .running)
            // And the URL was downloaded by the pipeline's own HTTP loader.
            gate.open()
            let downloaded = try await held.image
            XCTAssertEqual(downloaded.width, 64)
            XCTAssertEqual(pipeline.metrics.networkRequests, 1, "configuration \(index)")
        }
    }

    func testDataLoadingConcurrencyBoundsTheDefaultLoadersDownloads() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 64, height: 48, seed: 24)
        let gate = ServerGate()
        let running = NetworkInFlightCounter()
        for index in 0..<6 {
            server.route("/slot-\(index).jpg") { _ in
                running.enter()
                defer { running.leave() }
                gate.pass()
                return .ok(jpeg)
            }
        }
        let pipeline = ImagePipeline(
            configuration: .init(
                dataLoadingConcurrency: 2, http: HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)))
        let tasks = (0..<6).map { pipeline.imageTask(with: ImageRequest(url: server.url("/slot-\($0).jpg"))) }
        await waitUntil("two downloads run and four wait in the network lane") {
            self.server.totalRequestCount == 2 && pipeline.inFlight.queuedLoads == 4
        }
        XCTAssertEqual(pipeline.inFlight.runningLoads, 2)
        gate.open()
        for task in tasks { _ = try await task.image }
        XCTAssertEqual(server.totalRequestCount, 6)
        XCTAssertEqual(running.maximum, 2, "http.maxConcurrentDownloads is 6; dataLoadingConcurrency bounds the lane")
    }
}
