import Foundation
import TestSupport
import VipsLoad
import XCTest

/// Retries: transient failures (5xx, 429 with Retry-After, dropped
/// connections) are tried again with backoff when enabled; 4xx never are.
final class NetworkRetryTests: NetworkTestCase {
    private let quickRetries = HTTPRetryPolicy(maxRetries: 3, initialDelay: 0.05, maxDelay: 5)

    func testServiceUnavailableTwiceThenSuccess() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        server.route("/flaky.jpg") { [server] _ in
            server!.requestCount("/flaky.jpg") <= 2 ? .status(503) : .ok(jpeg)
        }
        let loader = makeLoader { $0.retryPolicy = self.quickRetries }
        let data = try await load(loader, "/flaky.jpg")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        XCTAssertEqual(server.requestCount("/flaky.jpg"), 3)
        XCTAssertEqual(loader.metrics.retries, 2)
        XCTAssertEqual(loader.metrics.httpRequests, 3)
    }

    func testTooManyRequestsHonoursRetryAfter() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        server.route("/limited.jpg") { [server] _ in
            guard server!.requestCount("/limited.jpg") > 1 else {
                var response = TestHTTPServer.Response.status(429)
                response.headers.append(("Retry-After", "1"))
                return response
            }
            return .ok(jpeg)
        }
        server.route("/limited-long.jpg") { _ in
            var response = TestHTTPServer.Response.status(429)
            response.headers.append(("Retry-After", "3600"))
            return response
        }
        let loader = makeLoader { $0.retryPolicy = self.quickRetries }
        let data = try await load(loader, "/limited.jpg")
        XCTAssertEqual(data.byteCount, jpeg.count)
        XCTAssertEqual(server.requestCount("/limited.jpg"), 2)
        // Asked to wait longer than the policy's longest delay: no retry, the status is reported.
        await assertLoadFails(loader, "/limited-long.jpg", kind: .httpStatus, containing: "HTTP 429")
        XCTAssertEqual(server.requestCount("/limited-long.jpg"), 1)
    }

    func testClientErrorsAreNeverRetried() async throws {
        server.route("/missing.jpg", .status(404))
        server.route("/forbidden.jpg", .status(403))
        let loader = makeLoader { $0.retryPolicy = self.quickRetries }
        await assertLoadFails(loader, "/missing.jpg", kind: .httpStatus, containing: "HTTP 404")
        await assertLoadFails(loader, "/forbidden.jpg", kind: .httpStatus, containing: "HTTP 403")
        XCTAssertEqual(server.requestCount("/missing.jpg"), 1)
        XCTAssertEqual(server.requestCount("/forbidden.jpg"), 1)
        XCTAssertEqual(loader.metrics.retries, 0)
    }

    func testAConnectionDroppedMidBodyIsRetried() async throws {
        let jpeg = try NetworkFixtures.jpeg()
        server.route("/dropped.jpg") { [server] _ in
            var response = TestHTTPServer.Response.ok(jpeg)
            if server!.requestCount("/dropped.jpg") == 1 {
                response.cutAfter = jpeg.count / 2
                response.ending = .reset
            }
            return response
        }
        let cache = try makeCache()
        let loader = makeLoader(cache: cache) { $0.retryPolicy = self.quickRetries }
        let data = try await load(loader, "/dropped.jpg")
        XCTAssertEqual(NetworkFixtures.contents(of: data), jpeg)
        XCTAssertEqual(server.requestCount("/dropped.jpg"), 2)
        XCTAssertEqual(leftoverFiles(), [])
    }

    func testRetryingIsOffByDefault() async throws {
        server.route("/down.jpg", .status(503))
        let loader = makeLoader()
        await assertLoadFails(loader, "/down.jpg", kind: .httpStatus, containing: "HTTP 503")
        XCTAssertEqual(server.requestCount("/down.jpg"), 1)
    }

    func testGivesUpAfterMaxRetries() async throws {
        server.route("/broken.jpg", .status(500))
        let loader = makeLoader { $0.retryPolicy = self.quickRetries }
        await assertLoadFails(loader, "/broken.jpg", kind: .httpStatus, containing: "HTTP 500")
        XCTAssertEqual(server.requestCount("/broken.jpg"), 4)
        XCTAssertEqual(loader.metrics.failures, 1)
    }

    func testCancellingDuringBackoffStopsRetrying() async throws {
        server.route("/backoff.jpg", .status(503))
        let loader = makeLoader { $0.retryPolicy = HTTPRetryPolicy(maxRetries: 5, initialDelay: 60, maxDelay: 60) }
        let url = server.url("/backoff.jpg")
        let task = Task { try await loader.loadData(for: .url(url)) }
        XCTAssertTrue(server.wait { _ in loader.metrics.retries == 1 })
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("cancelled")
        } catch {
            XCTAssertEqual((error as? VipsError)?.kind, .cancelled, "\(error)")
        }
        XCTAssertEqual(server.requestCount("/backoff.jpg"), 1)
    }
}
