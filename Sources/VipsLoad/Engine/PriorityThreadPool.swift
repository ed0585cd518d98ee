import Dispatch
import Foundation
import Synchronization

/// Dedicated, named threads for blocking work (decodes, disk I/O), fed from
/// one priority queue: the highest-priority waiting job runs on the next free
/// thread. Enqueue, cancel and reprioritise are O(1).
///
/// A decode blocks its thread for milliseconds to seconds; on Swift's
/// cooperative pool (one thread per core) a few would stall every other task
/// in the process, so they run here. Threads start on demand up to
/// `maxThreads` (never while the pool's lock is held) and end after
/// `shutDown()` once the jobs already started have returned. Each is named
/// `<name>-N`, visible in `/proc/self/task/*/comm` and in debuggers.
final class PriorityThreadPool: Sendable {
    typealias ItemID = Int

    private struct State {
        var waiting = PriorityList<@Sendable () -> Void>()
        var threads = 0
        var idle = 0
        var running = 0
        var isSuspended = false
        var isShutDown = false
    }

    private let state = LockedState(State(), rank: .queue)
    private let wakeUp = DispatchSemaphore(value: 0)
    private let ids = Atomic<Int>(0)
    private let maxThreads: Int
    private let name: String
    /// Threads started and not yet ended (for tests).
    let liveThreads = Atomic<Int>(0)

    /// A pool of at most `maxThreads` threads named `<name>-1`, `<name>-2`, ...
    init(name: String, maxThreads: Int) {
        self.name = name
        self.maxThreads = max(1, maxThreads)
    }

    /// A fresh item ID (no lock taken).
    func reserveID() -> ItemID {
        ids.add(1, ordering: .relaxed).newValue
    }

    /// Queues `job` under a reserved ID; it runs on a pool thread.
    func enqueue(_ id: ItemID, priority: ImageRequest.Priority, _ job: @escaping @Sendable () -> Void) {
        let (wake, newThread) = state.withLock { state -> (Bool, Int?) in
            state.waiting.append(id, job, priority: priority)
            guard !state.isSuspended, !state.isShutDown else { return (false, nil) }
            // A woken thread is claimed here, so two jobs never wake the same one.
            if state.idle > 0 { state.idle -= 1; return (true, nil) }
            guard state.threads < maxThreads else { return (false, nil) }
            state.threads += 1
            return (false, state.threads)
        }
        if wake { wakeUp.signal() }
        if let number = newThread { startThread(number) }
    }

    /// Removes a waiting job so it never runs; false when it was not waiting.
    @discardableResult
    func cancel(_ id: ItemID) -> Bool {
        state.withLock { $0.waiting.remove(id) != nil }
    }

    /// Moves a waiting job to the back of `priority`'s line.
    func setPriority(_ priority: ImageRequest.Priority, of id: ItemID) {
        state.withLock { $0.waiting.move(id, to: priority) }
    }

    /// While true no waiting job starts; running ones finish, waiting ones can
    /// still be cancelled and reprioritised.
    var isSuspended: Bool {
        get { state.withLock { $0.isSuspended } }
        set {
            let (wakes, newThreads) = state.withLock { state -> (Int, ClosedRange<Int>?) in
                state.isSuspended = newValue
                guard !newValue, !state.isShutDown else { return (0, nil) }
                let wakes = min(state.idle, state.waiting.count)
                state.idle -= wakes
                let wanted = min(state.waiting.count - wakes, maxThreads - state.threads)
                guard wanted > 0 else { return (wakes, nil) }
                let first = state.threads + 1
                state.threads += wanted
                return (wakes, first...state.threads)
            }
            for _ in 0..<wakes { wakeUp.signal() }
            if let newThreads { for number in newThreads { startThread(number) } }
        }
    }

    /// Lets the threads end once the jobs already started have returned;
    /// waiting jobs are dropped.
    func shutDown() {
        let idle = state.withLock { state -> Int in
            state.isShutDown = true
            state.waiting = PriorityList()
            defer { state.idle = 0 }
            return state.idle
        }
        // Busy threads see the flag when their job returns.
        for _ in 0..<idle { wakeUp.signal() }
    }

    /// Jobs waiting to run.
    var waitingCount: Int { state.withLock { $0.waiting.count } }
    /// Jobs running.
    var runningCount: Int { state.withLock { $0.running } }

    private func startThread(_ number: Int) {
        let threadName = "\(name)-\(number)"
        let thread = Thread { [self] in
            ThreadNaming.setCurrentThreadName(threadName)
            liveThreads.add(1, ordering: .relaxed)
            work()
            liveThreads.subtract(1, ordering: .relaxed)
        }
        // libvips and its loaders may recurse deeply on odd files: give them room.
        thread.stackSize = 8 << 20
        thread.start()
    }

    private func work() {
        var ranJob = false
        while true {
            let job = state.withLock { state -> (@Sendable () -> Void)?? in
                if ranJob { state.running -= 1 }
                if state.isShutDown { state.threads -= 1; return .some(nil) }
                if !state.isSuspended, let job = state.waiting.popHighest() {
                    state.running += 1
                    return .some(job)
                }
                state.idle += 1
                return nil
            }
            switch job {
            case .some(.some(let job)):
                job()
                ranJob = true
            case .some(.none):
                return
            case .none:
                // Whoever signals has already taken this thread off the idle count.
                ranJob = false
                wakeUp.wait()
            }
        }
    }
}
