import Synchronization

/// Starts work at most `maxConcurrent` at a time, highest priority first and
/// first come first served within a priority: the data-loading lane, whose
/// items start Swift tasks (loader calls).
///
/// Items are named by IDs reserved ahead (`reserveID()`), so the engine can
/// record an item, and cancel or move it, before the effect that enqueues it
/// has run: cancelling or moving an ID that is not (yet) waiting does nothing,
/// and the work then finds its unit gone when it starts. A `start` closure only
/// hands the work off (it starts a task); it runs after the queue's lock is
/// released, on the thread that enqueued or finished an item.
final class WorkQueue: Sendable {
    typealias ItemID = Int

    private struct State {
        var waiting = PriorityList<@Sendable () -> Void>()
        var running = 0
        let maxConcurrent: Int
        var isSuspended = false

        mutating func takeStartable() -> [@Sendable () -> Void] {
            var starts: [@Sendable () -> Void] = []
            while !isSuspended, running < maxConcurrent, let start = waiting.popHighest() {
                running += 1
                starts.append(start)
            }
            return starts
        }
    }

    private let state: LockedState<State>
    private let ids = Atomic<Int>(0)

    init(maxConcurrent: Int) {
        state = LockedState(State(maxConcurrent: max(1, maxConcurrent)), rank: .queue)
    }

    /// A fresh item ID (no lock taken).
    func reserveID() -> ItemID {
        ids.add(1, ordering: .relaxed).newValue
    }

    /// Adds work under a reserved ID; it starts at once when a slot is free.
    func enqueue(_ id: ItemID, priority: ImageRequest.Priority, start: @escaping @Sendable () -> Void) {
        let starts = state.withLock { state in
            state.waiting.append(id, start, priority: priority)
            return state.takeStartable()
        }
        for start in starts { start() }
    }

    /// Removes a waiting item so it never starts; false when it was not waiting.
    @discardableResult
    func cancel(_ id: ItemID) -> Bool {
        state.withLock { $0.waiting.remove(id) != nil }
    }

    /// Moves a waiting item to the back of `priority`'s line.
    func setPriority(_ priority: ImageRequest.Priority, of id: ItemID) {
        state.withLock { $0.waiting.move(id, to: priority) }
    }

    /// Reports that a started item has finished, and starts what may start now.
    func finish() {
        let starts = state.withLock { state in
            state.running -= 1
            return state.takeStartable()
        }
        for start in starts { start() }
    }

    /// Items waiting to start.
    var waitingCount: Int { state.withLock { $0.waiting.count } }
    /// Items started and not yet finished.
    var runningCount: Int { state.withLock { $0.running } }
}
