import Foundation
import Synchronization
import XCTest

@testable import VipsLoad

/// The engine's lanes on their own: the loading lane's queue and the
/// priority thread pool behind decodes and disk I/O.
final class PipelineWorkQueueTests: XCTestCase {
    /// Records the order in which items start.
    private final class Log: Sendable {
        private let started = LockedState<[String]>([])
        func record(_ name: String) { started.withLock { $0.append(name) } }
        var order: [String] { started.withLock { $0 } }
    }

    /// Tracks how many items run at once, and the most ever.
    private final class Gauge: Sendable {
        private let running = Atomic<Int>(0)
        private let maximum = Atomic<Int>(0)
        func enter() { maximum.max(running.add(1, ordering: .relaxed).newValue, ordering: .relaxed) }
        func leave() { running.subtract(1, ordering: .relaxed) }
        var peak: Int { maximum.load(ordering: .relaxed) }
    }

    /// A job's gate: the job waits in `pass()` until `open()`, or until its
    /// task is cancelled (which it records).
    private final class Gate: Sendable {
        private struct State {
            var isOpen = false
            var wasCancelled = false
            var waiter: CheckedContinuation<Void, Never>?
        }
        private let state = LockedState(State())

        func pass() async {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                    let now = state.withLock { state -> Bool in
                        if state.isOpen || Task.isCancelled {
                            state.wasCancelled = !state.isOpen
                            return true
                        }
                        state.waiter = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
            } onCancel: {
                let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                    guard !state.isOpen else { return nil }
                    state.wasCancelled = true
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume()
            }
        }

        func open() {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.isOpen = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }

        var wasCancelled: Bool { state.withLock { $0.wasCancelled } }
    }

    func testStartsHighestPriorityFirstAndFIFOWithinAPriority() async {
        let queue = WorkQueue(maxConcurrent: 1)
        let log = Log()
        let first = Gate()
        queue.enqueue(queue.reserveID(), priority: .veryLow) {
            log.record("first")
            await first.pass()
        }
        let items: [(String, ImageRequest.Priority)] = [
            ("low1", .low), ("normal1", .normal), ("veryHigh1", .veryHigh), ("low2", .low),
            ("normal2", .normal), ("veryLow", .veryLow), ("high", .high), ("normal3", .normal)
        ]
        for (name, priority) in items { queue.enqueue(queue.reserveID(), priority: priority) { log.record(name) } }
        XCTAssertEqual(queue.waitingCount, 8, "one at a time")
        await waitUntil("the first item runs") { log.order == ["first"] }
        first.open()
        await waitUntil("every item ran") { log.order.count == 9 && queue.runningCount == 0 }
        XCTAssertEqual(
            log.order, ["first", "veryHigh1", "high", "normal1", "normal2", "normal3", "low1", "low2", "veryLow"])
    }

    func testRaisingAWaitingItemMovesItAheadAndCancellingStopsItWaitingOrRunning() async {
        let queue = WorkQueue(maxConcurrent: 2)
        let log = Log()
        let gates = Dictionary(uniqueKeysWithValues: ["x", "y", "a", "b", "c", "d", "e"].map { ($0, Gate()) })
        func job(_ name: String) -> WorkQueue.Job {
            let gate = gates[name]!
            return {
                log.record(name)
                await gate.pass()
            }
        }
        queue.enqueue(queue.reserveID(), priority: .normal, job("x"))
        queue.enqueue(queue.reserveID(), priority: .normal, job("y"))
        var ids: [String: Int] = [:]
        for name in ["a", "b", "c", "d", "e"] {
            let id = queue.reserveID()
            ids[name] = id
            queue.enqueue(id, priority: .normal, job(name))
        }
        queue.setPriority(.veryHigh, of: ids["d"]!)
        queue.setPriority(.veryLow, of: ids["a"]!)
        XCTAssertTrue(queue.cancel(ids["b"]!))
        XCTAssertFalse(queue.cancel(ids["b"]!), "already removed")
        XCTAssertFalse(queue.cancel(queue.reserveID()), "an ID never enqueued is neither waiting nor running")
        await waitUntil("x and y run") { log.order.count == 2 }
        gates["x"]!.open()
        gates["y"]!.open()
        await waitUntil("two more run") { log.order.count == 4 }
        XCTAssertEqual(log.order.suffix(2), ["d", "c"], "two at a time, the raised one first")
        XCTAssertTrue(queue.cancel(ids["d"]!), "a running item's task is cancelled")
        await waitUntil("d's slot goes to e") { log.order.count == 5 }
        XCTAssertTrue(gates["d"]!.wasCancelled)
        for name in ["c", "e", "a"] { gates[name]!.open() }
        await waitUntil("everything ran") { log.order.count == 6 && queue.runningCount == 0 }
        XCTAssertEqual(log.order.suffix(2), ["e", "a"])
        XCTAssertEqual(queue.waitingCount, 0)
        XCTAssertFalse(gates["c"]!.wasCancelled)
    }

