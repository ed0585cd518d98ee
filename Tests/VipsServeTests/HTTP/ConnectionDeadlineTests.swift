import Foundation
import TestSupport
import VipsLoad
import XCTest

@testable import VipsHTTP
@testable import VipsServe

#if canImport(Glibc)
    import Glibc
#endif

/// Slowloris: clients that send their request a byte at a time. A real
/// libmicrohttpd daemon on 127.0.0.1, real sockets (bound to other loopback
/// source addresses where the per-address limit would get in the way);
/// every wait is on a socket or a condition, with a generous upper bound.
final class ConnectionDeadlineTests: XCTestCase {
    /// Defers `/later` until the test answers it; answers anything else at once.
    final class Handler: HTTPHandler, @unchecked Sendable {
        private let lock = NSLock()
        private var replies: [HTTPServerTests.DeferredReply] = []
        private var records: [HTTPCompletion] = []
        let deferred = XCTestExpectation(description: "deferred")

        func handle(_ request: borrowing HTTPRequest) -> HTTPHandling {
            guard request.path == "/later" else { return .respond(HTTPResponse.text(200, "now"), note: nil) }
            let reply = HTTPServerTests.DeferredReply()
            return .later { [self] in
                lock.withLock { replies.append(reply) }
                deferred.fulfill()
                return await reply.answer {}
            }
        }

        func completed(_ record: HTTPCompletion) { lock.withLock { records.append(record) } }
        func serverMessage(_ text: String) {}

        var pending: [HTTPServerTests.DeferredReply] { lock.withLock { replies } }
        var completed: [HTTPCompletion] { lock.withLock { records } }
    }

    /// A raw client socket, bound to `source` before it connects, that can
    /// trickle bytes and tell when the server has closed the connection.
    final class Trickler {
        struct Failure: Error { let description: String }

        let fd: Int32

        init(port: UInt16, source: String = "127.0.0.1") throws {
            fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            var remote = local
            remote.sin_port = port.bigEndian
            remote.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            let connected = withUnsafePointer(to: &remote) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0, connected == 0 else {
                let code = errno
                Glibc.close(fd)
                throw Failure(description: "bind/connect from \(source): \(String(cString: strerror(code)))")
            }
        }

        deinit { Glibc.close(fd) }

        /// Sends `text`; false once the connection is gone.
        @discardableResult
        func send(_ text: String) -> Bool {
            let data = Array(text.utf8)
            return Glibc.send(fd, data, data.count, Int32(MSG_NOSIGNAL)) == data.count
        }

        /// Waits up to `milliseconds` for the server to close the
        /// connection: true when it has (the end of the stream, a reset),
        /// false when the time passed first. Bytes the server sends are
        /// collected in `received`.
        func waitForClose(milliseconds: Int32) -> Bool {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, milliseconds)
            guard ready > 0 else { return false }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if count > 0 {
                received += count
                return false
            }
            return count == 0 || errno == ECONNRESET
        }

        private(set) var received = 0

        /// Sends `bytes` one at a time, `interval` apart, until the server
        /// closes the connection (true) or `limit` passes (false).
        func trickle(_ bytes: String, every interval: Int32 = 200, limit: TimeInterval = 20) -> Bool {
            Self.trickle([(self, bytes)], every: interval, limit: limit)[0]
        }

