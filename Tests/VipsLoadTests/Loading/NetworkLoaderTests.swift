import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// `HTTPDataLoader` against a real HTTP server on 127.0.0.1: bodies streamed
/// to files, coalescing, every failure typed, nothing of a failure kept.
final class NetworkLoaderTests: NetworkTestCase {
    func testDownloadsToATemporaryFileThatDecodesAndIsDeletedOnRelease() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 640, height: 480)
        server.route("/photo.jpg", .ok(jpeg))
        let loader = makeLoader()
        var data: ImageData? = try await load(loader, "/photo.jpg")
        let path = try XCTUnwrap(data.flatMap { if case .file(let path) = $0.input { path } else { nil } })
        XCTAssertTrue(path.hasPrefix(downloadDirectory.path))
        XCTAssertEqual(data?.byteCount, jpeg.count)
        XCTAssertEqual(data.flatMap(NetworkFixtures.contents), jpeg)
        let bitmap = try ImageDecoder().decode(try XCTUnwrap(data).input, size: .maxPixelSize(100))
        XCTAssertEqual([bitmap.width, bitmap.height], [100, 75])
        data = nil
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "the temporary file goes with its ImageData")
        XCTAssertEqual(server.requestCount("/photo.jpg"), 1)
        XCTAssertEqual(server.requests("/photo.jpg").first?.header("Accept"), "image/*,*/*;q=0.8")
        let metrics = loader.metrics
        XCTAssertEqual(metrics.httpRequests, 1)
        XCTAssertEqual(metrics.downloads, 1)
        XCTAssertEqual(metrics.bytesDownloaded, jpeg.count)
    }

    func testHundredConcurrentLoadsOfOneURLMakeOneRequest() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        // The server holds its answer until all 100 loads are waiting, so none can come late.
        let gate = DispatchSemaphore(value: 0)
        server.route("/shared.jpg") { _ in
            _ = gate.wait(timeout: .now() + 60)
            return .ok(jpeg)
        }
        let loader = makeLoader()
        let url = server.url("/shared.jpg")
        let results = Task {
            try await withThrowingTaskGroup(of: ImageData.self) { group in
                for _ in 0..<100 { group.addTask { try await loader.loadData(for: .url(url)) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        XCTAssertTrue(server.wait { _ in loader.metrics.coalescedLoads == 99 }, "99 loads join the first")
        gate.signal()
        let all = try await results.value
        XCTAssertEqual(all.count, 100)
        XCTAssertTrue(all.allSatisfy { $0 === all[0] }, "every caller gets the same ImageData")
        XCTAssertEqual(NetworkFixtures.contents(of: all[0]), jpeg)
        XCTAssertEqual(server.requestCount("/shared.jpg"), 1)
        XCTAssertEqual(loader.metrics.httpRequests, 1)
        XCTAssertEqual(loader.metrics.downloads, 1)
    }

    func testFollowsARedirectChain() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        server.route("/a", .redirect(to: "/b", status: 301))
        server.route("/b", .redirect(to: "/c", status: 302))
        server.route("/c", .redirect(to: server.url("/final.jpg").absoluteString, status: 307))
        server.route("/final.jpg", .ok(jpeg))
        let loader = makeLoader()
        let data = try await load(loader, "/a")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        XCTAssertEqual(["/a", "/b", "/c", "/final.jpg"].map(server.requestCount), [1, 1, 1, 1])
    }

    func testRedirectLoopIsRefusedAndRedirectsNeverReadLocalFiles() async throws {
        server.route("/loop", .redirect(to: "/loop"))
        let loader = makeLoader { $0.maxRedirects = 3 }
        await assertLoadFails(loader, "/loop", kind: .redirectRefused, containing: "more than 3 redirects")
        XCTAssertEqual(server.requestCount("/loop"), 4)
        // The loader reads the scheme of the raw Location itself: a file: URL is refused, never
        // read, and never turned into a path on the same host.
        let secret = downloadDirectory.deletingLastPathComponent().appendingPathComponent(
            "vipsload-secret-\(UUID().uuidString).jpg")
        try NetworkFixtures.jpeg().write(to: secret)
        defer { try? FileManager.default.removeItem(at: secret) }
        server.route("/to-file", .redirect(to: secret.absoluteString))
        do {
            let data = try await load(loader, "/to-file")
            XCTFail("a redirect to \(secret) served \(data.byteCount) bytes")
        } catch let error as VipsError {
            XCTAssertEqual(error.kind, .redirectRefused, "\(error)")
            XCTAssertTrue(error.message.contains("only http and https"), error.message)
        }
        XCTAssertEqual(server.requestCount(secret.path), 0)
        XCTAssertEqual(leftoverFiles(), [])
    }

    /// Every failure: the right typed error, no cache entry, no file left, and
    /// the next load of the same URL asks the server again.
    func testEveryFailureIsTypedCachesNothingAndIsTriedAgain() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 9)
        let cache = try makeCache()
        let loader = makeLoader(cache: cache) {
            $0.requestTimeout = 2
            $0.maxBodyBytes = 1_000_000
        }
        var slowHead = TestHTTPServer.Response.ok(jpeg, headers: [("Cache-Control", "max-age=3600")])
        slowHead.headerDelay = 10
        var cutShort = TestHTTPServer.Response.ok(jpeg, headers: [("Cache-Control", "max-age=3600")])
        cutShort.cutAfter = jpeg.count / 2
        var reset = cutShort
        reset.ending = .reset
        var resetWithoutLength = reset
        resetWithoutLength.declaredLength = .some(nil)
        var declaredTooLarge = TestHTTPServer.Response.ok(Data(), headers: [("Cache-Control", "max-age=3600")])
        declaredTooLarge.body = .pattern(count: 5_000_000)
        var emptyBody = TestHTTPServer.Response.ok(Data(), headers: [("Cache-Control", "max-age=3600")])
        emptyBody.declaredLength = 0
        let html = TestHTTPServer.Response.ok(
            Data("<!DOCTYPE html><html><body>Sorry</body></html>".utf8),
            contentType: "image/jpeg", headers: [("Cache-Control", "max-age=3600")])

        let cases: [(path: String, response: TestHTTPServer.Response, kind: VipsError.Kind, text: String)] = [
            ("/404.jpg", .status(404, body: "not here"), .httpStatus, "HTTP 404"),
            ("/500.jpg", .status(500), .httpStatus, "HTTP 500"),
            ("/slow.jpg", slowHead, .timedOut, "no data for 2"),
            ("/cut.jpg", cutShort, .incompleteBody, "remaining"),
            ("/reset.jpg", reset, .network, "reset"),
            ("/reset-no-length.jpg", resetWithoutLength, .network, "reset"),
            ("/declared-too-large.jpg", declaredTooLarge, .tooLarge, "Content-Length 5000000"),
            ("/empty.jpg", emptyBody, .emptyInput, "empty body"),
            ("/page.jpg", html, .unsupportedFormat, "<!DOCTYPE html>")
        ]
        for (path, response, kind, text) in cases {
            server.route(path, response)
            await assertLoadFails(loader, path, kind: kind, containing: text)
            XCTAssertNil(cache.entry(for: server.url(path).absoluteString), "\(path): nothing cached")
            XCTAssertEqual(leftoverFiles(), [], "\(path): no partial file left")
            XCTAssertEqual(server.requestCount(path), 1, path)
        }
        XCTAssertEqual(loader.metrics.failures, cases.count)
        XCTAssertEqual(loader.metrics.downloads, 1, "only the HTML page arrived completely")

        // Fixed on the server, each URL loads on the next try: no failure was remembered.
        for (path, _, _, _) in cases {
            server.route(path, .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
            let data = try await load(loader, path)
            XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg, path)
            XCTAssertEqual(server.requestCount(path), 2, path)
            XCTAssertNotNil(cache.entry(for: server.url(path).absoluteString), "\(path): cached once good")
        }
    }

    func testBodyGrowingPastTheLimitIsStoppedWhileStreaming() async throws {
        // No Content-Length: only counting while streaming can catch it.
        var huge = TestHTTPServer.Response(body: .pattern(count: 200_000_000))
        huge.declaredLength = .some(nil)
        server.route("/huge.jpg", huge)
        let cache = try makeCache()
        let loader = makeLoader(cache: cache) { $0.maxBodyBytes = 2_000_000 }
        await assertLoadFails(loader, "/huge.jpg", kind: .tooLarge, containing: "exceeds the limit of 2000000")
        XCTAssertTrue(server.wait { $0.clientCloseCount("/huge.jpg") == 1 }, "the download stops long before 200 MB")
        XCTAssertEqual(leftoverFiles(), [])
        XCTAssertNil(cache.entry(for: server.url("/huge.jpg").absoluteString))
    }

    func testWholeTransferTimeoutStopsATricklingBody() async throws {
        var trickle = TestHTTPServer.Response.ok(try NetworkFixtures.jpeg())
        trickle.chunkSize = 512
        trickle.chunkDelay = 0.2
        server.route("/trickle.jpg", trickle)
        // Bytes keep coming, so only the whole-transfer deadline can end it.
        let loader = makeLoader {
            $0.requestTimeout = 30
            $0.resourceTimeout = 1
        }
        await assertLoadFails(loader, "/trickle.jpg", kind: .timedOut, containing: "within 1")
        XCTAssertTrue(server.wait { $0.clientCloseCount("/trickle.jpg") == 1 })
        XCTAssertEqual(leftoverFiles(), [])
    }

    func testCancellingTheOnlyCallerStopsTheDownload() async throws {
        var slow = TestHTTPServer.Response(body: .pattern(count: 50_000_000))
        slow.chunkSize = 16 * 1024
        slow.chunkDelay = 0.02
        server.route("/large-slow.jpg", slow)
        let loader = makeLoader()
        let url = server.url("/large-slow.jpg")
        let task = Task { try await loader.loadData(for: .url(url)) }
        // Wait until body bytes are arriving on disk.
        XCTAssertTrue(
            server.wait { _ in
                NetworkFixtures.files(in: self.downloadDirectory).contains { name in
                    ((try? FileManager.default.attributesOfItem(
                        atPath: self.downloadDirectory.appendingPathComponent(name).path)[.size]) as? Int ?? 0) > 0
                }
            })
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("a cancelled load must not return data")
        } catch {
            XCTAssertEqual((error as? VipsError)?.kind, .cancelled, "\(error)")
        }
        // Every connection the load opened is closed (one, unless a retry opened another first).
        let path = "/large-slow.jpg"
        XCTAssertTrue(
            server.wait { $0.requestCount(path) >= 1 && $0.clientCloseCount(path) == $0.requestCount(path) },
            "the server sees the connection close (requests \(server.requestCount(path)), closes "
                + "\(server.clientCloseCount(path)), body bytes sent \(server.bodyBytesSent(path)), "
                + "\(loader.metrics))")
        XCTAssertTrue(
            server.wait { _ in NetworkFixtures.files(in: self.downloadDirectory).isEmpty },
            "the partial file is deleted")
    }

    func testCancellingOneOfTwoCallersKeepsTheDownloadForTheOther() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        var slow = TestHTTPServer.Response.ok(jpeg)
        slow.chunkSize = 4096
        slow.chunkDelay = 0.05
        server.route("/shared-slow.jpg", slow)
        let loader = makeLoader()
        let url = server.url("/shared-slow.jpg")
        let first = Task { try await loader.loadData(for: .url(url)) }
        let second = Task { try await loader.loadData(for: .url(url)) }
        XCTAssertTrue(
            server.wait { _ in loader.metrics.coalescedLoads == 1 && self.server.requestCount("/shared-slow.jpg") == 1 }
        )
        first.cancel()
        let data = try await second.value
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        do {
            _ = try await first.value
            XCTFail("the cancelled caller must not get data")
        } catch {
            XCTAssertEqual((error as? VipsError)?.kind, .cancelled, "\(error)")
        }
        XCTAssertEqual(server.requestCount("/shared-slow.jpg"), 1)
        XCTAssertEqual(server.clientCloseCount("/shared-slow.jpg"), 0)
    }

    /// Cancelling at any moment of a redirect chain (a head being judged, the
    /// next hop being started on the transport's thread) ends the load once,
    /// as cancelled or complete, with no file left. (FoundationNetworking
    /// crashed here; the libcurl transport has no such window, and this keeps it so.)
    func testCancellingAtRandomMomentsDuringRedirectsIsSafe() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        server.route("/hop1", .redirect(to: "/hop2"))
        server.route("/hop2", .redirect(to: "/hop3"))
        server.route("/hop3", .redirect(to: "/landed.jpg"))
        server.route("/landed.jpg", .ok(jpeg))
        let loader = makeLoader()
        let url = server.url("/hop1")
        var loaded = 0
        var cancelled = 0
        for round in 0..<150 {
            let task = Task { try await loader.loadData(for: .url(url)) }
            try await Task.sleep(nanoseconds: UInt64(round % 30) * 100_000)
            task.cancel()
            do {
                let data = try await task.value
                XCTAssertEqual(data.byteCount, jpeg.count)
                loaded += 1
            } catch {
                XCTAssertEqual((error as? VipsError)?.kind, .cancelled, "\(error)")
                cancelled += 1
            }
        }
        XCTAssertEqual(loaded + cancelled, 150)
        XCTAssertGreaterThan(cancelled, 0)
        // Still fully working afterwards.
        let data = try await load(loader, "/hop1")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        XCTAssertTrue(server.wait { _ in NetworkFixtures.files(in: self.downloadDirectory).count <= 1 })
    }

    func testOtherSourcesAreRefused() async throws {
        let loader = makeLoader()
        for source: ImageSource in [
            .file("/tmp/x.jpg"), .url(URL(fileURLWithPath: "/tmp/x.jpg")), .data(Data([1]), identifier: "x"),
            .url(URL(string: "ftp://127.0.0.1/x.jpg")!)
        ] {
            do {
                _ = try await loader.loadData(for: source)
                XCTFail("\(source) must be refused")
            } catch {
                XCTAssertEqual(error.kind, .unsupportedSource, "\(error)")
            }
        }
    }

    func testLimitsConcurrentDownloads() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        let gate = DispatchSemaphore(value: 0)
        let inFlight = NetworkInFlightCounter()
        for index in 0..<6 {
            server.route("/c\(index).jpg") { _ in
                inFlight.enter()
                defer { inFlight.leave() }
                _ = gate.wait(timeout: .now() + 60)
                return .ok(jpeg)
            }
        }
        let loader = makeLoader { $0.maxConcurrentDownloads = 2 }
        let urls = (0..<6).map { server.url("/c\($0).jpg") }
        let all = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for url in urls { group.addTask { try await loader.loadData(for: .url(url)).byteCount } }
                return try await group.reduce(0, +)
            }
        }
        XCTAssertTrue(server.wait { $0.totalRequestCount == 2 })
        // The other four wait for a slot, and no third request is sent while they do.
        await waitUntil("four downloads wait for a slot") { loader.waitingDownloads == 4 }
        XCTAssertEqual(server.totalRequestCount, 2)
        for _ in 0..<6 { gate.signal() }
        let total = try await all.value
        XCTAssertEqual(total, jpeg.count * 6)
        XCTAssertEqual(server.totalRequestCount, 6)
        XCTAssertEqual(inFlight.maximum, 2)
    }
}

/// Counts handlers running at once on the server, keeping the maximum.
final class NetworkInFlightCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var current = 0
    private var peak = 0
    func enter() { lock.lock(); current += 1; peak = max(peak, current); lock.unlock() }
    func leave() { lock.lock(); current -= 1; lock.unlock() }
    var maximum: Int { lock.lock(); defer { lock.unlock() }; return peak }
}
