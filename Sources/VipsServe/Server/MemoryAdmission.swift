import Synchronization
import VipsCore

/// Admits renders within a byte budget, so that the renders running at once
/// never hold more memory (as `RenderMemoryEstimate` counts it) than the
/// budget, whatever mix of requests arrives.
///
/// - `acquire(_:)` returns at once when the bytes fit and no one waits;
///   else the caller waits in line. The line is first in, first out: a
///   large render at the head is not overtaken by small ones behind it, so
///   it cannot be starved.
/// - A request for more than the whole budget is refused at once
///   (`Refusal.overBudget`): it could never run.
/// - A waiter whose task is cancelled leaves the line at once (its
///   `acquire` throws `Refusal.cancelled`), and whoever it held up is
///   admitted.
/// - The bytes come back when the returned `Ticket` is released, which is
///   idempotent and also happens when the ticket is deallocated, so every
///   path gives them back.
///
/// No continuation is resumed while the lock is held.
final class MemoryAdmission: Sendable {
    /// Why `acquire(_:)` admitted nothing.
    enum Refusal: Error, Sendable, Equatable {
        /// The render needs more than the whole budget.
        case overBudget(bytes: Int, budget: Int)
        /// The waiting task was cancelled.
        case cancelled
    }

    /// Admitted bytes, given back by `release()` (once, however often it is
    /// called) or when the ticket is deallocated.
    final class Ticket: Sendable {
        /// The bytes this ticket holds.
        let bytes: Int
        private let admission: MemoryAdmission
        private let released = Atomic<Bool>(false)

        fileprivate init(bytes: Int, admission: MemoryAdmission) {
            self.bytes = bytes
            self.admission = admission
        }

        /// Gives the bytes back; later calls do nothing.
        func release() {
            guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
            admission.give(back: bytes)
        }

        deinit { release() }
    }

    /// The gate's counts as of one moment.
    struct Snapshot: Sendable, Equatable {
        /// The budget in bytes.
        var budget: Int
        /// Bytes held by admitted renders.
        var bytesInUse: Int
        /// The most bytes ever held at once.
        var peakBytesInUse: Int
        /// Requests waiting in line.
        var waiters: Int
        /// Requests refused because they need more than the whole budget.
        var refusals: Int
    }

    private typealias Continuation = CheckedContinuation<Result<Ticket, Refusal>, Never>

    private struct Waiter {
        let id: UInt64
        let bytes: Int
        let continuation: Continuation
    }

    private struct State {
        var inUse = 0
        var peak = 0
        var refusals = 0
        var line: [Waiter] = []
        /// Waiters announced but not yet in `line` (their continuation is being made).
        var announced: Set<UInt64> = []
        /// Announced waiters cancelled before they were in line.
        var cancelledEarly: Set<UInt64> = []
        var nextID: UInt64 = 0

        /// Admits waiters from the head of the line while they fit.
        mutating func admitHead(_ admission: MemoryAdmission) -> [(Continuation, Ticket)] {
            var admitted: [(Continuation, Ticket)] = []
            while let head = line.first, inUse + head.bytes <= admission.budget {
                line.removeFirst()
                take(head.bytes)
                admitted.append((head.continuation, Ticket(bytes: head.bytes, admission: admission)))
            }
            return admitted
        }

        mutating func take(_ bytes: Int) {
            inUse += bytes
            peak = max(peak, inUse)
        }
    }

    /// The budget in bytes.
    let budget: Int
    private let state = LockedState(State(), rank: .leaf)

    /// A gate admitting at most `budget` bytes at once (at least 1).
    init(budget: Int) {
        self.budget = max(1, budget)
    }

    /// Waits until `bytes` fit in the budget and everyone who came first is
    /// admitted, then holds them until the ticket is released.
    ///
    /// - Throws: `Refusal.overBudget` at once when `bytes` is over the whole
    ///   budget; `Refusal.cancelled` when the task is cancelled while waiting.
    func acquire(_ bytes: Int) async throws(Refusal) -> Ticket {
        let bytes = max(0, bytes)
        enum Start {
            case refused, admitted(Ticket), wait(UInt64)
        }
        let start = state.withLock { state -> Start in
            guard bytes <= budget else {
                state.refusals += 1
                return .refused
            }
            if state.line.isEmpty, state.announced.isEmpty, state.inUse + bytes <= budget {
                state.take(bytes)
                return .admitted(Ticket(bytes: bytes, admission: self))
            }
            let id = state.nextID
            state.nextID += 1
            state.announced.insert(id)
            return .wait(id)
        }
        let id: UInt64
        switch start {
        case .refused: throw .overBudget(bytes: bytes, budget: budget)
        case .admitted(let ticket): return ticket
        case .wait(let waiting): id = waiting
        }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Continuation) in
                let (cancelled, admitted) = state.withLock { state -> (Bool, [(Continuation, Ticket)]) in
                    state.announced.remove(id)
                    if state.cancelledEarly.remove(id) != nil { return (true, state.admitHead(self)) }
                    state.line.append(Waiter(id: id, bytes: bytes, continuation: continuation))
                    return (false, state.admitHead(self))
                }
                for (waiter, ticket) in admitted { waiter.resume(returning: .success(ticket)) }
                if cancelled { continuation.resume(returning: .failure(.cancelled)) }
            }
        } onCancel: {
            let (left, admitted) = state.withLock { state -> (Continuation?, [(Continuation, Ticket)]) in
                if let index = state.line.firstIndex(where: { $0.id == id }) {
                    let waiter = state.line.remove(at: index)
                    // Whoever it held up may fit now.
                    return (waiter.continuation, state.admitHead(self))
                }
                if state.announced.contains(id) { state.cancelledEarly.insert(id) }
                return (nil, [])
            }
            left?.resume(returning: .failure(.cancelled))
            for (waiter, ticket) in admitted { waiter.resume(returning: .success(ticket)) }
        }
        return try result.get()
    }

    /// The counts now.
    var snapshot: Snapshot {
        state.withLock { state in
            Snapshot(
                budget: budget, bytesInUse: state.inUse, peakBytesInUse: state.peak,
                waiters: state.line.count + state.announced.count, refusals: state.refusals)
        }
    }

    /// A ticket's bytes back; admits whoever fits now.
    private func give(back bytes: Int) {
        let admitted = state.withLock { state in
            state.inUse -= bytes
            return state.admitHead(self)
        }
        for (waiter, ticket) in admitted { waiter.resume(returning: .success(ticket)) }
    }
}
