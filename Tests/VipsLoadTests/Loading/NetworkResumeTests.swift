import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// Resumable downloads: a body cut short from a server that allows ranges is
/// kept with its validator, and the retry (or the next load, in a later
/// pipeline over the same disk cache) asks only for the rest, with `Range`
/// and `If-Range`. Against the real server on 127.0.0.1, which counts the
/// body bytes it sends, so the cost is measured in bytes over the wire.
final class NetworkResumeTests: NetworkTestCase {
    private let size = 9 * 1024 * 1024
    private let quickRetries = HTTPRetryPolicy(maxRetries: 2, initialDelay: 0.01, maxDelay: 1)

    /// `body` served with ranges and `etag`; the first request is cut at half.
    private func routeCutOnce(_ path: String, _ body: Data, etag: String? = "\"v1\"", lastModified: String? = nil) {
        server.route(path) { [server] request in
            .ranged(
                .data(body), for: request, etag: etag, lastModified: lastModified,
                cutAfter: server!.requestCount(path) == 1 ? body.count / 2 : nil)
        }
    }

    private func ratio(_ path: String) -> Double {
        Double(server.bodyBytesSent(path)) / Double(size)
    }

    private func partialFiles(inCache: Bool) -> [String] {
        let root = inCache ? cacheDirectory.appendingPathComponent("tmp/partial") : downloadDirectory!
        return NetworkFixtures.files(in: root).filter { $0.hasSuffix(".body") || $0.hasSuffix(".json") }
    }

    private func storageKey(_ path: String) -> String {
        URLRedaction.storageKey(ImageSource.url(server.url(path)).key)
    }

    func testARetryResumesACutBodyInsteadOfStartingOver() async throws {
        for cached in [true, false] {
            let path = cached ? "/big-cached.jpg" : "/big.jpg"
            let body = NetworkFixtures.versionedBody(version: 1, size: size)
            routeCutOnce(path, body)
            let loader = makeLoader(cache: cached ? try makeCache() : nil) { $0.retryPolicy = self.quickRetries }
            let data = try await load(loader, path)
            XCTAssertEqual(NetworkFixtures.contents(of: data), body)
            let requests = server.requests(path)
            XCTAssertEqual(requests.count, 2)
            XCTAssertNil(requests[0].header("Range"))
            XCTAssertEqual(requests[1].header("Range"), "bytes=\(body.count / 2)-")
            XCTAssertEqual(requests[1].header("If-Range"), "\"v1\"")
            XCTAssertEqual(loader.metrics.resumedRequests, 1)
            let cost = ratio(path)
            print(
                "resume on retry (\(cached ? "disk cache" : "no cache")): \(server.bodyBytesSent(path)) body bytes sent for a \(size)-byte body, \(String(format: "%.3f", cost))×"
            )
            XCTAssertLessThanOrEqual(cost, 1.15)
            // Used, so removed.
            XCTAssertEqual(partialFiles(inCache: cached), [])
        }
    }

    func testALaterPipelineOverTheSameDiskCacheResumes() async throws {
        let path = "/later.jpg"
        let body = NetworkFixtures.versionedBody(version: 3, size: size)
        routeCutOnce(path, body, etag: nil, lastModified: "Tue, 01 Dec 2026 10:00:00 GMT")
        let http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        do {
            let first = ImagePipeline(
                configuration: ImagePipeline.Configuration(dataCache: try makeCache(), http: http))
            do {
                _ = try await first.data(for: ImageRequest(url: server.url(path)))
                XCTFail("the body was cut")
            } catch {
                XCTAssertEqual(error.kind, .incompleteBody, "\(error)")
            }
        }
        XCTAssertEqual(partialFiles(inCache: true).count, 2, "the partial and its record are kept in the cache")
        let second = ImagePipeline(configuration: ImagePipeline.Configuration(dataCache: try makeCache(), http: http))
        let data = try await second.data(for: ImageRequest(url: server.url(path)))
        XCTAssertEqual(NetworkFixtures.contents(of: data), body)
        let requests = server.requests(path)
        XCTAssertEqual(requests.count, 2)
        XCTAssertEqual(requests[1].header("Range"), "bytes=\(body.count / 2)-")
        XCTAssertEqual(requests[1].header("If-Range"), "Tue, 01 Dec 2026 10:00:00 GMT")
        let cost = ratio(path)
        print(
            "resume in a new pipeline over the same disk cache: \(server.bodyBytesSent(path)) body bytes sent for a \(size)-byte body, \(String(format: "%.3f", cost))×"
        )
        XCTAssertLessThanOrEqual(cost, 1.15)
        XCTAssertEqual(partialFiles(inCache: true), [])
        // The whole body was verified and cached: a third load needs no request.
        let third = ImagePipeline(configuration: ImagePipeline.Configuration(dataCache: try makeCache(), http: http))
        let cached = try await third.data(for: ImageRequest(url: server.url(path)))
        XCTAssertEqual(NetworkFixtures.contents(of: cached), body)
    }

