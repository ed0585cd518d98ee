import Foundation
import VipsCore
import VipsHTTP

/// The images being made, one per `RepresentationKey`: identical requests
/// in flight share one render (100 clients asking for one uncached thumbnail
/// make it once, and so decode once), and at most `limit` distinct renders
/// run or wait at once (beyond that a request is refused with 429).
///
/// Each request is a waiter on a render. A waiter leaves early when its
/// client hangs up or its time runs out, and gets its own outcome; when the
/// last waiter of a render leaves, the render's task is cancelled, and with
/// it the pipeline's work for it (unless another request of the pipeline
/// shares that work). A cancelled render keeps its place among the `limit`
/// until its task has returned, so the limit counts work, not answers: a
/// burst of requests that all time out cannot start more work than the limit
/// while the abandoned work is still stopping. A new request for its key
/// starts a render of its own. Deliveries and cancellations run after the lock.
final class RenderTable: Sendable {
    /// What a render (or an early leave) gives its waiters.
    enum Outcome: Sendable {
        /// A response to send; `tier` says where it came from, for the log ("disk", "miss").
        case response(HTTPResponse, tier: String)
        /// A failure to answer with.
        case failure(ErrorStatus)
    }

    /// Called once per waiter with its outcome, and whether it joined a
    /// render another request had started.
    typealias Delivery = @Sendable (Outcome, _ joined: Bool) -> Void

    /// How a request joined.
    enum Join: Sendable {
        /// It started a new render; it is waiter `id`.
        case started(id: UInt64)
        /// It joined a render already in flight.
        case joined(id: UInt64)
        /// `limit` renders are in flight already.
        case full
    }

    private struct Waiter {
        let deliver: Delivery
        let joined: Bool
    }

    private struct Render {
        let generation: UInt64
        var task: Task<Void, Never>?
        var waiters: [UInt64: Waiter]
    }

    private struct State {
        var renders: [String: Render] = [:]
        /// Generations of cancelled renders whose tasks have not returned yet.
        var stopping: Set<UInt64> = []
        var nextID: UInt64 = 0

        /// Renders holding a place: running or waiting, and stopping.
        var occupied: Int { renders.count + stopping.count }
    }

    /// Distinct renders in flight at most.
    let limit: Int
    private let state = LockedState(State(), rank: .engine)

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Distinct renders in flight now, those still stopping included.
    var count: Int { state.withLock { $0.occupied } }

    /// Cancelled renders whose work has not stopped yet.
    var stoppingCount: Int { state.withLock { $0.stopping.count } }

    /// Whether a render of a new key would be admitted now (a hint for
    /// answering 429 without deferring; `join` decides).
    func hasRoom(for key: String) -> Bool {
        state.withLock { $0.renders[key] != nil || $0.occupied < limit }
    }

    /// Joins the render of `key`, or starts one running `work` when none is
    /// in flight and there is room. `deliver` is called once, with the
    /// render's outcome or the waiter's own when it leaves first.
    func join(
        _ key: String, deliver: @escaping Delivery, work: @escaping @Sendable () async -> Outcome
    ) -> Join {
        let join = state.withLock { state -> (Join, UInt64?) in
            state.nextID += 1
            let id = state.nextID
            if state.renders[key] != nil {
                state.renders[key]?.waiters[id] = Waiter(deliver: deliver, joined: true)
                return (.joined(id: id), nil)
            }
            guard state.occupied < limit else { return (.full, nil) }
            state.nextID += 1
            let generation = state.nextID
            state.renders[key] = Render(
                generation: generation, task: nil, waiters: [id: Waiter(deliver: deliver, joined: false)])
            return (.started(id: id), generation)
        }
        guard let generation = join.1 else { return join.0 }
        let task = Task { [self] in
            let outcome = await work()
            finish(key, generation: generation, with: outcome)
        }
        // Every waiter may have left before the task existed: cancel it then.
        let abandoned = state.withLock { state -> Bool in
            guard state.renders[key]?.generation == generation else { return true }
            state.renders[key]?.task = task
            return false
        }
        if abandoned { task.cancel() }
        return join.0
    }

    /// Waiter `id` of `key` leaves with `outcome` (delivered to it alone),
    /// unless it has had its outcome already; true when it left. The render
    /// is cancelled when it was the last waiter.
    @discardableResult
    func leave(_ key: String, waiter id: UInt64, with outcome: Outcome) -> Bool {
        let (waiter, task) = state.withLock { state -> (Waiter?, Task<Void, Never>?) in
            guard var render = state.renders[key], let waiter = render.waiters.removeValue(forKey: id) else {
                return (nil, nil)
            }
            if render.waiters.isEmpty {
                state.renders[key] = nil
                state.stopping.insert(render.generation)
                return (waiter, render.task)
            }
            state.renders[key] = render
            return (waiter, nil)
        }
        guard let waiter else { return false }
        waiter.deliver(outcome, waiter.joined)
        task?.cancel()
        return true
    }

    /// Ends every render: each waiter gets `outcome`, each task is cancelled
    /// (a server that stops draining).
    func cancelAll(with outcome: Outcome) {
        let renders = state.withLock { state -> [Render] in
            defer { state.renders = [:] }
            for render in state.renders.values { state.stopping.insert(render.generation) }
            return Array(state.renders.values)
        }
        for render in renders {
            for waiter in render.waiters.values { waiter.deliver(outcome, waiter.joined) }
            render.task?.cancel()
        }
    }

    private func finish(_ key: String, generation: UInt64, with outcome: Outcome) {
        let waiters = state.withLock { state -> [Waiter] in
            // A cancelled render's place is free once its work has returned.
            if state.stopping.remove(generation) != nil { return [] }
            guard let render = state.renders[key], render.generation == generation else { return [] }
            state.renders[key] = nil
            return Array(render.waiters.values)
        }
        for waiter in waiters { waiter.deliver(outcome, waiter.joined) }
    }
}
