/// What a locked section decided to do once the lock is released.
///
/// Shared-work bookkeeping runs under a `WorkLock`, and nothing else does:
/// starting work, cancelling it, moving it in a queue, and delivering results
/// (which resumes callers, runs user callbacks and cancellation handlers) are
/// collected here and performed, in order, after `WorkLock.perform` unlocks.
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

/// The lock that guards shared-work bookkeeping: the units (`SharedWork`),
/// their tables (`WorkTable`) and what their owner keeps beside them.
///
/// `perform` runs a body under it, then, after unlocking, the effects the body
/// collected: so no code outside the component runs while the lock is held.
final class WorkLock: Sendable {
    private let lock = Lock(rank: .engine)

    /// Runs `body` under the lock, then the effects it collected.
    func perform<R>(_ body: (inout Effects) -> R) -> R {
        var effects = Effects()
        lock.lock()
        let result = body(&effects)
        lock.unlock()
        effects.run()
        return result
    }

    /// Runs `body` under the lock and returns the effects it collected, not
    /// yet run: for a caller that must drop references of its own first.
    func collecting(_ body: (inout Effects) -> Void) -> Effects {
        var effects = Effects()
        lock.lock()
        body(&effects)
        lock.unlock()
        return effects
    }
}
