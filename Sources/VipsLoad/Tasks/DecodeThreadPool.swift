import Dispatch
import Foundation
import Synchronization

/// Dedicated threads for synchronous libvips work.
///
/// A decode blocks its thread for milliseconds to seconds. Run on Swift's
/// cooperative pool (one thread per core) a few of them would stall every
/// other task in the process, so they run here instead. Threads are created
/// on demand up to `maxThreads` and live until `shutDown()`; the pipeline's
/// decode queue never hands over more work than there are threads, so
/// nothing waits in here behind anything else.
final class DecodeThreadPool: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var threads = 0
        var isShutDown = false
    }

    private let state = Mutex(State())
    private let available = DispatchSemaphore(value: 0)
    /// Threads started and not yet ended (for tests).
    let liveThreads = Atomic<Int>(0)
    private let maxThreads: Int

    /// Threads are not named: swift-corelibs-foundation applies a `Thread`
    /// name unreliably on Linux, and `pthread_setname_np` is not visible to Swift.
    init(maxThreads: Int) {
        self.maxThreads = max(1, maxThreads)
    }

    /// Runs `job` on one of the pool's threads.
    func submit(_ job: @escaping @Sendable () -> Void) {
        let newThread = state.withLock { state -> Bool in
            state.jobs.append(job)
            guard state.threads < maxThreads else { return false }
            state.threads += 1
            return true
        }
        if newThread {
            let thread = Thread { [self] in
                liveThreads.add(1, ordering: .relaxed)
                self.work()
                liveThreads.subtract(1, ordering: .relaxed)
            }
            // libvips and its loaders may recurse deeply on odd files: give them room.
            thread.stackSize = 8 << 20
            thread.start()
        }
        available.signal()
    }

    /// Lets the threads end once the jobs already submitted have run.
    func shutDown() {
        let threads = state.withLock { state in
            state.isShutDown = true
            return state.threads
        }
        for _ in 0..<threads { available.signal() }
    }

    private func work() {
        while true {
            available.wait()
            let job: (@Sendable () -> Void)? = state.withLock { state in
                state.jobs.isEmpty ? nil : state.jobs.removeFirst()
            }
            if let job {
                job()
            } else if state.withLock({ $0.isShutDown }) {
                return
            }
        }
    }
}
