import Synchronization

/// Runs one load per key however many callers ask for it at once: later
/// callers wait for the load in flight and get the same `ImageData`.
///
/// A caller that is cancelled leaves at once; when the last one leaves, the
/// shared load is cancelled (which cancels its network task) and forgotten,
/// so the next caller starts afresh.
final class HTTPFetchCoalescer: Sendable {
    private struct Job {
        let id: UInt64
        var task: Task<Void, Never>?
        var waiters: [UInt64: CheckedContinuation<ImageData, any Error>] = [:]
    }

    private struct State {
        var jobs: [String: Job] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The result of `operation` for `key`, shared with concurrent callers.
    /// `joined` runs when this caller joins a load already in flight.
    func load(_ key: String, joined: @Sendable () -> Void,
              operation: @escaping @Sendable () async throws -> ImageData) async throws -> ImageData {
        let waiterID = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ImageData, any Error>) in
                let start = state.withLock { state -> (jobID: UInt64?, cancelled: Bool) in
                    if Task.isCancelled { return (nil, true) }
                    if state.jobs[key] != nil {
                        state.jobs[key]?.waiters[waiterID] = continuation
                        return (nil, false)
                    }
                    state.nextID += 1
                    var job = Job(id: state.nextID)
                    job.waiters[waiterID] = continuation
                    state.jobs[key] = job
                    return (job.id, false)
                }
                if start.cancelled {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                guard let jobID = start.jobID else {
                    joined()
                    return
                }
                let task = Task { [self] in
                    let result: Result<ImageData, any Error>
                    do {
                        result = .success(try await operation())
                    } catch {
                        result = .failure(error)
                    }
                    finish(key, jobID: jobID, result)
                }
                let orphaned = state.withLock { state -> Bool in
                    guard state.jobs[key]?.id == jobID else { return true }
                    state.jobs[key]?.task = task
                    return false
                }
                // Every caller left before the task was recorded.
                if orphaned { task.cancel() }
            }
        } onCancel: {
            leave(key, waiterID: waiterID)
        }
    }

    private func leave(_ key: String, waiterID: UInt64) {
        let (continuation, task) = state.withLock { state -> (CheckedContinuation<ImageData, any Error>?, Task<Void, Never>?) in
            guard var job = state.jobs[key], let continuation = job.waiters.removeValue(forKey: waiterID) else {
                return (nil, nil)
            }
            if job.waiters.isEmpty {
                state.jobs[key] = nil
                return (continuation, job.task)
            }
            state.jobs[key] = job
            return (continuation, nil)
        }
        task?.cancel()
        continuation?.resume(throwing: CancellationError())
    }

    private func finish(_ key: String, jobID: UInt64, _ result: Result<ImageData, any Error>) {
        let waiters = state.withLock { state -> [CheckedContinuation<ImageData, any Error>] in
            guard let job = state.jobs[key], job.id == jobID else { return [] }
            state.jobs[key] = nil
            return Array(job.waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result) }
    }
}
