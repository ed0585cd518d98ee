import Foundation
import XCTest

@testable import VipsHTTP
@testable import VipsServe

/// Coalescing, the queue bound and early leaves, on the table alone.
final class RenderTableTests: XCTestCase {
    /// A render's work that waits until the test opens it, or until it is cancelled.
    final class Gate: @unchecked Sendable {
        private let lock = NSLock()
        private var continuation: CheckedContinuation<Void, Never>?
        private var opened = false
        let started = XCTestExpectation(description: "work started")
        let cancelled = XCTestExpectation(description: "work cancelled")

        func work(_ outcome: RenderTable.Outcome) -> @Sendable () async -> RenderTable.Outcome {
            { [self] in
                started.fulfill()
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let resumeNow = lock.withLock { () -> Bool in
                            if opened { return true }
                            self.continuation = continuation
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                } onCancel: { [self] in
                    cancelled.fulfill()
                    open()
                }
                return outcome
            }
        }

        func open() {
            let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
                opened = true
                defer { continuation = nil }
                return continuation
            }
            waiting?.resume()
        }
    }

    /// Records the outcomes delivered to waiters.
    final class Deliveries: @unchecked Sendable {
        private let lock = NSLock()
        private var items: [(String, Bool)] = []
        let arrived: XCTestExpectation

        init(_ count: Int) {
            arrived = XCTestExpectation(description: "\(count) deliveries")
            arrived.expectedFulfillmentCount = count
        }

        func deliver(_ name: String) -> RenderTable.Delivery {
            { [self] outcome, joined in
                let text: String
                switch outcome {
                case .response(_, let tier): text = "\(name):\(tier)"
                case .failure(let status): text = "\(name):\(status.code)"
                }
                lock.withLock { items.append((text, joined)) }
                arrived.fulfill()
            }
        }

        var all: [String] { lock.withLock { items.map { $0.0 + ($0.1 ? "+joined" : "") }.sorted() } }
    }

    func testIdenticalRequestsShareOneRenderAndAllGetItsOutcome() async throws {
        let table = RenderTable(limit: 4)
        let gate = Gate()
        let deliveries = Deliveries(3)
        let response = try XCTUnwrap(HTTPResponse.text(200, "made"))
        for name in ["a", "b", "c"] {
            let join = table.join(
                "key", deliver: deliveries.deliver(name), work: gate.work(.response(response, tier: "miss")))
            if name == "a" {
                guard case .started = join else { return XCTFail("the first request starts the render") }
            } else {
                guard case .joined = join else { return XCTFail("\(name) joins it") }
            }
        }
        await fulfillment(of: [gate.started], timeout: 30)
        XCTAssertEqual(table.count, 1, "one render for three requests")
        gate.open()
        await fulfillment(of: [deliveries.arrived], timeout: 30)
        XCTAssertEqual(deliveries.all, ["a:miss", "b:miss+joined", "c:miss+joined"])
        XCTAssertEqual(table.count, 0)
    }

    func testAFullTableRefusesAnotherKeyButAdmitsJoiners() async throws {
        let table = RenderTable(limit: 1)
        let gate = Gate()
        let deliveries = Deliveries(2)
        let response = try XCTUnwrap(HTTPResponse.text(200, "made"))
        _ = table.join("one", deliver: deliveries.deliver("a"), work: gate.work(.response(response, tier: "miss")))
        XCTAssertFalse(table.hasRoom(for: "two"))
        XCTAssertTrue(table.hasRoom(for: "one"), "joining costs no room")
        guard case .full = table.join("two", deliver: deliveries.deliver("x"), work: gate.work(.failure(.noRoute)))
        else { return XCTFail("a second key is refused") }
        guard case .joined = table.join("one", deliver: deliveries.deliver("b"), work: gate.work(.failure(.noRoute)))
        else { return XCTFail("a joiner is admitted") }
        gate.open()
        await fulfillment(of: [deliveries.arrived], timeout: 30)
        XCTAssertEqual(deliveries.all, ["a:miss", "b:miss+joined"], "the refused request got nothing from the table")
    }

    func testTheLastWaiterLeavingCancelsTheRender() async throws {
        let table = RenderTable(limit: 4)
        let gate = Gate()
        let deliveries = Deliveries(2)
        let response = try XCTUnwrap(HTTPResponse.text(200, "made"))
        guard
            case .started(let first) = table.join(
                "key", deliver: deliveries.deliver("a"), work: gate.work(.response(response, tier: "miss")))
        else { return XCTFail() }
        guard
            case .joined(let second) = table.join(
                "key", deliver: deliveries.deliver("b"), work: gate.work(.failure(.noRoute)))
        else { return XCTFail() }
        await fulfillment(of: [gate.started], timeout: 30)
        XCTAssertTrue(table.leave("key", waiter: first, with: .failure(ErrorStatus(499, "gone"))))
        XCTAssertFalse(table.leave("key", waiter: first, with: .failure(ErrorStatus(499, "gone"))), "once only")
        XCTAssertEqual(table.count, 1, "another request still waits: the render goes on")
        XCTAssertTrue(table.leave("key", waiter: second, with: .failure(.timedOut)))
        await fulfillment(of: [gate.cancelled, deliveries.arrived], timeout: 30)
        XCTAssertEqual(deliveries.all, ["a:499", "b:504+joined"])
        try await Self.waitUntilEmpty(table)
    }

    func testCancellingEverythingAnswersEveryWaiter() async throws {
        let table = RenderTable(limit: 4)
        let gates = [Gate(), Gate()]
        let deliveries = Deliveries(3)
        _ = table.join("one", deliver: deliveries.deliver("a"), work: gates[0].work(.failure(.noRoute)))
        _ = table.join("one", deliver: deliveries.deliver("b"), work: gates[0].work(.failure(.noRoute)))
        _ = table.join("two", deliver: deliveries.deliver("c"), work: gates[1].work(.failure(.noRoute)))
        await fulfillment(of: [gates[0].started, gates[1].started], timeout: 30)
        table.cancelAll(with: .failure(.draining))
        await fulfillment(of: [deliveries.arrived, gates[0].cancelled, gates[1].cancelled], timeout: 30)
        XCTAssertEqual(deliveries.all, ["a:503", "b:503+joined", "c:503"])
        try await Self.waitUntilEmpty(table)
    }

    /// A render whose every waiter left keeps its place until its work has
    /// returned: with a limit of 1, a request for another image is refused
    /// while the abandoned work still runs, and admitted once it has stopped.
    /// (Before, the place was freed at the last waiter's timeout, so work that
    /// could not stop at once piled up beyond the limit.)
    func testAnAbandonedRenderHoldsItsPlaceUntilItsWorkReturns() async throws {
        let table = RenderTable(limit: 1)
        let stubborn = StubbornWork()
        let deliveries = Deliveries(1)
        guard case .started(let id) = table.join("slow", deliver: deliveries.deliver("a"), work: stubborn.work)
        else { return XCTFail("the first render starts") }
        await fulfillment(of: [stubborn.started], timeout: 30)
        XCTAssertTrue(table.leave("slow", waiter: id, with: .failure(.timedOut)))
        await fulfillment(of: [deliveries.arrived, stubborn.cancelled], timeout: 30)
        XCTAssertEqual(deliveries.all, ["a:504"])
        XCTAssertEqual(table.count, 1, "the abandoned work still holds its place")
        XCTAssertEqual(table.stoppingCount, 1)
        XCTAssertFalse(table.hasRoom(for: "other"))
        guard case .full = table.join("other", deliver: { _, _ in }, work: { .failure(.noRoute) }) else {
            return XCTFail("no room while the abandoned work runs")
        }
        XCTAssertFalse(table.hasRoom(for: "slow"), "not even for its own key: the stopping render cannot be joined")
        stubborn.finish()
        try await Self.waitUntilEmpty(table)
        XCTAssertTrue(table.hasRoom(for: "other"))
        let second = Deliveries(1)
        guard case .started = table.join("other", deliver: second.deliver("b"), work: { .failure(.noRoute) }) else {
            return XCTFail("room again once the work returned")
        }
        await fulfillment(of: [second.arrived], timeout: 30)
        XCTAssertEqual(second.all, ["b:404"])
    }

    /// Work that notices its cancellation but only returns when told (an
    /// encoder call that cannot be interrupted).
    final class StubbornWork: @unchecked Sendable {
        private let lock = NSLock()
        private var continuation: CheckedContinuation<Void, Never>?
        private var finished = false
        let started = XCTestExpectation(description: "work started")
        let cancelled = XCTestExpectation(description: "work cancelled")

        var work: @Sendable () async -> RenderTable.Outcome {
            { [self] in
                started.fulfill()
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let now = lock.withLock { () -> Bool in
                            if finished { return true }
                            self.continuation = continuation
                            return false
                        }
                        if now { continuation.resume() }
                    }
                } onCancel: { [self] in
                    cancelled.fulfill()
                }
                return .failure(.noRoute)
            }
        }

        func finish() {
            let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
                finished = true
                defer { continuation = nil }
                return continuation
            }
            waiting?.resume()
        }
    }

    /// Waits until every render, stopping ones included, has returned (30 s at most).
    static func waitUntilEmpty(_ table: RenderTable) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while table.count > 0 {
            guard ContinuousClock.now < deadline else { return XCTFail("renders still in flight: \(table.count)") }
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}
