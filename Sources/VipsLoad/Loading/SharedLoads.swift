/// Runs one load per key however many callers ask for it at once, for an
/// `HTTPDataLoader` used on its own (a pipeline coalesces loads itself): each
/// load is a unit of the engine's shared-work primitive (`SharedWork`), in a
/// table of its own.
///
/// A caller that is cancelled leaves at once; when the last one leaves, the
/// load is cancelled (which cancels its network task) and forgotten, so the
/// next caller starts afresh. Failures are never kept.
///
/// The result travels in an `Outcome` box that each caller collects once;
/// the last collector takes the final reference. So once every caller has
/// dropped its `ImageData`, its temporary file is gone: no reference lingers
/// in the finishing task, however the compiler places its copies.
final class SharedLoads: @unchecked Sendable {
    private let lock = WorkLock()
    // Guarded by `lock`.
    private let loads = WorkTable<String, Outcome>()
    /// Where each load runs, in a Swift task of its own: no limit here (the
    /// loader's download limiter bounds the network).
    private let lane = WorkQueue(maxConcurrent: .max)

    /// The result of `operation` for `key`, shared with concurrent callers.
    /// `joined` runs when this caller joins a load already in flight.
    func load(
        _ key: String, joined: @Sendable () -> Void,
        operation: @escaping @Sendable () async throws -> ImageData
    ) async throws -> ImageData {
        let waiter = Waiter()
        let (subscription, wasJoined) = lock.perform { effects -> (WorkSubscription, Bool) in
            let (unit, wasJoined) = loads.join(key) {
                let unit = SharedWork<Outcome>(
                    priority: .normal, retainsValue: false, finishesWithoutSubscribers: false)
                unit.enqueue(
                    { [self] in
                        // The result's copies die with `settle`'s frame, before anyone is woken.
                        await settle(unit, operation).run()
                    }, on: lane, &effects)
                return unit
            }
            let subscription = unit.subscribe(priority: .normal, &effects) { event in
                // Only the result wakes a caller (progress is the pipeline's business).
                if case .progress = event { return }
                waiter.wake(event)
            }
            return (subscription, wasJoined)
        }
        if wasJoined { joined() }
        let outcome = try await withTaskCancellationHandler {
            try await waiter.wait()
        } onCancel: {
            waiter.wake(.failure(.cancelled(key)))
            lock.perform { effects in subscription.cancel(&effects) }
        }
        return try outcome.collect().get()
    }

    /// Runs the load and leaves its result in an `Outcome` for the callers
    /// still waiting; returns the effects that wake them.
    private func settle(
        _ unit: SharedWork<Outcome>, _ operation: @Sendable () async throws -> ImageData
    ) async -> Effects {
        guard lock.perform({ _ in unit.begin() }), !Task.isCancelled else { return Effects() }
        let result: Result<ImageData, any Error>
        do {
            result = .success(try await operation())
        } catch {
            result = .failure(error)
        }
        let outcome = Outcome(result)
        return lock.collecting { effects in
            outcome.expect(collectors: unit.subscriberCount)
            unit.complete(with: .success(outcome), &effects)
        }
    }
}

/// One caller waiting for its shared load: woken once, with the outcome or a failure.
private final class Waiter: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Outcome, any Error>?
        var event: SharedWork<Outcome>.Event?
    }

    private let state = LockedState(State(), rank: .task)

    func wait() async throws -> Outcome {
        try await withCheckedThrowingContinuation { continuation in
            let event = state.withLock { state -> SharedWork<Outcome>.Event? in
                if let event = state.event { return event }
                state.continuation = continuation
                return nil
            }
            if let event { Self.resume(continuation, with: event) }
        }
    }

    /// Delivers the first event; later ones are ignored.
    func wake(_ event: SharedWork<Outcome>.Event) {
        let continuation = state.withLock { state -> CheckedContinuation<Outcome, any Error>?? in
            guard state.event == nil else { return .none }
            state.event = event
            defer { state.continuation = nil }
            return .some(state.continuation)
        }
        if case .some(.some(let continuation)) = continuation { Self.resume(continuation, with: event) }
    }

    private static func resume(
        _ continuation: CheckedContinuation<Outcome, any Error>, with event: SharedWork<Outcome>.Event
    ) {
        switch event {
        case .value(let outcome): continuation.resume(returning: outcome)
        // A caller that left is told as a Swift task is: `CancellationError`.
        case .failure(let error) where error.kind == .cancelled: continuation.resume(throwing: CancellationError())
        case .failure(let error): continuation.resume(throwing: error)
        // Never delivered (filtered at the subscription); ending the wait is the safe answer.
        case .progress: continuation.resume(throwing: CancellationError())
        }
    }
}

/// One load's result, collected once by each caller that was still waiting
/// when it finished; the last collector takes the final reference.
private final class Outcome: Sendable {
    private struct Slot {
        var result: Result<ImageData, any Error>?
        var collectors = 0
    }

    private let slot: LockedState<Slot>

    init(_ result: Result<ImageData, any Error>) {
        slot = LockedState(Slot(result: result), rank: .leaf)
    }

    /// Sets how many callers will collect; with none, the result goes at once.
    func expect(collectors: Int) {
        slot.withLock { slot in
            slot.collectors = collectors
            if collectors <= 0 { slot.result = nil }
        }
    }

    func collect() -> Result<ImageData, any Error> {
        slot.withLock { slot in
            // Unreachable for a woken caller; a cancellation is the honest answer if it ever were.
            guard let result = slot.result else { return .failure(CancellationError()) }
            slot.collectors -= 1
            if slot.collectors <= 0 { slot.result = nil }
            return result
        }
    }
}
