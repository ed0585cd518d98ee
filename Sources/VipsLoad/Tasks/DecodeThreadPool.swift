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
    private let maxThreads: Int
    private let name: String

    init(maxThreads: Int, name: String) {
        self.maxThreads = max(1, maxThreads)
        self.name = name
    }

    /// Runs `job` on one of the pool's threads.
    func submit(_ job: @escaping @Sendable () -> Void) {
        let newThread: Int? = state.withLock { state in
            state.jobs.append(job)
            guard state.threads < maxThreads else { return nil }
            state.threads += 1
            return state.threads
        }
        if let number = newThread {
            let thread = Thread { [self] in self.work() }
            thread.name = "\(name).\(number)"
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
