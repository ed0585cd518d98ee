/// The tasks of one batch or progressive load, so that ending its sequence
/// cancels the ones still running.
final class TaskGroupHandle: Sendable {
    private struct State {
        var tasks: [ImageTask] = []
        var remaining: Int
        var isCancelled = false
    }

    private let state: LockedState<State>

    init(remaining: Int) {
        state = LockedState(State(remaining: remaining), rank: .task)
    }

    /// Adds a task; one added after `cancelAll()` is cancelled at once.
    func add(_ task: ImageTask) {
        let cancelled = state.withLock { state -> Bool in
            if !state.isCancelled { state.tasks.append(task) }
            return state.isCancelled
        }
        if cancelled { task.cancel() }
    }

    /// Counts one completion; true for the last.
    func completeOne() -> Bool {
        state.withLock { state -> Bool in
            state.remaining -= 1
            return state.remaining == 0
        }
    }

    /// Cancels every task added (and any added later).
    func cancelAll() {
        let tasks = state.withLock { state -> [ImageTask] in
            state.isCancelled = true
            defer { state.tasks = [] }
            return state.tasks
        }
        for task in tasks { task.cancel() }
    }
}
