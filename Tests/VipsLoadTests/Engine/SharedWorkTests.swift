import XCTest

@testable import VipsLoad

/// The engine's shared-work primitive on its own: `SharedWork` units in a
/// `WorkTable`, driven under a `WorkLock` as the engine drives them.
final class SharedWorkTests: XCTestCase {
    /// What a unit's work handle and subscribers were told, in order.
    private final class Record: Sendable {
        private let entries = LockedState<[String]>([])
        func add(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
    }

    private let lock = WorkLock()

    private func makeUnit(
        retainsValue: Bool = false, finishesWithoutSubscribers: Bool = false
    ) -> SharedWork<Int> {
        SharedWork<Int>(
            priority: .normal, retainsValue: retainsValue, finishesWithoutSubscribers: finishesWithoutSubscribers)
    }

    /// Attaches a work handle that records what the unit asks of its work.
    private func attachWork(_ unit: SharedWork<Int>, _ record: Record) {
        lock.perform { effects in
            unit.attach(
                WorkHandle(cancel: { record.add("cancel") }, setPriority: { record.add("priority \($0)") }), &effects)
        }
    }

    private func subscribe(
        _ unit: SharedWork<Int>, _ name: String, priority: ImageRequest.Priority = .normal, _ record: Record
    ) -> WorkSubscription {
        lock.perform { effects in
            unit.subscribe(priority: priority, &effects) { event in
                switch event {
                case .value(let value): record.add("\(name) value \(value)")
                case .failure(let error): record.add("\(name) \(error.kind)")
                case .progress(let completed, _, _): record.add("\(name) progress \(completed)")
                }
            }
        }
    }

    func testJoinFindsTheLiveUnitAndAnEndedOneLeavesTheTable() {
        let table = WorkTable<String, Int>()
        var made = 0
        let (first, firstJoined) = lock.perform { _ in
            table.join("a") {
                made += 1
                return makeUnit()
            }
        }
        let (second, secondJoined) = lock.perform { _ in
            table.join("a") {
                made += 1
                return makeUnit()
            }
        }
        XCTAssertFalse(firstJoined)
        XCTAssertTrue(secondJoined)
        XCTAssertTrue(first === second)
        XCTAssertEqual(made, 1, "a live unit is joined, not made again")
        XCTAssertEqual(table.count, 1)

        let record = Record()
        _ = subscribe(first, "s", record)
        lock.perform { effects in first.complete(with: .success(7), &effects) }
        XCTAssertEqual(record.all, ["s value 7"])
        XCTAssertEqual(table.count, 0, "a completed unit leaves its table")
        XCTAssertNil(lock.perform { _ in table["a"] })
        let (third, thirdJoined) = lock.perform { _ in table.join("a") { makeUnit() } }
        XCTAssertFalse(thirdJoined)
        XCTAssertFalse(third === first, "the next join starts afresh")
    }

    func testAUnitThatEndedWhileStartingIsNotKept() {
        let table = WorkTable<String, Int>()
        let (unit, joined) = lock.perform { effects in
            table.join("a") {
                let unit = makeUnit()
                unit.complete(with: .failure(VipsError(.io, "failed at once")), &effects)
                return unit
            }
        }
        XCTAssertFalse(joined)
        XCTAssertFalse(lock.perform { _ in unit.isLive })
        XCTAssertEqual(table.count, 0)
    }

    func testPriorityIsTheHighestOfTheSubscribersAndMovesTheWorkAndTheUpstreamUnit() {
        let upstream = makeUnit()
        let unit = makeUnit()
        let upstreamWork = Record()
        let work = Record()
        attachWork(upstream, upstreamWork)
        attachWork(unit, work)
        lock.perform { effects in
            let subscription = upstream.subscribe(priority: unit.priority, &effects) { _ in }
            unit.attach(upstream: subscription, &effects)
        }
        let record = Record()
        let low = subscribe(unit, "low", priority: .low, record)
        XCTAssertEqual(lock.perform { _ in unit.priority }, .normal, "a unit starts at its creator's priority")
        let high = subscribe(unit, "high", priority: .high, record)
        XCTAssertEqual(lock.perform { _ in unit.priority }, .high)
        XCTAssertEqual(lock.perform { _ in upstream.priority }, .high, "the unit it waits for follows")
        lock.perform { effects in low.setPriority(.veryHigh, &effects) }
        XCTAssertEqual(lock.perform { _ in unit.priority }, .veryHigh)
        lock.perform { effects in low.cancel(&effects) }
        XCTAssertEqual(lock.perform { _ in unit.priority }, .high, "recomputed when a subscriber leaves")
        lock.perform { effects in high.setPriority(.veryLow, &effects) }
        XCTAssertEqual(lock.perform { _ in unit.priority }, .veryLow)
        XCTAssertEqual(work.all, ["priority high", "priority veryHigh", "priority high", "priority veryLow"])
        XCTAssertEqual(upstreamWork.all, work.all)
        XCTAssertEqual(record.all, [], "nothing is delivered")
    }

