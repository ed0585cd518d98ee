/// What a locked section decided to do once the lock is released.
///
/// Engine bookkeeping runs under the engine lock, and nothing else does:
/// starting work, cancelling it, moving it in a queue, and delivering results
/// (which resumes callers, runs user callbacks and cancellation handlers) are
/// collected here and performed, in order, after `Engine.perform` unlocks.
/// An effect may call back into the engine at once.
struct Effects {
    private var actions: [@Sendable () -> Void] = []

    /// Adds `action`, to be run after the lock is released.
    mutating func add(_ action: @escaping @Sendable () -> Void) {
        actions.append(action)
    }

    /// Runs the collected actions in order.
    consuming func run() {
        for action in actions { action() }
    }
}
