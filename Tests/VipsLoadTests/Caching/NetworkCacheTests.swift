import Foundation
import TestSupport
import VipsLoad
import XCTest

/// HTTP caching through the disk cache: fresh entries without a request,
/// stale ones revalidated, `no-store`/`no-cache`/`Expires` honoured, a fresh
/// loader on the same folder after a "restart", corrupt entries reloaded.
final class NetworkCacheTests: NetworkTestCase {
    /// A resource with an ETag that answers a matching `If-None-Match` with 304.
    private func routeRevalidating(
        _ path: String, _ data: Data, etag: String, cacheControl: String,
        notModifiedCacheControl: String? = nil
    ) {
        server.route(path) { request in
            if request.header("If-None-Match") == etag {
                return TestHTTPServer.Response(
                    status: 304,
                    headers: [
                        ("ETag", etag),
                        ("Cache-Control", notModifiedCacheControl ?? cacheControl)
                    ])
            }
            return .ok(data, headers: [("ETag", etag), ("Cache-Control", cacheControl)])
        }
    }

    func testAFreshLoaderOnTheSameFolderServesCachedImagesWithoutRequests() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 11)
        server.route("/fresh.jpg", .ok(jpeg, headers: [("Cache-Control", "public, max-age=3600")]))
        do {
            let loader = makeLoader(cache: try makeCache())
            let data = try await load(loader, "/fresh.jpg")
            XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
            XCTAssertEqual(loader.metrics.downloads, 1)
        }
        // A "restart": new cache and loader objects on the same folder.
        let cache = try makeCache()
        let loader = makeLoader(cache: cache)
        for _ in 0..<3 {
            let data = try await load(loader, "/fresh.jpg")
            XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
            let bitmap = try ImageDecoder().decode(data.input, size: .maxPixelSize(64))
            XCTAssertEqual(max(bitmap.width, bitmap.height), 64)
        }
        XCTAssertEqual(server.requestCount("/fresh.jpg"), 1, "only the first loader asked the server")
        XCTAssertEqual(loader.metrics.httpRequests, 0)
        XCTAssertEqual(loader.metrics.diskHits, 3)
        XCTAssertEqual(cache.metrics.hits, 3)
    }

    func testAStaleEntryIsRevalidatedWithOneConditionalRequestAndNotDownloadedAgain() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 12)
        routeRevalidating("/stale.jpg", jpeg, etag: "\"v1\"", cacheControl: "max-age=0")
        do {
            let loader = makeLoader(cache: try makeCache())
            _ = try await load(loader, "/stale.jpg")
        }
        let loader = makeLoader(cache: try makeCache())
        let data = try await load(loader, "/stale.jpg")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        let requests = server.requests("/stale.jpg")
        XCTAssertEqual(requests.count, 2)
        XCTAssertNil(requests[0].header("If-None-Match"))
        XCTAssertEqual(requests[1].header("If-None-Match"), "\"v1\"")
        let metrics = loader.metrics
        XCTAssertEqual(metrics.httpRequests, 1)
        XCTAssertEqual(metrics.revalidations, 1)
        XCTAssertEqual(metrics.downloads, 0)
        XCTAssertEqual(metrics.bytesDownloaded, 0)
    }

    func testLastModifiedIsSentBackAsIfModifiedSince() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 13)
        let lastModified = "Tue, 15 Nov 1994 12:45:26 GMT"
        server.route("/dated.jpg") { request in
            if request.header("If-Modified-Since") == lastModified {
                return TestHTTPServer.Response(status: 304, headers: [("Cache-Control", "no-cache")])
            }
            return .ok(jpeg, headers: [("Last-Modified", lastModified), ("Cache-Control", "no-cache")])
        }
        let loader = makeLoader(cache: try makeCache())
        for _ in 0..<3 { _ = try await load(loader, "/dated.jpg") }
        XCTAssertEqual(
            server.requests("/dated.jpg").map { $0.header("If-Modified-Since") }, [nil, lastModified, lastModified],
            "no-cache: stored, but revalidated before every use")
        XCTAssertEqual(loader.metrics.revalidations, 2)
        XCTAssertEqual(loader.metrics.downloads, 1)
    }

    func testANotModifiedAnswerRenewsFreshness() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 14)
        routeRevalidating(
            "/renewed.jpg", jpeg, etag: "\"r\"", cacheControl: "max-age=0", notModifiedCacheControl: "max-age=3600")
        let cache = try makeCache()
        let loader = makeLoader(cache: cache)
        _ = try await load(loader, "/renewed.jpg")
        _ = try await load(loader, "/renewed.jpg")
        XCTAssertEqual(loader.metrics.revalidations, 1)
        XCTAssertTrue(cache.entry(for: server.url("/renewed.jpg").absoluteString)?.isFresh() ?? false)
        for _ in 0..<3 { _ = try await load(loader, "/renewed.jpg") }
        XCTAssertEqual(server.requestCount("/renewed.jpg"), 2, "fresh again after the 304: no more requests")
        XCTAssertEqual(loader.metrics.diskHits, 3)
    }

    func testAChangedResourceReplacesTheEntry() async throws {
        let old = try NetworkFixtures.jpeg(seed: 15)
        let new = try NetworkFixtures.jpeg(seed: 16)
        routeRevalidating("/changing.jpg", old, etag: "\"old\"", cacheControl: "max-age=0")
        let cache = try makeCache()
        let loader = makeLoader(cache: cache)
        let first = try await load(loader, "/changing.jpg")
        routeRevalidating("/changing.jpg", new, etag: "\"new\"", cacheControl: "max-age=3600")
        let second = try await load(loader, "/changing.jpg")
        XCTAssertEqual(NetworkFixtures.contents(of: first), old, "the earlier caller's bytes are untouched")
        XCTAssertEqual(NetworkFixtures.contents(of: second), new)
        XCTAssertEqual(server.requests("/changing.jpg").last?.header("If-None-Match"), "\"old\"")
        let third = try await load(loader, "/changing.jpg")
        XCTAssertEqual(NetworkFixtures.contents(of: third), new)
        XCTAssertEqual(server.requestCount("/changing.jpg"), 2)
        XCTAssertEqual(cache.entry(for: server.url("/changing.jpg").absoluteString)?.http?.etag, "\"new\"")
    }

    func testNoStoreIsNeverCached() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 17)
        server.route(
            "/private.jpg", .ok(jpeg, headers: [("Cache-Control", "no-store, max-age=3600"), ("ETag", "\"p\"")]))
        let cache = try makeCache()
        let loader = makeLoader(cache: cache)
        var data: ImageData? = try await load(loader, "/private.jpg")
        XCTAssertEqual(data.flatMap(NetworkFixtures.contents), jpeg)
        XCTAssertNil(cache.entry(for: server.url("/private.jpg").absoluteString))
        XCTAssertEqual(NetworkFixtures.files(in: downloadDirectory).count, 1, "served from a temporary file")
        data = nil
        XCTAssertEqual(NetworkFixtures.files(in: downloadDirectory), [])
        _ = try await load(loader, "/private.jpg")
        XCTAssertEqual(server.requestCount("/private.jpg"), 2)
        XCTAssertNil(server.requests("/private.jpg")[1].header("If-None-Match"))
        XCTAssertEqual(NetworkFixtures.files(in: cacheDirectory.appendingPathComponent("entries")), [])
    }

    func testExpiresInTheFutureIsFreshAndInThePastIsStale() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 18)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        let now = Date()
        server.route(
            "/future.jpg",
            .ok(
                jpeg,
                headers: [
                    ("Date", formatter.string(from: now)),
                    ("Expires", formatter.string(from: now.addingTimeInterval(3600)))
                ]))
        server.route(
            "/past.jpg",
            .ok(
                jpeg,
                headers: [
                    ("Date", formatter.string(from: now)),
                    ("Expires", formatter.string(from: now.addingTimeInterval(-60)))
                ]))
        server.route("/invalid.jpg", .ok(jpeg, headers: [("Expires", "0")]))
        let loader = makeLoader(cache: try makeCache())
        for path in ["/future.jpg", "/past.jpg", "/invalid.jpg"] {
            for _ in 0..<2 { _ = try await load(loader, path) }
        }
        XCTAssertEqual(server.requestCount("/future.jpg"), 1)
        XCTAssertEqual(server.requestCount("/past.jpg"), 2, "expired and without validators: downloaded again")
        XCTAssertEqual(server.requestCount("/invalid.jpg"), 2, "an invalid Expires means already expired")
    }

    func testIgnoringExpiryServesStaleEntriesWithoutRequests() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 19)
        routeRevalidating("/old.jpg", jpeg, etag: "\"o\"", cacheControl: "max-age=0")
        server.route("/unvalidated.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=0")]))
        let loader = makeLoader(cache: try makeCache()) { $0.cachePolicy = .ignoreExpiry }
        for _ in 0..<3 {
            _ = try await load(loader, "/old.jpg")
            _ = try await load(loader, "/unvalidated.jpg")
        }
        XCTAssertEqual(server.requestCount("/old.jpg"), 1)
        XCTAssertEqual(server.requestCount("/unvalidated.jpg"), 1)
        XCTAssertEqual(loader.metrics.diskHits, 4)
    }

    func testACorruptEntryIsRemovedAndReloadedFromTheServer() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 400, height: 300, seed: 20)
        server.route("/fragile.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
        let entries = cacheDirectory.appendingPathComponent("entries")
        func body() throws -> URL {
            let name = try XCTUnwrap(NetworkFixtures.files(in: entries).first { $0.hasSuffix(".body") })
            return entries.appendingPathComponent(name)
        }
        do {
            let loader = makeLoader(cache: try makeCache())
            _ = try await load(loader, "/fragile.jpg")
        }
        // Truncated on disk.
        let handle = try FileHandle(forWritingTo: try body())
        try handle.truncate(atOffset: UInt64(jpeg.count / 3))
        try handle.close()
        var cache = try makeCache()
        var loader = makeLoader(cache: cache)
        var data = try await load(loader, "/fragile.jpg")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        XCTAssertEqual(cache.metrics.corruptEntriesRemoved, 1)
        XCTAssertEqual(server.requestCount("/fragile.jpg"), 2)

        // Overwritten with junk of the same length, the JPEG signature kept.
        var junk = NetworkFixtures.versionedBody(version: 5, size: jpeg.count)
        junk.replaceSubrange(0..<4, with: jpeg.prefix(4))
        try junk.write(to: try body())
        cache = try makeCache()
        loader = makeLoader(cache: cache)
        data = try await load(loader, "/fragile.jpg")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        XCTAssertNoThrow(
            try ImageDecoder(options: DecodeOptions(strict: true)).decode(data.input, size: .maxPixelSize(50)))
        XCTAssertEqual(cache.metrics.corruptEntriesRemoved, 1)
        XCTAssertEqual(server.requestCount("/fragile.jpg"), 3)
        XCTAssertEqual(NetworkFixtures.files(in: entries).filter { $0.hasSuffix(".body") }.count, 1)
    }

    func testHundredConcurrentLoadsWithACacheMakeOneRequestAndOneEntry() async throws {
        let jpeg = try NetworkFixtures.jpeg(seed: 21)
        let gate = DispatchSemaphore(value: 0)
        server.route("/popular.jpg") { _ in
            _ = gate.wait(timeout: .now() + 60)
            return .ok(jpeg, headers: [("Cache-Control", "max-age=3600")])
        }
        let cache = try makeCache()
        let loader = makeLoader(cache: cache)
        let url = server.url("/popular.jpg")
        let all = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<100 { group.addTask { try await loader.loadData(for: .url(url)).byteCount } }
                return try await group.reduce(0, +)
            }
        }
        XCTAssertTrue(server.wait { _ in loader.metrics.coalescedLoads == 99 })
        gate.signal()
        let total = try await all.value
        XCTAssertEqual(total, jpeg.count * 100)
        XCTAssertEqual(server.requestCount("/popular.jpg"), 1)
        XCTAssertEqual(cache.metrics.writes, 1)
        // Later loads come from disk.
        _ = try await load(loader, "/popular.jpg")
        XCTAssertEqual(server.requestCount("/popular.jpg"), 1)
    }
}
