import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Per-request header fields, the `imageID` cache-key override and the
/// pipeline's request modifier, seen at the loopback server.
final class RequestHeadersTests: NetworkTestCase {
    private func makePipeline(
        cache: DiskCache? = nil, memory: Bool = true,
        _ adjust: (inout ImagePipeline.Configuration) -> Void = { _ in }
    ) -> ImagePipeline {
        var http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        http.headers["X-Pipeline"] = "pipeline"
        http.headers["X-Shared"] = "pipeline"
        var configuration = ImagePipeline.Configuration(
            decodeConcurrency: 2,
            memoryCache: memory ? MemoryCache(costLimit: 64 << 20) : nil,
            dataCache: cache, http: http)
        adjust(&configuration)
        return ImagePipeline(configuration: configuration)
    }

    private func image(seed: Int = 61) throws -> Data { try NetworkFixtures.jpeg(width: 80, height: 40, seed: seed) }

    func testRequestHeadersAreMergedOverThePipelinesAndLeaveTheCacheKeyAlone() async throws {
        server.route("/headers.jpg", .ok(try image()))
        let pipeline = makePipeline()
        var request = ImageRequest(url: server.url("/headers.jpg"))
        request.httpHeaders = ["X-Shared": "request", "Authorization": "Bearer one"]
        _ = try await pipeline.image(for: request)
        let sent = try XCTUnwrap(server.requests("/headers.jpg").first)
        XCTAssertEqual(sent.header("X-Pipeline"), "pipeline")
        XCTAssertEqual(sent.header("X-Shared"), "request")
        XCTAssertEqual(sent.header("Authorization"), "Bearer one")
        XCTAssertEqual(request.cacheKey, ImageRequest(url: server.url("/headers.jpg")).cacheKey)

        // Another token, same image: a memory hit, no request.
        request.httpHeaders["Authorization"] = "Bearer two"
        _ = try await pipeline.image(for: request)
        XCTAssertEqual(server.requestCount("/headers.jpg"), 1)
        XCTAssertEqual(pipeline.metrics.memoryHits, 1)
    }

    func testAnImageIDOverridesTheCacheKeyInMemoryAndOnDisk() async throws {
        server.route("/signed.jpg", .ok(try image(), headers: [("Cache-Control", "max-age=3600")]))
        func signed(_ signature: String) -> ImageRequest {
            var request = ImageRequest(
                url: URL(string: server.url("/signed.jpg").absoluteString + "?sig=" + signature)!,
                size: .maxPixelSize(40))
            request.imageID = "signed.jpg"
            return request
        }
        XCTAssertEqual(signed("a").cacheKey, signed("b").cacheKey)
        XCTAssertNotEqual(
            signed("a").cacheKey, ImageRequest(url: server.url("/signed.jpg"), size: .maxPixelSize(40)).cacheKey)

        let pipeline = makePipeline(cache: try makeCache())
        _ = try await pipeline.image(for: signed("a"))
        _ = try await pipeline.image(for: signed("b"))
        XCTAssertEqual(server.requestCount("/signed.jpg"), 1)
        XCTAssertEqual(pipeline.metrics.memoryHits, 1)

        // A new pipeline: the data cache answers for a third signature.
        let next = makePipeline(cache: try makeCache(), memory: false)
        _ = try await next.image(for: signed("c"))
        XCTAssertEqual(server.requestCount("/signed.jpg"), 1)
        XCTAssertEqual(next.metrics.diskHits, 1)
    }

    func testTheModifierIsCalledOncePerDownloadNotPerRetryAndMayRewriteTheURL() async throws {
        let jpeg = try image()
        let calls = LockedState(0)
        server.route("/flaky.jpg") { _ in
            calls.withLock {
                $0 += 1; return $0
            } == 1 ? .status(503) : .ok(jpeg)
        }
        server.route("/rewritten.jpg", .ok(jpeg))
        let modifierCalls = LockedState(0)
        let pipeline = makePipeline { configuration in
            configuration.http.retryPolicy = HTTPRetryPolicy(maxRetries: 2, initialDelay: 0.01)
            configuration.requestModifier = { request in
                modifierCalls.withLock { $0 += 1 }
                var request = request
                request.setValue("modified", forHTTPHeaderField: "X-Modifier")
                if request.url?.path == "/original.jpg" {
                    request.url = URL(
                        string: request.url!.absoluteString.replacingOccurrences(of: "original", with: "rewritten"))
                }
                return request
            }
        }
        _ = try await pipeline.image(for: ImageRequest(url: server.url("/flaky.jpg")))
        XCTAssertEqual(server.requestCount("/flaky.jpg"), 2, "one retry")
        XCTAssertEqual(modifierCalls.withLock { $0 }, 1, "called once for the download, not per retry")
        XCTAssertTrue(server.requests("/flaky.jpg").allSatisfy { $0.header("X-Modifier") == "modified" })

        _ = try await pipeline.image(for: ImageRequest(url: server.url("/original.jpg")))
        XCTAssertEqual(server.requestCount("/original.jpg"), 0)
        XCTAssertEqual(server.requestCount("/rewritten.jpg"), 1)
        XCTAssertEqual(server.requests("/rewritten.jpg").first?.header("X-Pipeline"), "pipeline")

        // Two requests sharing one download: one call.
        let gate = ServerGate()
        server.route("/shared.jpg") { _ in
            gate.pass()
            return .ok(jpeg)
        }
        let first = pipeline.imageTask(with: ImageRequest(url: server.url("/shared.jpg"), size: .maxPixelSize(20)))
        let second = pipeline.imageTask(with: ImageRequest(url: server.url("/shared.jpg"), size: .maxPixelSize(30)))
        await waitUntil("the shared download reached the server") { self.server.requestCount("/shared.jpg") == 1 }
        gate.open()
        _ = try await first.image
        _ = try await second.image
        XCTAssertEqual(server.requestCount("/shared.jpg"), 1)
        XCTAssertEqual(modifierCalls.withLock { $0 }, 3)
    }

    func testAModifierThatThrowsOrHangsFailsOnlyItsOwnRequest() async throws {
        server.route("/fine.jpg", .ok(try image()))
        let pipeline = makePipeline { configuration in
            configuration.http.requestTimeout = 1
            configuration.requestModifier = { request in
                switch request.url?.path {
                case "/refused.jpg":
                    throw VipsError(.permissionDenied, "no token for \(request.url?.path ?? "")")
                case "/foreign.jpg":
                    throw URLError(.userAuthenticationRequired)
                case "/hang.jpg":
                    // Ignores cancellation: only the timeout ends the wait.
                    while true { try? await Task.sleep(nanoseconds: 50_000_000) }
                default:
                    return request
                }
            }
        }
        let hang = pipeline.imageTask(with: ImageRequest(url: server.url("/hang.jpg")))
        let refused = await assertThrows(kind: .permissionDenied) {
            try await pipeline.image(for: ImageRequest(url: self.server.url("/refused.jpg")))
        }
        XCTAssertTrue(refused?.message.contains("no token") == true, "\(String(describing: refused))")
        await assertThrows(kind: .internal) {
            try await pipeline.image(for: ImageRequest(url: self.server.url("/foreign.jpg")))
        }
        let fine = try await pipeline.image(for: ImageRequest(url: server.url("/fine.jpg")))
        XCTAssertEqual([fine.width, fine.height], [80, 40])
        await assertThrows(kind: .timedOut) { try await hang.image }
        XCTAssertEqual(server.totalRequestCount, 1)
        XCTAssertEqual(pipeline.inFlight.dataLoads, 0)
    }
}
