import Synchronization
import XCTest
@testable import VipsLoad

/// The priority queue in front of decodes and loads, on its own.
final class PipelineWorkQueueTests: XCTestCase {
    /// Records the order in which items start; items finish only when told.
    private final class Log: Sendable {
        private let started = Mutex<[String]>([])
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
        queue.isSuspended = true
        let items: [(String, ImageRequest.Priority)] = [
            ("low1", .low), ("normal1", .normal), ("veryHigh1", .veryHigh), ("low2", .low),
            ("normal2", .normal), ("veryLow", .veryLow), ("high", .high), ("normal3", .normal),
        ]
        for (name, priority) in items { queue.enqueue(priority: priority) { log.record(name) } }
        XCTAssertEqual(queue.waitingCount, 8)
        queue.isSuspended = false
        XCTAssertEqual(log.order, ["veryHigh1"], "one at a time")
        for _ in 0..<8 { queue.finish() }
        XCTAssertEqual(log.order, ["veryHigh1", "high", "normal1", "normal2", "normal3", "low1", "low2", "veryLow"])
        XCTAssertEqual(queue.runningCount, 0)
    }

    func testRaisingAWaitingItemMovesItAheadAndCancelledItemsNeverStart() {
        let queue = WorkQueue(maxConcurrent: 2)
        let log = Log()
        queue.isSuspended = true
        var ids: [String: WorkQueue.ItemID] = [:]
        for name in ["a", "b", "c", "d", "e"] {
            ids[name] = queue.enqueue(priority: .normal) { log.record(name) }
        }
        queue.setPriority(.veryHigh, of: ids["d"]!)
        queue.setPriority(.veryLow, of: ids["a"]!)
        XCTAssertTrue(queue.cancel(ids["b"]!))
        XCTAssertFalse(queue.cancel(ids["b"]!), "already removed")
        queue.isSuspended = false
        XCTAssertEqual(log.order, ["d", "c"], "two at a time")
        XCTAssertFalse(queue.cancel(ids["d"]!), "started items cannot be cancelled")
        queue.finish()
        queue.finish()
        queue.finish()
        XCTAssertEqual(log.order, ["d", "c", "e", "a"])
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
                    queue.enqueue(priority: ImageRequest.Priority.allCases[i % 5]) {
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
}
