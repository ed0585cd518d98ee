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

    func testStartsHighestPriorityFirstAndFIFOWithinAPriority() {
        let queue = WorkQueue(maxConcurrent: 1)
        let log = Log()
        queue.enqueue(queue.reserveID(), priority: .veryLow) { log.record("first") }
        let items: [(String, ImageRequest.Priority)] = [
            ("low1", .low), ("normal1", .normal), ("veryHigh1", .veryHigh), ("low2", .low),
            ("normal2", .normal), ("veryLow", .veryLow), ("high", .high), ("normal3", .normal)
        ]
        for (name, priority) in items { queue.enqueue(queue.reserveID(), priority: priority) { log.record(name) } }
        XCTAssertEqual(queue.waitingCount, 8)
        XCTAssertEqual(log.order, ["first"], "one at a time")
        for _ in 0..<9 { queue.finish() }
        XCTAssertEqual(
            log.order, ["first", "veryHigh1", "high", "normal1", "normal2", "normal3", "low1", "low2", "veryLow"])
        XCTAssertEqual(queue.runningCount, 0)
    }

    func testRaisingAWaitingItemMovesItAheadAndCancelledItemsNeverStart() {
        let queue = WorkQueue(maxConcurrent: 2)
        let log = Log()
        queue.enqueue(queue.reserveID(), priority: .normal) { log.record("x") }
        queue.enqueue(queue.reserveID(), priority: .normal) { log.record("y") }
        var ids: [String: WorkQueue.ItemID] = [:]
        for name in ["a", "b", "c", "d", "e"] {
            let id = queue.reserveID()
            ids[name] = id
            queue.enqueue(id, priority: .normal) { log.record(name) }
        }
        queue.setPriority(.veryHigh, of: ids["d"]!)
        queue.setPriority(.veryLow, of: ids["a"]!)
        XCTAssertTrue(queue.cancel(ids["b"]!))
        XCTAssertFalse(queue.cancel(ids["b"]!), "already removed")
        XCTAssertFalse(queue.cancel(queue.reserveID()), "an ID never enqueued is not waiting")
        queue.finish()
        queue.finish()
        XCTAssertEqual(log.order, ["x", "y", "d", "c"], "two at a time")
        XCTAssertFalse(queue.cancel(ids["d"]!), "started items cannot be cancelled")
        queue.finish()
        queue.finish()
        queue.finish()
        XCTAssertEqual(log.order, ["x", "y", "d", "c", "e", "a"])
        XCTAssertEqual(queue.waitingCount, 0)
        XCTAssertEqual(queue.runningCount, 1)
        queue.finish()
        XCTAssertEqual(queue.runningCount, 0)
    }

    func testNeverRunsMoreThanMaxConcurrentFromManyThreads() async {
        let queue = WorkQueue(maxConcurrent: 3)
        let gauge = Gauge()
        let done = Counter()
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<400 {
                group.addTask {
                    queue.enqueue(queue.reserveID(), priority: ImageRequest.Priority.allCases[i % 5]) {
                        // Hand the work off, as the pipeline does, and finish it from another thread.
                        Thread.detachNewThread {
                            gauge.enter()
                            gauge.leave()
                            done.increment()
                            queue.finish()
                        }
                    }
                }
            }
        }
        await waitUntil("all 400 items ran") { done.count == 400 }
        XCTAssertLessThanOrEqual(gauge.peak, 3)
        XCTAssertGreaterThan(gauge.peak, 0)
        XCTAssertEqual(queue.runningCount, 0)
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
