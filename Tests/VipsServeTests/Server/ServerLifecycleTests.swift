import Foundation
import TestSupport
import VipsLoad
import XCTest

@testable import VipsServe

/// `ImageServer`'s own routes and its HTTP rules, with a real server on
/// 127.0.0.1 and real connections: `/health`, `/metrics`, methods, limits,
/// keep-alive, HEAD, and a graceful shutdown.
final class ServerLifecycleTests: XCTestCase {
    /// Shut down and released in `tearDown` (XCTest keeps what a teardown block captures until the run ends).
    private var servers: [ImageServer] = []

    override func tearDown() async throws {
        for server in servers { await server.shutdown() }
        servers = []
    }

    private func makeServer(
        _ change: (inout ImageServer.Configuration) -> Void = { _ in }
    ) throws -> (
        ImageServer, RecordingLog
    ) {
        let log = RecordingLog()
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.log = log
        change(&configuration)
        let server = try ImageServer(
            pipeline: ImagePipeline(configuration: ImagePipeline.Configuration(decodeConcurrency: 1)),
            configuration: configuration)
        servers.append(server)
        return (server, log)
    }

    func testHealthIsOKAndMetricsAreInThePrometheusFormat() throws {
        let (server, log) = try makeServer()
        let connection = try TestConnection(port: server.port)
        let health = try connection.request("/health")
        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(health.text, "ok\n")
        XCTAssertEqual(health.header("Cache-Control"), "no-store")
        let metrics = try connection.request("/metrics")
        XCTAssertEqual(metrics.status, 200)
        XCTAssertEqual(metrics.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8")
        let text = metrics.text
        for family in [
            "vipsload_http_requests_total", "vipsload_http_request_duration_seconds", "vipsload_decodes_total",
            "vipsload_coalesced_total", "vipsload_cancelled_total", "vipsload_cache_hits_total",
            "vipsload_queue_depth", "process_resident_memory_bytes"
        ] {
            XCTAssertTrue(text.contains("# TYPE \(family) "), "\(family) in\n\(text)")
        }
        XCTAssertTrue(text.contains("vipsload_http_requests_total{code=\"200\"} 1\n"), "the health request, counted")
        XCTAssertTrue(text.contains("vipsload_http_request_duration_seconds_bucket{le=\"+Inf\"} 1\n"))
        XCTAssertTrue(text.contains("vipsload_cache_hits_total{tier=\"memory\"} 0\n"))
        XCTAssertTrue(text.contains("vipsload_cache_hits_total{tier=\"disk\"} 0\n"))
        let rss = text.split(separator: "\n").first { $0.hasPrefix("process_resident_memory_bytes ") }
        XCTAssertGreaterThan(Int(rss?.split(separator: " ").last ?? "") ?? 0, 1 << 20)
        // Every sample line is "name{labels} value" or "name value"; every family has HELP and TYPE.
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            XCTAssertEqual(line.split(separator: " ").count, 2, "sample line '\(line)'")
        }
        // (The /metrics request's own entry comes once its response is sent, maybe after this line.)
        XCTAssertEqual(log.requests.first?.target, "/health", "one entry per finished request")
        XCTAssertEqual(log.requests.first?.status, 200)
        XCTAssertEqual(log.requests.first?.client, "127.0.0.1")
    }

    func testOnlyGetAndHeadAreServed() throws {
        let (server, _) = try makeServer()
        for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"] {
            let connection = try TestConnection(port: server.port)
            let response = try connection.request("/health", method: method, body: method == "POST" ? "x=1" : "")
            XCTAssertEqual(response.status, 405, method)
            XCTAssertEqual(response.header("Allow"), "GET, HEAD", method)
        }
    }

    func testHeadGetsTheHeaderFieldsWithoutTheBodyOnAKeptAliveConnection() throws {
        let (server, _) = try makeServer()
        let connection = try TestConnection(port: server.port)
        let head = try connection.request("/health", method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), "3")
        XCTAssertTrue(head.body.isEmpty)
        // Had a body followed, it would be read as the next status line.
        let get = try connection.request("/health")
        XCTAssertEqual(get.text, "ok\n")
        XCTAssertEqual(try connection.request("/health").status, 200, "a third request on the same connection")
    }

    func testAnOverlongURLGets414AndOverlongHeadersAreRefused() throws {
        let (server, _) = try makeServer { $0.maxURLLength = 1000 }
        let connection = try TestConnection(port: server.port)
        let long = try connection.request("/" + String(repeating: "a", count: 1001))
        XCTAssertEqual(long.status, 414)
        XCTAssertEqual(try connection.request("/health").status, 200, "the connection stays usable")
        let flooded = try TestConnection(port: server.port)
        let response = try flooded.request("/health", headers: ["X-Filler": String(repeating: "b", count: 40_000)])
        XCTAssertEqual(response.status, 431, "header fields beyond the connection's memory")
    }

    func testAPathThatIsNoImageURLIsRefusedWithoutNamingAPath() throws {
        let (server, _) = try makeServer()
        // Not /health or /metrics: read as a processing URL, whose last segment is no source.
        let response = try TestConnection(port: server.port).request("/no/such/thing")
        XCTAssertEqual(response.status, 404)
        XCTAssertFalse(response.text.contains("/"), "the body names no path: \(response.text)")
    }

    func testShutdownRefusesNewConnectionsAnswers503OnOpenOnesAndStops() async throws {
        let (server, log) = try makeServer()
        let open = try TestConnection(port: server.port)
        XCTAssertEqual(try open.request("/health").status, 200)
        let stopped = log.expectEvent("stopped")
        let draining = log.expectEvent("draining")
        let shutdown = Task { await server.shutdown() }
        await fulfillment(of: [draining], timeout: 30)
        XCTAssertTrue(server.isDraining)
        // Nothing in flight: the drain ends at once, and the server stops.
        await shutdown.value
        await fulfillment(of: [stopped], timeout: 30)
        XCTAssertThrowsError(try TestConnection(port: server.port), "stopped: nothing listens")
        XCTAssertTrue(try open.serverClosed())
    }

    func testAServerShutDownIsReleasedWithItsPipeline() async throws {
        weak var released: ImageServer?
        weak var pipeline: ImagePipeline?
        do {
            var configuration = ImageServer.Configuration()
            configuration.port = 0
            let made = try ImageServer(pipeline: ImagePipeline(), configuration: configuration)
            released = made
            pipeline = made.pipeline
            XCTAssertEqual(try TestConnection(port: made.port).request("/health").status, 200)
            await made.shutdown()
        }
        // Nothing holds the server once it is down: not its network thread, not its own task.
        let deadline = Date().addingTimeInterval(30)
        while released != nil || pipeline != nil, Date() < deadline { await Task.yield() }
        XCTAssertNil(released)
        XCTAssertNil(pipeline)
    }
}
