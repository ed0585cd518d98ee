import Foundation
import TestSupport
import VipsCore
import XCTest

@testable import VipsHTTP
@testable import VipsServe

/// The HTTP layer on its own: a real libmicrohttpd daemon on 127.0.0.1, a
/// scripted handler, real sockets. Deferred requests are held by the test and
/// answered from other threads; every wait is on an event.
final class HTTPServerTests: XCTestCase {
    /// Answers `/now` at once and defers `/later` until the test answers it.
    final class ScriptedHandler: HTTPHandler, @unchecked Sendable {
        private let lock = NSLock()
        private var replies: [DeferredReply] = []
        private var records: [HTTPCompletion] = []
        /// Fulfilled once per deferred request.
        let deferred: XCTestExpectation
        /// Fulfilled once per client that hangs up while deferred.
        let hungUp: XCTestExpectation
        /// Fulfilled once per completed request.
        let completions: XCTestExpectation

        init(deferred: Int = 1, hungUp: Int = 1, completions: Int = 1) {
            self.deferred = XCTestExpectation(description: "deferred")
            self.deferred.expectedFulfillmentCount = max(1, deferred)
            self.hungUp = XCTestExpectation(description: "hung up")
            self.hungUp.expectedFulfillmentCount = max(1, hungUp)
            self.completions = XCTestExpectation(description: "completed")
            self.completions.expectedFulfillmentCount = max(1, completions)
        }

        func handle(_ request: borrowing HTTPRequest) -> HTTPHandling {
            guard request.path == "/later" else {
                return .respond(HTTPResponse.text(200, "now"), note: "now")
            }
            let reply = DeferredReply()
            return .later { [self] in
                lock.withLock { replies.append(reply) }
                deferred.fulfill()
                return await reply.answer { [self] in hungUp.fulfill() }
            }
        }

        func completed(_ record: HTTPCompletion) {
            lock.withLock { records.append(record) }
            completions.fulfill()
        }

        func serverMessage(_ text: String) {}

        var pending: [DeferredReply] { lock.withLock { replies } }
        var completed: [HTTPCompletion] { lock.withLock { records } }
    }

    /// A deferred request's answer, sent by the test from any thread: the
    /// server's task for the request waits for it (the first `send` counts).
    final class DeferredReply: Sendable {
        private let state = LockedState<(answer: HTTPAnswer?, waiting: CheckedContinuation<HTTPAnswer, Never>?)>(
            (nil, nil))

        func send(_ response: HTTPResponse?, note: String? = nil) {
            let waiting = state.withLock { state -> CheckedContinuation<HTTPAnswer, Never>? in
                guard state.answer == nil else { return nil }
                state.answer = HTTPAnswer(response, note: note)
                defer { state.waiting = nil }
                return state.waiting
            }
            waiting?.resume(returning: HTTPAnswer(response, note: note))
        }

