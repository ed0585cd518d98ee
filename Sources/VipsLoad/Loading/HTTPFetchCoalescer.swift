
/// Runs one load per key however many callers ask for it at once: later
/// callers wait for the load in flight and get the same `ImageData`.
///
/// A caller that is cancelled leaves at once; when the last one leaves, the
/// shared load is cancelled (which cancels its network task) and forgotten,
/// so the next caller starts afresh.
///
/// Callers are woken with no value and then collect the result themselves,
/// the last one taking the coalescer's own reference. So once every caller
/// has dropped its `ImageData`, its temporary file is gone: no reference
/// lingers in the finishing task, however the compiler places its copies.
final class HTTPFetchCoalescer: Sendable {
    private struct Job {
        let id: UInt64
        let outcome = Outcome()
        var task: Task<Void, Never>?
        var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    }

    private struct State {
        var jobs: [String: Job] = [:]
        var nextID: UInt64 = 0
    }

    private let state = LockedState(State())

    /// The result of `operation` for `key`, shared with concurrent callers.
    /// `joined` runs when this caller joins a load already in flight.
    func load(_ key: String, joined: @Sendable () -> Void,
              operation: @escaping @Sendable () async throws -> ImageData) async throws -> ImageData {
        let waiterID = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        var outcome: Outcome?
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let start = state.withLock { state -> (job: Job?, joined: Outcome?) in
                    if Task.isCancelled { return (nil, nil) }
                    if let job = state.jobs[key] {
                        state.jobs[key]?.waiters[waiterID] = continuation
                        return (nil, job.outcome)
                    }
                    state.nextID += 1
                    var job = Job(id: state.nextID)
                    job.waiters[waiterID] = continuation
                    state.jobs[key] = job
                    return (job, nil)
                }
                if let shared = start.joined {
                    outcome = shared
                    joined()
                    return
                }
                guard let job = start.job else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                let (jobID, shared) = (job.id, job.outcome)
                outcome = shared
                let task = Task { [self] in
                    let waiters = await settle(key, jobID: jobID, outcome: shared, operation)
                    for waiter in waiters { waiter.resume() }
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
        guard let outcome else { throw CancellationError() }
        return try outcome.collect().get()
    }

    /// Runs the load, forgets the job and leaves the result with its waiters'
    /// `Outcome`. Returns the waiters to wake: by then this function's copies
    /// of the result are gone.
    private func settle(_ key: String, jobID: UInt64, outcome: Outcome,
                        _ operation: @Sendable () async throws -> ImageData) async -> [CheckedContinuation<Void, any Error>] {
        let result: Result<ImageData, any Error>
        do {
            result = .success(try await operation())
        } catch {
            result = .failure(error)
        }
        let waiters = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
            guard let current = state.jobs[key], current.id == jobID else { return [] }
            state.jobs[key] = nil
            return Array(current.waiters.values)
        }
        outcome.deposit(result, collectors: waiters.count)
        return waiters
    }

    private func leave(_ key: String, waiterID: UInt64) {
        let (continuation, task) = state.withLock { state -> (CheckedContinuation<Void, any Error>?, Task<Void, Never>?) in
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
}

/// One load's result, collected once by each waiter that was still waiting
/// when it finished; the last collector takes the final reference.
private final class Outcome: Sendable {
    private struct Slot {
        var result: Result<ImageData, any Error>?
        var collectors = 0
    }

    private let slot = LockedState(Slot())

    func deposit(_ result: Result<ImageData, any Error>, collectors: Int) {
        guard collectors > 0 else { return }
        slot.withLock {
            $0.result = result
            $0.collectors = collectors
        }
    }

    func collect() -> Result<ImageData, any Error> {
        slot.withLock { slot in
            // Unreachable for a woken waiter; a cancellation is the honest answer if it ever were.
            guard let result = slot.result else { return .failure(CancellationError()) }
            slot.collectors -= 1
            if slot.collectors <= 0 { slot.result = nil }
            return result
        }
    }
}
