import Synchronization
import VipsCore

/// A thread-safe counter for progress reporting across worker threads.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    /// Adds one and returns the new value.
    func increment() -> Int { value.add(1, ordering: .relaxed).newValue }
}

/// Keeps the first error reported by any worker thread.
final class FirstError: Sendable {
    private let stored = LockedState<(any Error)?>(nil)
    func record(_ error: any Error) { stored.withLock { if $0 == nil { $0 = error } } }
    var error: (any Error)? { stored.withLock { $0 } }
}
