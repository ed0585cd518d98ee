/// Bounds the downloads running at once: a FIFO async semaphore whose waiters
/// leave the queue as soon as their task is cancelled.
final class HTTPDownloadLimiter: Sendable {
    private struct State {
        var available: Int
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID: UInt64 = 0
    }

    private let state: LockedState<State>

    init(slots: Int) {
        state = LockedState(State(available: max(1, slots)))
    }

    /// Waits for a slot; throws `CancellationError` if cancelled first.
    func acquire() async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Checked under the lock: a cancellation either happened before
                // (seen here) or finds the waiter in the queue.
                let granted = state.withLock { state -> Bool? in
                    if Task.isCancelled { return nil }
                    if state.available > 0 {
                        state.available -= 1
                        return true
                    }
                    state.waiters.append((id, continuation))
                    return false
                }
                switch granted {
                case true?: continuation.resume()
                case nil: continuation.resume(throwing: CancellationError())
                case false?: break
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Callers waiting for a slot now.
    var waitingCount: Int { state.withLock { $0.waiters.count } }

    /// Returns a slot, handing it straight to the longest waiter if any.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume()
    }
}