    func testNeverRunsMoreThanMaxConcurrentFromManyThreads() async {
        let queue = WorkQueue(maxConcurrent: 3)
        let gauge = Gauge()
        let done = Counter()
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<400 {
                group.addTask {
                    queue.enqueue(queue.reserveID(), priority: ImageRequest.Priority.allCases[i % 5]) {
                        gauge.enter()
                        await Task.yield()
                        gauge.leave()
                        done.increment()
                    }
                }
            }
        }
        await waitUntil("all 400 items ran") { done.count == 400 && queue.runningCount == 0 }
        XCTAssertLessThanOrEqual(gauge.peak, 3)
        XCTAssertGreaterThan(gauge.peak, 0)
        XCTAssertEqual(queue.waitingCount, 0)
    }

    func testThreadPoolRunsByPriorityAndCancelsAndMovesWaitingJobs() async {
        let pool = PriorityThreadPool(name: "vipsload-test", maxThreads: 1)
        let log = Log()
        let done = Counter()
        pool.isSuspended = true
        var ids: [String: PriorityThreadPool.ItemID] = [:]
        for (name, priority) in [
            ("a", ImageRequest.Priority.low), ("b", .normal), ("c", .normal), ("d", .high), ("e", .veryLow)
        ] {
            let id = pool.reserveID()
            ids[name] = id
            pool.enqueue(id, priority: priority) {
                log.record(name); done.increment()
            }
        }
        pool.setPriority(.veryHigh, of: ids["e"]!)
        XCTAssertTrue(pool.cancel(ids["c"]!))
        XCTAssertEqual(pool.waitingCount, 4)
        pool.isSuspended = false
        await waitUntil("four jobs ran") { done.count == 4 }
        XCTAssertEqual(log.order, ["e", "d", "b", "a"])
        pool.shutDown()
        await waitUntil("the thread ends") { pool.liveThreads.load(ordering: .relaxed) == 0 }
    }

    func testThreadPoolNeverRunsMoreThanItsThreadsAndNamesThem() async throws {
        let pool = PriorityThreadPool(name: "vipsload-probe", maxThreads: 3)
        let gauge = Gauge()
        let done = Counter()
        let release = DispatchSemaphore(value: 0)
        for i in 0..<3 {
            pool.enqueue(pool.reserveID(), priority: ImageRequest.Priority.allCases[i]) {
                gauge.enter()
                release.wait()
                gauge.leave()
                done.increment()
            }
        }
        await waitUntil("three threads run") { pool.runningCount == 3 }
        // The kernel keeps 15 bytes of a name: "vipsload-probe-" plus the number, cut.
        let names = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap {
            try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
        }
        XCTAssertEqual(names.filter { $0 == "vipsload-probe-" }.count, 3, "\(names)")
        for i in 0..<300 {
            pool.enqueue(pool.reserveID(), priority: ImageRequest.Priority.allCases[i % 5]) {
                gauge.enter()
                gauge.leave()
                done.increment()
            }
        }
        for _ in 0..<3 { release.signal() }
        await waitUntil("all 303 jobs ran") { done.count == 303 }
        XCTAssertEqual(gauge.peak, 3)
        XCTAssertEqual(pool.liveThreads.load(ordering: .relaxed), 3)
        pool.shutDown()
        await waitUntil("the threads end") { pool.liveThreads.load(ordering: .relaxed) == 0 }
    }
}
