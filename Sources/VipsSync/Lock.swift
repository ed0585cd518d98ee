import Foundation

/// The one lock type for engine, queue and cache state: a `pthread_mutex_t`.
///
/// Why not `Synchronization.Mutex`: on Linux its futex is reached through a
/// library ThreadSanitizer does not instrument, so TSan cannot see it and
/// reports every access made under it as a race (or, filtered, would miss a
/// real one). TSan intercepts `pthread_mutex_lock`, so with this lock
/// `scripts/sanitize.sh thread` runs with no report filter. Revisit when the
/// toolchain's `Mutex` is visible to TSan on Linux.
///
/// Lock order: a thread holding a lock may only take a lock of a higher
/// `Rank`; debug builds assert it on every acquisition (which also turns a
/// recursive acquisition, a certain deadlock, into a failed assertion). No
/// code outside the owning component (callbacks, continuation resumes,
/// cancellation, thread starts) runs while a lock is held: locked sections
/// compute what to do, and their caller does it after unlocking.
package final class Lock: @unchecked Sendable {
    /// Where a lock sits in the lock order: lower ranks are taken first.
    package enum Rank: Int, Comparable, Sendable {
        /// The pipeline engine's tables (shared-work units and their subscribers).
        case engine = 10
        /// Per-task and per-sequence state (a task's outcome, a batch).
        case task = 20
        /// Work queues and thread pools.
        case queue = 30
        /// Caches (memory LRU, disk index).
        case cache = 40
        /// A lock that takes no other lock while held.
        case leaf = 100

        package static func < (lhs: Rank, rhs: Rank) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// This lock's place in the lock order.
    package let rank: Rank

    /// A new, unlocked lock of `rank`.
    package init(rank: Rank = .leaf) {
        self.rank = rank
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if DEBUG
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        #endif
        let status = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Blocks until the lock is held by the calling thread.
    package func lock() {
        #if DEBUG
            LockOrder.willAcquire(rank)
        #endif
        let status = pthread_mutex_lock(mutex)
        assert(status == 0, "pthread_mutex_lock failed: \(status)")
    }

    /// Releases the lock, which the calling thread holds.
    package func unlock() {
        let status = pthread_mutex_unlock(mutex)
        assert(status == 0, "pthread_mutex_unlock failed: \(status)")
        #if DEBUG
            LockOrder.didRelease(rank)
        #endif
    }

    /// Runs `body` with the lock held.
    @inline(__always)
    package func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// State reachable only with its lock held.
package final class LockedState<State>: @unchecked Sendable {
    private let lock: Lock
    private var state: State

    /// `initial` behind a new lock of `rank`.
    package init(_ initial: State, rank: Lock.Rank = .leaf) {
        lock = Lock(rank: rank)
        state = initial
    }

    /// Runs `body` on the state with the lock held. `body` must not call code
    /// outside its component (see `Lock`).
    @inline(__always)
    package func withLock<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}

#if DEBUG
    /// Debug builds: the ranks of the locks each thread holds, to assert the lock order.
    private enum LockOrder {
        private static let capacity = 32
        /// A per-thread array: slot 0 is the count, then the held ranks in order.
        private static let key: pthread_key_t = {
            var key = pthread_key_t()
            let status = pthread_key_create(&key) { pointer in
                pointer?.assumingMemoryBound(to: Int.self).deallocate()
            }
            precondition(status == 0, "pthread_key_create failed: \(status)")
            return key
        }()

        private static var held: UnsafeMutablePointer<Int> {
            if let existing = pthread_getspecific(key) { return existing.assumingMemoryBound(to: Int.self) }
            let fresh = UnsafeMutablePointer<Int>.allocate(capacity: capacity + 1)
            fresh.initialize(repeating: 0, count: capacity + 1)
            pthread_setspecific(key, fresh)
            return fresh
        }

        static func willAcquire(_ rank: Lock.Rank) {
            let held = self.held
            let count = held[0]
            if count > 0 {
                let top = held[count]
                assert(rank.rawValue > top, "lock order violated: taking a rank-\(rank) lock while holding rank \(top)")
            }
            if count < capacity {
                held[count + 1] = rank.rawValue
            }
            held[0] = count + 1
        }

        static func didRelease(_ rank: Lock.Rank) {
            let held = self.held
            let count = held[0]
            guard count > 0 else { return }
            if count <= capacity, held[count] != rank.rawValue {
                // Released out of order: drop the innermost matching rank.
                var index = count
                while index > 0, held[index] != rank.rawValue { index -= 1 }
                if index > 0 {
                    for shift in index..<count { held[shift] = held[shift + 1] }
                }
            }
            held[0] = count - 1
        }
    }
#endif
