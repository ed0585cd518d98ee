import Synchronization

/// Starts work at most `maxConcurrent` at a time: highest priority first,
/// first in first out within a priority.
///
/// A lock-protected structure rather than an actor, so that enqueueing,
/// cancelling and reprioritising are plain synchronous calls. Waiting items
/// sit in one intrusive doubly linked list per priority, making every
/// operation O(1). Items carry a `start` closure that must only hand the work
/// off (to a thread, or a new Swift task) without blocking or taking a lock
/// that its caller may hold: it can run inside `enqueue`, `finish` or a
/// resume, on the calling thread.
final class WorkQueue: Sendable {
    typealias ItemID = Int

    private struct Entry {
        var bucket: Int
        var previous: ItemID?
        var next: ItemID?
        let start: @Sendable () -> Void
    }

    private struct State {
        var waiting: [ItemID: Entry] = [:]
        var heads = [ItemID?](repeating: nil, count: ImageRequest.Priority.allCases.count)
        var tails = [ItemID?](repeating: nil, count: ImageRequest.Priority.allCases.count)
        var running = 0
        var maxConcurrent: Int
        var isSuspended = false
        var nextID = 0

        mutating func append(_ id: ItemID, _ entry: Entry) {
            var entry = entry
            entry.previous = tails[entry.bucket]
            entry.next = nil
            if let tail = tails[entry.bucket] { waiting[tail]?.next = id } else { heads[entry.bucket] = id }
            tails[entry.bucket] = id
            waiting[id] = entry
        }

        mutating func unlink(_ id: ItemID) -> Entry? {
            guard let entry = waiting.removeValue(forKey: id) else { return nil }
            if let previous = entry.previous { waiting[previous]?.next = entry.next } else { heads[entry.bucket] = entry.next }
            if let next = entry.next { waiting[next]?.previous = entry.previous } else { tails[entry.bucket] = entry.previous }
            return entry
        }

        /// Takes the items that may start now, counting them as running.
        mutating func takeStartable() -> [@Sendable () -> Void] {
            var starts: [@Sendable () -> Void] = []
            while !isSuspended, running < maxConcurrent, let id = heads.reversed().lazy.compactMap({ $0 }).first,
                  let entry = unlink(id) {
                running += 1
                starts.append(entry.start)
            }
            return starts
        }
    }

    private let state: Mutex<State>

    init(maxConcurrent: Int) {
        state = Mutex(State(maxConcurrent: max(1, maxConcurrent)))
    }

    /// Adds work; it starts at once when a slot is free and the queue is not suspended.
    @discardableResult
    func enqueue(priority: ImageRequest.Priority, start: @escaping @Sendable () -> Void) -> ItemID {
        let (id, starts) = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.append(id, Entry(bucket: priority.rawValue, start: start))
            return (id, state.takeStartable())
        }
        for start in starts { start() }
        return id
    }

    /// Removes a waiting item so it never starts. Returns false when it had
    /// already started (or was unknown): then its owner must drop its result.
    @discardableResult
    func cancel(_ id: ItemID) -> Bool {
        state.withLock { $0.unlink(id) != nil }
    }

    /// Moves a waiting item to the back of `priority`'s line (so raising it
    /// moves it ahead of every item of lower priority). No effect once started.
    func setPriority(_ priority: ImageRequest.Priority, of id: ItemID) {
        state.withLock { state in
            guard let entry = state.waiting[id], entry.bucket != priority.rawValue, var moved = state.unlink(id) else { return }
            moved.bucket = priority.rawValue
            state.append(id, moved)
        }
    }

    /// Reports that one started item has finished, and starts what may start now.
    func finish() {
        let starts = state.withLock { state in
            state.running -= 1
            return state.takeStartable()
        }
        for start in starts { start() }
    }

    /// While true no item starts; waiting items can still be cancelled and reprioritised.
    var isSuspended: Bool {
        get { state.withLock { $0.isSuspended } }
        set {
            let starts = state.withLock { state in
                state.isSuspended = newValue
                return state.takeStartable()
            }
            for start in starts { start() }
        }
    }

    /// Items waiting to start.
    var waitingCount: Int { state.withLock { $0.waiting.count } }
    /// Items started and not yet finished.
    var runningCount: Int { state.withLock { $0.running } }
}