    func testTheLastSubscriberLeavingDisposesOfAPendingUnit() {
        let table = WorkTable<String, Int>()
        let upstream = makeUnit()
        let upstreamWork = Record()
        attachWork(upstream, upstreamWork)
        let (unit, _) = lock.perform { effects in
            table.join("a") {
                let unit = makeUnit()
                let subscription = upstream.subscribe(priority: .normal, &effects) { _ in }
                unit.attach(upstream: subscription, &effects)
                return unit
            }
        }
        let work = Record()
        attachWork(unit, work)
        let record = Record()
        let first = subscribe(unit, "first", record)
        let second = subscribe(unit, "second", record)
        lock.perform { effects in first.cancel(&effects) }
        XCTAssertTrue(lock.perform { _ in unit.isLive }, "one subscriber is left")
        XCTAssertEqual(work.all, [])
        lock.perform { effects in second.cancel(&effects) }
        XCTAssertFalse(lock.perform { _ in unit.isLive })
        XCTAssertEqual(work.all, ["cancel"], "its work is cancelled")
        XCTAssertEqual(table.count, 0, "it leaves its table")
        XCTAssertFalse(lock.perform { _ in upstream.isLive }, "and its upstream unit, whose only subscriber it was")
        XCTAssertEqual(upstreamWork.all, ["cancel"])
        // Work attached to a unit already gone is cancelled at once; a late result reaches no one.
        let late = Record()
        attachWork(unit, late)
        XCTAssertEqual(late.all, ["cancel"])
        XCTAssertFalse(lock.perform { _ in unit.begin() }, "its work must not start")
        lock.perform { effects in unit.complete(with: .success(1), &effects) }
        XCTAssertEqual(record.all, [])
    }

    func testARunningUnitThatFinishesWithoutSubscribersRunsToTheEndAndCanBeJoined() {
        let table = WorkTable<String, Int>()
        let (unit, _) = lock.perform { _ in table.join("a") { makeUnit(finishesWithoutSubscribers: true) } }
        let work = Record()
        attachWork(unit, work)
        let record = Record()
        let first = subscribe(unit, "first", record)
        XCTAssertTrue(lock.perform { _ in unit.begin() })
        XCTAssertFalse(lock.perform { _ in unit.begin() }, "work begins once")
        lock.perform { effects in first.cancel(&effects) }
        XCTAssertTrue(lock.perform { _ in unit.isLive }, "begun work is not interrupted")
        XCTAssertEqual(work.all, [])
        XCTAssertEqual(table.count, 1, "and can still be joined")
        let (joined, wasJoined) = lock.perform { _ in table.join("a") { makeUnit() } }
        XCTAssertTrue(wasJoined)
        XCTAssertTrue(joined === unit)
        _ = subscribe(joined, "late", record)
        lock.perform { effects in unit.complete(with: .success(3), &effects) }
        XCTAssertEqual(record.all, ["late value 3"], "the subscriber who left hears nothing")
        XCTAssertEqual(table.count, 0)
    }

    func testFinishingWithoutSubscribersEndsTheUnitAndDeliversNothing() {
        let table = WorkTable<String, Int>()
        let (unit, _) = lock.perform { _ in table.join("a") { makeUnit(finishesWithoutSubscribers: true) } }
        let record = Record()
        let only = subscribe(unit, "only", record)
        XCTAssertTrue(lock.perform { _ in unit.begin() })
        lock.perform { effects in only.cancel(&effects) }
        XCTAssertEqual(lock.perform { _ in unit.subscriberCount }, 0)
        lock.perform { effects in
            unit.reportProgress(completed: 10, total: nil, file: nil, &effects)
            unit.complete(with: .success(5), &effects)
        }
        XCTAssertEqual(record.all, [])
        XCTAssertFalse(lock.perform { _ in unit.isLive })
        XCTAssertEqual(table.count, 0)
    }

    func testAKeptValueReachesLateSubscribersAndAFailureIsNeverKept() {
        let kept = makeUnit(retainsValue: true)
        let record = Record()
        let holder = subscribe(kept, "holder", record)
        lock.perform { effects in kept.reportProgress(completed: 4, total: 8, file: nil, &effects) }
        lock.perform { effects in kept.complete(with: .success(9), &effects) }
        _ = subscribe(kept, "late", record)
        XCTAssertEqual(record.all, ["holder progress 4", "holder value 9", "late value 9"])
        XCTAssertTrue(lock.perform { _ in kept.isLive }, "kept while subscribers hold it")
        lock.perform { effects in kept.reportProgress(completed: 8, total: 8, file: nil, &effects) }
        XCTAssertEqual(record.all.count, 3, "no progress after the result")
        lock.perform { effects in holder.cancel(&effects) }

        let failing = makeUnit(retainsValue: true)
        let failures = Record()
        _ = subscribe(failing, "a", failures)
        lock.perform { effects in failing.complete(with: .failure(VipsError(.network, "down")), &effects) }
        XCTAssertEqual(failures.all, ["a network"])
        XCTAssertFalse(lock.perform { _ in failing.isLive }, "a failure ends the unit")
    }
}