        /// Each client's bytes, one byte to each every `interval`, until
        /// the server has closed them all or `limit` passes: which were closed.
        static func trickle(
            _ clients: [(Trickler, String)], every interval: Int32 = 200, limit: TimeInterval = 20
        ) -> [Bool] {
            let end = Date().addingTimeInterval(limit)
            var rest = clients.map { Array($0.1.utf8)[...] }
            var closed = [Bool](repeating: false, count: clients.count)
            while Date() < end, closed.contains(false) {
                let tick = Date().addingTimeInterval(Double(interval) / 1000)
                for index in clients.indices where !closed[index] {
                    if let byte = rest[index].popFirst(),
                        !clients[index].0.send(String(decoding: [byte], as: UTF8.self))
                    {
                        closed[index] = true
                    }
                }
                while Date() < tick, closed.contains(false) {
                    for index in clients.indices where !closed[index] {
                        if clients[index].0.waitForClose(milliseconds: 10) { closed[index] = true }
                    }
                }
            }
            return closed
        }
    }

    private var servers: [HTTPServer] = []

    override func tearDown() {
        for server in servers { server.stop() }
        servers = []
    }

    private func makeServer(
        _ handler: Handler, headerTimeout: Duration, connectionTimeout: Int = 30, maxConnections: Int = 64,
        perIP: Int = 0, threads: Int = 1
    ) throws -> HTTPServer {
        let server = try HTTPServer(
            configuration: HTTPServer.Configuration(
                address: "127.0.0.1", port: 0, maxConnections: maxConnections, maxConnectionsPerIP: perIP,
                connectionTimeoutSeconds: connectionTimeout, connectionMemoryBytes: 32 * 1024, threads: threads,
                listenBacklog: 128, headerTimeout: headerTimeout),
            handler: handler)
        servers.append(server)
        return server
    }

    /// A long header that never ends, for tricklers.
    private static let endlessHeader = String(repeating: "a", count: 1000)

    /// Waits (polling, up to 30 s) until `condition` holds.
    private func eventually(_ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while !condition(), Date() < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        return condition()
    }

    func testARequestWhoseHeaderTricklesIsClosedAtTheHeaderDeadline() async throws {
        let handler = Handler()
        let server = try makeServer(handler, headerTimeout: .seconds(1))
        let started = Date()
        // One trickles its header fields, the other its request line: every byte
        // restarts libmicrohttpd's idle timer (30 s here), not the header deadline.
        let fields = try Trickler(port: server.port)
        let line = try Trickler(port: server.port)
        XCTAssertTrue(fields.send("GET /now HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "))
        let results = Trickler.trickle([
            (fields, Self.endlessHeader), (line, "GET /now HTTP/1.1\r\nX-Slow: " + Self.endlessHeader)
        ])
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(results, [true, true], "both closed within 20 s")
        XCTAssertGreaterThanOrEqual(elapsed, 0.95, "not before the deadline")
        XCTAssertEqual(fields.received + line.received, 0, "closed without an answer")
        // libmicrohttpd closed them and called the completion and close notifications.
        let cleaned = await eventually { server.openConnections == 0 && server.activeRequests == 0 }
        XCTAssertTrue(cleaned, "\(server.openConnections) connections, \(server.activeRequests) requests left")
        XCTAssertEqual(server.deadlines.counts, ConnectionDeadlines.Counts(headerTimeouts: 2, evictions: 0))
        let record = try XCTUnwrap(handler.completed.first, "the request whose line arrived is completed")
        XCTAssertEqual(record.status, 408)
        XCTAssertFalse(record.clientGone)
        // A prompt client is served as ever.
        XCTAssertEqual(try TestConnection(port: server.port).request("/now").status, 200)
    }

    func testAKeepAliveConnectionIdleBetweenRequestsIsGovernedByTheConnectionTimeout() async throws {
        let handler = Handler()
        let server = try makeServer(handler, headerTimeout: .seconds(1), connectionTimeout: 3)
        let client = try Trickler(port: server.port)
        XCTAssertTrue(client.send("GET /now HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        XCTAssertFalse(client.waitForClose(milliseconds: 30_000))
        XCTAssertGreaterThan(client.received, 0, "answered")
        let answered = Date()
        // Idle: no header has begun, so the header deadline (1 s) must not close
        // it; libmicrohttpd's idle timer does, at 3 s.
        var closed = false
        while !closed, Date().timeIntervalSince(answered) < 20 { closed = client.waitForClose(milliseconds: 100) }
        let idle = Date().timeIntervalSince(answered)
        XCTAssertTrue(closed, "closed by the idle timer")
        XCTAssertGreaterThanOrEqual(idle, 2.5, "idle up to --connection-timeout, not cut at the header deadline")
        XCTAssertEqual(server.deadlines.counts.headerTimeouts, 0)
    }

    func testATrickledRequestOnAKeepAliveConnectionIsClosedAtItsDeadline() async throws {
        let handler = Handler()
        let server = try makeServer(handler, headerTimeout: .seconds(1), connectionTimeout: 2)
        let client = try Trickler(port: server.port)
        XCTAssertTrue(client.send("GET /now HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        XCTAssertFalse(client.waitForClose(milliseconds: 30_000))
        XCTAssertGreaterThan(client.received, 0, "answered")
        let answered = Date()
        // The next request trickles: connection timeout + header timeout (3 s) after the answer, it is closed.
        XCTAssertTrue(client.trickle("GET /now HTTP/1.1\r\nX-Slow: " + Self.endlessHeader), "closed within 20 s")
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(answered), 2.5)
        XCTAssertEqual(server.deadlines.counts.headerTimeouts, 1)
    }

    func testANewConnectionIsServedWhileTricklersFillTheTable() async throws {
        try await assertANewConnectionIsServedWhileTricklersFillTheTable(threads: 1)
    }

    func testANewConnectionIsServedWhileTricklersFillTheTableOfTwoNetworkThreads() async throws {
        try await assertANewConnectionIsServedWhileTricklersFillTheTable(threads: 2)
    }

    /// 41 connections to a table of 32 (`threads` network threads sharing it):
    /// a busy one, then 40 slow ones; a new client is still served at once.
    private func assertANewConnectionIsServedWhileTricklersFillTheTable(threads: Int) async throws {
        let handler = Handler()
        // A header deadline far away: only eviction can make room in time.
        let server = try makeServer(
            handler, headerTimeout: .seconds(120), maxConnections: 32, perIP: 8, threads: threads)
        // The oldest connection has a request being handled: never evicted.
        let busy = try TestConnection(port: server.port)
        try busy.sendRequest("/later")
        await fulfillment(of: [handler.deferred], timeout: 30)
        // 40 slow clients from five addresses (8 each, the per-address limit).
        var tricklers: [Trickler] = []
        for index in 0..<40 {
            let client = try Trickler(port: server.port, source: "127.0.0.\(2 + index / 8)")
            client.send("GET /now HTTP/1.1\r\nX-Slow: a")
            tricklers.append(client)
        }
        // Full: at the eviction threshold (29 of 32), or every connection accepted
        // (with two threads, one may take more than its share of the accepts).
        let full = await eventually {
            server.openConnections >= 29
                || server.deadlines.openConnections + server.deadlines.counts.evictions >= 41
        }
        XCTAssertTrue(full, "the table filled: \(server.openConnections) open")
        for client in tricklers { client.send("a") }
        let asked = Date()
        let response = try TestConnection(port: server.port).request("/health")
        XCTAssertEqual(response.status, 200)
        XCTAssertLessThan(Date().timeIntervalSince(asked), 10, "served at once, not when a slot happened to free")
        XCTAssertGreaterThan(server.deadlines.counts.evictions, 0)
        XCTAssertEqual(server.deadlines.counts.headerTimeouts, 0)
        // The busy request was not evicted: its answer still arrives.
        try XCTUnwrap(handler.pending.first).send(HTTPResponse.text(200, "later")!)
        XCTAssertEqual(try busy.readResponse().text, "later\n")
        withExtendedLifetime(tricklers) {}
    }

    func testTheImageServerClosesATricklerAndCountsItInMetrics() async throws {
        var configuration = ImageServer.Configuration()
        configuration.port = 0
        configuration.headerTimeout = .seconds(1)
        let server = try ImageServer(pipeline: ImagePipeline(), configuration: configuration)
        let client = try Trickler(port: server.port)
        client.send("GET /health HTTP/1.1\r\nX-Slow: ")
        XCTAssertTrue(client.trickle(Self.endlessHeader), "closed within 20 s")
        let metrics = try TestConnection(port: server.port).request("/metrics").text
        await server.shutdown()
        let lines = Set(metrics.split(separator: "\n").map(String.init))
        XCTAssertTrue(lines.contains("vipsload_http_header_timeouts_total 1"), metrics)
        XCTAssertTrue(lines.contains("vipsload_http_connections_evicted_total 0"), metrics)
        XCTAssertTrue(lines.contains(#"vipsload_http_requests_total{code="408"} 1"#), "logged as 408: \(metrics)")
    }
}
