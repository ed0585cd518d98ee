import Synchronization

/// The Swift task running one data load, cancellable before or after it exists.
///
/// The queue may start a load at the very moment it is cancelled; the handle
/// makes the order irrelevant: a task started after `cancel()` is cancelled
/// at birth (and still runs, so that it reports back to its queue).
final class LoadHandle: Sendable {
    private struct State {
        var task: Task<Void, Never>?
        var isCancelled = false
    }

    private let state = Mutex(State())

    /// Starts `operation` as a new task.
    func start(_ operation: @escaping @Sendable () async -> Void) {
        let task = Task(operation: operation)
        let cancelled = state.withLock { state -> Bool in
            state.task = task
            return state.isCancelled
        }
        if cancelled { task.cancel() }
    }

    func cancel() {
        let task = state.withLock { state -> Task<Void, Never>? in
            state.isCancelled = true
            return state.task
        }
        task?.cancel()
    }
}