        /// Waits for `send`; `cancelled` is called when the server cancels the task (the client hung up).
        func answer(onCancel cancelled: @escaping @Sendable () -> Void) async -> HTTPAnswer {
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let now = state.withLock { state -> HTTPAnswer? in
                        if let answer = state.answer { return answer }
                        state.waiting = continuation
                        return nil
                    }
                    if let now { continuation.resume(returning: now) }
                }
            } onCancel: {
                cancelled()
            }
        }
    }

    /// Stopped and released in `tearDown` (XCTest keeps what a teardown block captures until the run ends).
    private var servers: [HTTPServer] = []

    override func tearDown() {
        for server in servers { server.stop() }
        servers = []
    }

    private func makeServer(_ handler: ScriptedHandler, perIP: Int = 0, maxConnections: Int = 64) throws -> HTTPServer {
        let server = try HTTPServer(
            configuration: HTTPServer.Configuration(
                address: "127.0.0.1", port: 0, maxConnections: maxConnections, maxConnectionsPerIP: perIP,
                connectionTimeoutSeconds: 30, connectionMemoryBytes: 32 * 1024, threads: 1, listenBacklog: 64),
            handler: handler)
        servers.append(server)
        return server
    }

    func testADeferredRequestIsAnsweredFromAnotherThreadWhileOthersAreServed() async throws {
        let handler = ScriptedHandler(completions: 2)
        let server = try makeServer(handler)
        XCTAssertGreaterThan(server.port, 0, "port 0: the kernel chose one")
        let slow = try TestConnection(port: server.port)
        try slow.sendRequest("/later")
        await fulfillment(of: [handler.deferred], timeout: 30)
        // The network thread is free while the request is suspended.
        let other = try TestConnection(port: server.port)
        XCTAssertEqual(try other.request("/now").text, "now\n")
        // "/now" stays counted until libmicrohttpd's completion call, which may follow its answer.
        let deadline = Date().addingTimeInterval(30)
        while server.activeRequests != 1, Date() < deadline { await Task.yield() }
        XCTAssertEqual(server.activeRequests, 1, "the suspended request is still active")
        let reply = try XCTUnwrap(handler.pending.first)
        Thread.detachNewThread {
            reply.send(HTTPResponse.text(200, "later")!, note: "miss")
            reply.send(HTTPResponse.text(500, "second answer, ignored")!)
        }
        let response = try slow.readResponse()
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.text, "later\n")
        // Keep-alive: the same connection serves the next request.
        XCTAssertEqual(try slow.request("/now").status, 200)
        await fulfillment(of: [handler.completions], timeout: 30)
        let idle = await server.waitUntilIdle(timeout: .seconds(30))
        XCTAssertTrue(idle)
        let record = try XCTUnwrap(handler.completed.first { $0.target == "/later" })
        XCTAssertEqual(record.status, 200)
        XCTAssertEqual(record.note, "miss")
        XCTAssertFalse(record.clientGone)
    }

    func testAClientHangingUpWhileSuspendedIsNoticedAndItsConnectionClosed() async throws {
        try await assertAHangUpWhileSuspendedIsNoticed { $0.reset() }
    }

    func testAnOrderlyCloseWhileSuspendedIsAHangUpToo() async throws {
        try await assertAHangUpWhileSuspendedIsNoticed { $0.close() }
    }

    /// A client that leaves (`leave`: a reset or an orderly close) while its
    /// request is suspended is noticed, and nothing is sent to it.
    private func assertAHangUpWhileSuspendedIsNoticed(
        _ leave: (TestConnection) -> Void, line: UInt = #line
    ) async throws {
        let handler = ScriptedHandler()
        let server = try makeServer(handler)
        let client = try TestConnection(port: server.port)
        try client.sendRequest("/later")
        await fulfillment(of: [handler.deferred], timeout: 30)
        leave(client)
        // libmicrohttpd does not poll a suspended connection: the hang-up watcher saw it.
        await fulfillment(of: [handler.hungUp], timeout: 30)
        try XCTUnwrap(handler.pending.first).send(HTTPResponse.text(200, "too late")!)
        await fulfillment(of: [handler.completions], timeout: 30)
        let record = try XCTUnwrap(handler.completed.first)
        XCTAssertTrue(record.clientGone, line: line)
        XCTAssertEqual(record.status, 0, "nothing was sent to a client that hung up", line: line)
    }

    func testQuiescingRefusesNewConnectionsAndWaitsForRequestsInFlight() async throws {
        let handler = ScriptedHandler(completions: 2)
        let server = try makeServer(handler)
        let idle = try TestConnection(port: server.port)
        XCTAssertEqual(try idle.request("/now").status, 200)
        let slow = try TestConnection(port: server.port)
        try slow.sendRequest("/later")
        await fulfillment(of: [handler.deferred], timeout: 30)
        server.quiesce()
        XCTAssertThrowsError(try TestConnection(port: server.port), "no new connection after quiesce")
        let idleEarly = await server.waitUntilIdle(timeout: .milliseconds(50))
        XCTAssertFalse(idleEarly, "one request is in flight")
        // An open keep-alive connection is still served.
        XCTAssertEqual(try idle.request("/now").status, 200)
        server.answerSuspended { HTTPResponse.text(503, "draining") }
        XCTAssertEqual(try slow.readResponse().status, 503)
        let idleLater = await server.waitUntilIdle(timeout: .seconds(30))
        XCTAssertTrue(idleLater)
        server.stop()
        XCTAssertTrue(try idle.serverClosed(), "stop closes idle connections")
    }

    func testPerAddressConnectionLimit() async throws {
        let handler = ScriptedHandler()
        let server = try makeServer(handler, perIP: 2)
        let first = try TestConnection(port: server.port)
        let second = try TestConnection(port: server.port)
        XCTAssertEqual(try first.request("/now").status, 200)
        XCTAssertEqual(try second.request("/now").status, 200)
        let third = try TestConnection(port: server.port)
        try? third.sendRequest("/now")
        XCTAssertTrue(try third.serverClosed(), "a third connection from one address is closed unanswered")
        first.close()
        // The slot is free again once the server has seen the close.
        var answered = false
        for _ in 0..<200 where !answered {
            let again = try TestConnection(port: server.port)
            answered = (try? again.request("/now").status) == 200
        }
        XCTAssertTrue(answered)
    }
}