    func testAChangedValidatorStartsOverCleanly() async throws {
        let path = "/changed.jpg"
        let old = NetworkFixtures.versionedBody(version: 1, size: size)
        let new = NetworkFixtures.versionedBody(version: 2, size: size)
        server.route(path) { [server] request in
            server!.requestCount(path) == 1
                ? .ranged(.data(old), for: request, etag: "\"v1\"", cutAfter: old.count / 2)
                : .ranged(.data(new), for: request, etag: "\"v2\"")
        }
        let cache = try makeCache()
        let loader = makeLoader(cache: cache) { $0.retryPolicy = self.quickRetries }
        let data = try await load(loader, path)
        XCTAssertEqual(NetworkFixtures.contents(of: data), new)
        XCTAssertEqual(server.requests(path)[1].header("If-Range"), "\"v1\"")
        print(
            "changed validator: \(String(format: "%.3f", ratio(path)))× the body over the wire (half of v1, all of v2)")
        XCTAssertEqual(server.bodyBytesSent(path), old.count / 2 + new.count)
        XCTAssertEqual(partialFiles(inCache: true), [])
    }

    func testAServerIgnoringRangeGivesTheWholeBody() async throws {
        let path = "/norange.jpg"
        let body = NetworkFixtures.versionedBody(version: 4, size: 1 << 20)
        server.route(path) { [server] request in
            // Claims ranges but answers every request whole.
            var plain = request
            plain.headers["range"] = nil
            return .ranged(
                .data(body), for: plain, etag: "\"v4\"",
                cutAfter: server!.requestCount(path) == 1 ? body.count / 2 : nil)
        }
        let loader = makeLoader(cache: try makeCache()) { $0.retryPolicy = self.quickRetries }
        let data = try await load(loader, path)
        XCTAssertEqual(NetworkFixtures.contents(of: data), body)
        XCTAssertEqual(server.requests(path)[1].header("Range"), "bytes=\(body.count / 2)-")
        XCTAssertEqual(partialFiles(inCache: true), [])
    }

    func testAMismatchedContentRangeIsAProtocolErrorAndNothingIsCached() async throws {
        let body = NetworkFixtures.versionedBody(version: 5, size: 1 << 20)
        let half = body.count / 2
        let total = body.count
        // Each answers the resumed request with a 206 whose Content-Range does not continue the kept bytes.
        let wrong: [(String, String, Int, [(String, String)])] = [
            ("/start.jpg", "bytes \(half + 1)-\(total - 1)/\(total)", half + 1, []),
            ("/total.jpg", "bytes \(half)-\(total)/\(total + 1)", half, []),
            ("/garbled.jpg", "bytes=\(half)-", half, []),
            ("/star.jpg", "bytes \(half)-\(total - 1)/*", half, []),
            ("/coded.jpg", "bytes \(half)-\(total - 1)/\(total)", half, [("Content-Encoding", "gzip")])
        ]
        let cache = try makeCache()
        let loader = makeLoader(cache: cache) { $0.retryPolicy = self.quickRetries }
        for (path, contentRange, offset, extra) in wrong {
            server.route(path) { [server] request in
                if server!.requestCount(path) == 1 {
                    return .ranged(.data(body), for: request, etag: "\"v5\"", cutAfter: half)
                }
                var response = TestHTTPServer.Response(
                    status: 206,
                    headers: [
                        ("Content-Type", "image/jpeg"), ("ETag", "\"v5\""), ("Content-Range", contentRange)
                    ] + extra,
                    body: .data(body))
                response.bodyOffset = offset
                return response
            }
            await assertLoadFails(loader, path, kind: .protocolError, containing: "206")
            XCTAssertEqual(server.requestCount(path), 2, path)
            XCTAssertNil(cache.cachedData(for: storageKey(path)), path)
            XCTAssertEqual(partialFiles(inCache: true), [], path)
        }
        XCTAssertEqual(leftoverFiles(), [])
    }

    func testA206ToARequestWithoutRangeIsAProtocolError() async throws {
        let body = NetworkFixtures.versionedBody(version: 6, size: 64 * 1024)
        server.route(
            "/unasked.jpg",
            TestHTTPServer.Response(
                status: 206,
                headers: [("Content-Type", "image/jpeg"), ("Content-Range", "bytes 0-\(body.count - 1)/\(body.count)")],
                body: .data(body)))
        let cache = try makeCache()
        let loader = makeLoader(cache: cache) { $0.retryPolicy = self.quickRetries }
        await assertLoadFails(loader, "/unasked.jpg", kind: .protocolError, containing: "asked for no range")
        XCTAssertEqual(server.requestCount("/unasked.jpg"), 1)
        XCTAssertNil(cache.cachedData(for: storageKey("/unasked.jpg")))
    }

