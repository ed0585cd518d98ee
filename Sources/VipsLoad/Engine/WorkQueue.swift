import Synchronization

/// Runs async jobs, each in its own Swift task, at most `maxConcurrent` at a
/// time, highest priority first and first come first served within a
/// priority: the data-loading lane, whose jobs call data loaders.
///
/// A job's task is started after the queue's lock is released, on the thread
/// that enqueued an item or finished one; when the job returns, the queue
/// starts what may start next. Cancelling an item that waits removes it;
/// cancelling one that runs cancels its task (which runs the loader's
/// cancellation handlers, on the cancelling thread, under no lock of the queue).
final class WorkQueue: WorkLane {
    typealias Job = @Sendable () async -> Void

    private struct Item {
        let id: Int
        let job: Job
    }

    /// A started item: its task once made, and whether it was cancelled
    /// while the task was being made.
    private struct Running {
        var task: Task<Void, Never>?
        var cancelled = false
    }

    private struct State {
        var waiting = PriorityList<Item>()
        var running: [Int: Running] = [:]
        let maxConcurrent: Int

        mutating func takeStartable() -> [Item] {
            var starts: [Item] = []
            while running.count < maxConcurrent, let item = waiting.popHighest() {
                running[item.id] = Running()
                starts.append(item)
            }
            return starts
        }
    }

    private let state: LockedState<State>
    private let ids = Atomic<Int>(0)

    init(maxConcurrent: Int) {
        state = LockedState(State(maxConcurrent: max(1, maxConcurrent)), rank: .queue)
    }

    func reserveID() -> Int {
        ids.add(1, ordering: .relaxed).newValue
    }

    /// Adds `job` under a reserved ID; it starts at once when a slot is free.
    func enqueue(_ id: Int, priority: ImageRequest.Priority, _ job: @escaping Job) {
        let starts = state.withLock { state in
            state.waiting.append(id, Item(id: id, job: job), priority: priority)
            return state.takeStartable()
        }
        start(starts)
    }

    @discardableResult
    func cancel(_ id: Int) -> Bool {
        let (found, task) = state.withLock { state -> (Bool, Task<Void, Never>?) in
            if state.waiting.remove(id) != nil { return (true, nil) }
            guard var running = state.running[id] else { return (false, nil) }
            running.cancelled = true
            state.running[id] = running
            return (true, running.task)
        }
        task?.cancel()
        return found
    }

    func setPriority(_ priority: ImageRequest.Priority, of id: Int) {
        state.withLock { $0.waiting.move(id, to: priority) }
    }

    /// Items waiting to start.
    var waitingCount: Int { state.withLock { $0.waiting.count } }
    /// Items started and not yet finished.
    var runningCount: Int { state.withLock { $0.running.count } }

    private func start(_ items: [Item]) {
        for item in items {
            let task = Task { [self] in
                await item.job()
                finished(item.id)
            }
            // The task may already have finished (then it is gone from `running`),
            // or been cancelled while it was being made (then it is cancelled now).
            let cancelled = state.withLock { state -> Bool in
                guard var running = state.running[item.id] else { return false }
                running.task = task
                state.running[item.id] = running
                return running.cancelled
            }
            if cancelled { task.cancel() }
        }
    }

    private func finished(_ id: Int) {
        let starts = state.withLock { state in
            state.running[id] = nil
            return state.takeStartable()
        }
        start(starts)
    }
}