    func testA416StartsOver() async throws {
        let path = "/gone.jpg"
        let body = NetworkFixtures.versionedBody(version: 7, size: 1 << 20)
        server.route(path) { [server] request in
            switch server!.requestCount(path) {
            case 1: return .ranged(.data(body), for: request, etag: "\"v7\"", cutAfter: body.count / 2)
            case 2: return TestHTTPServer.Response(status: 416, headers: [("Content-Range", "bytes */\(body.count)")])
            default: return .ranged(.data(body), for: request, etag: "\"v7\"")
            }
        }
        let loader = makeLoader(cache: try makeCache()) {
            $0.retryPolicy = HTTPRetryPolicy(maxRetries: 1, initialDelay: 0.01)
        }
        let data = try await load(loader, path)
        XCTAssertEqual(NetworkFixtures.contents(of: data), body)
        let requests = server.requests(path)
        XCTAssertEqual(requests.count, 3)
        XCTAssertNotNil(requests[1].header("Range"))
        XCTAssertNil(requests[2].header("Range"))
        XCTAssertEqual(loader.metrics.retries, 1, "the start over after a 416 is not a retry")
    }

    func testNoPartialIsKeptWithoutAValidatorOrRanges() async throws {
        let body = NetworkFixtures.versionedBody(version: 8, size: 1 << 20)
        // No validator; then a weak ETag; then a validator but no Accept-Ranges.
        server.route("/novalidator.jpg") { [server] request in
            .ranged(
                .data(body), for: request,
                cutAfter: server!.requestCount("/novalidator.jpg") == 1 ? body.count / 2 : nil)
        }
        server.route("/weak.jpg") { [server] request in
            .ranged(
                .data(body), for: request, etag: "W/\"v8\"",
                cutAfter: server!.requestCount("/weak.jpg") == 1 ? body.count / 2 : nil)
        }
        server.route("/noranges.jpg") { [server] _ in
            var response = TestHTTPServer.Response.ok(body, headers: [("ETag", "\"v8\"")])
            if server!.requestCount("/noranges.jpg") == 1 { response.cutAfter = body.count / 2 }
            return response
        }
        let loader = makeLoader(cache: try makeCache()) { $0.retryPolicy = self.quickRetries }
        for path in ["/novalidator.jpg", "/weak.jpg", "/noranges.jpg"] {
            let data = try await load(loader, path)
            XCTAssertEqual(NetworkFixtures.contents(of: data), body, path)
            XCTAssertEqual(server.requests(path).map { $0.header("Range") }, [nil, nil], path)
        }
        XCTAssertEqual(loader.metrics.resumedRequests, 0)
    }

    func testKeptPartialsAreBounded() throws {
        let directory = cacheDirectory.appendingPathComponent("partials").path
        let store = PartialDownloads(directory: directory)
        try FileManager.default.createDirectory(atPath: downloadDirectory.path, withIntermediateDirectories: true)
        for index in 0..<(PartialDownloads.maxCount + 4) {
            let file = try StreamingFileWriter(directory: downloadDirectory.path, namePrefix: "download-")
            try file.write(Data(repeating: UInt8(index), count: 1000))
            store.keep(file, byteCount: 1000, key: "key-\(index)", ifRange: "\"e\(index)\"", total: 5000)
            file.discard()
        }
        let bodies = NetworkFixtures.files(in: URL(fileURLWithPath: directory)).filter { $0.hasSuffix(".body") }
        XCTAssertEqual(bodies.count, PartialDownloads.maxCount)
        // The oldest went first; the newest is there and reads back.
        XCTAssertNil(store.partial(for: "key-0"))
        let newest = try XCTUnwrap(store.partial(for: "key-\(PartialDownloads.maxCount + 3)"))
        XCTAssertEqual(newest.record.ifRange, "\"e\(PartialDownloads.maxCount + 3)\"")
        XCTAssertEqual(newest.record.byteCount, 1000)
        // Stale ones go at the next trim.
        store.trim(now: Date().addingTimeInterval(PartialDownloads.maxAge + 60))
        XCTAssertEqual(NetworkFixtures.files(in: URL(fileURLWithPath: directory)), [])
    }

    func testContentRangeParsing() {
        XCTAssertEqual(
            PartialDownloads.contentRange("bytes 10-99/100").map { [$0.first, $0.last, $0.total] }, [10, 99, 100])
        for bad in [
            "bytes 10-99/*", "bytes */100", "bytes 10-9/100", "bytes 10-100/100", "items 1-2/3", "bytes 1-2",
            "bytes -1-2/3", "bytes 1-2/3/4"
        ] {
            XCTAssertNil(PartialDownloads.contentRange(bad), bad)
        }
    }
}
