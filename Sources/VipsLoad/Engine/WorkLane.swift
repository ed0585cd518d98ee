/// A queue the engine's units put their work on, highest priority first: the
/// decode and disk I/O thread pools (`PriorityThreadPool`) and the loading
/// lane (`WorkQueue`).
///
/// Items are named by IDs reserved ahead (`reserveID()`), so a unit can record
/// its work, and cancel or move it, before the effect that enqueues it has
/// run: cancelling or moving an ID that is not (yet) waiting does nothing
/// (the work then finds its unit gone when it starts). A unit queues its work
/// through `SharedWork.enqueue(_:on:_:)`, the one place that links the two.
protocol WorkLane: Sendable {
    /// What the lane runs.
    associatedtype Job: Sendable

    /// A fresh item ID (no lock taken).
    func reserveID() -> Int

    /// Adds `job` under a reserved ID.
    func enqueue(_ id: Int, priority: ImageRequest.Priority, _ job: Job)

    /// Stops the item: a waiting one never starts; a running one is told to
    /// stop where the lane can tell it (a Swift task is cancelled). False
    /// when the item was neither waiting nor running.
    @discardableResult
    func cancel(_ id: Int) -> Bool

    /// Moves a waiting item to the back of `priority`'s line.
    func setPriority(_ priority: ImageRequest.Priority, of id: Int)
}

extension PriorityThreadPool: WorkLane {
    typealias Job = @Sendable () -> Void
}

extension SharedWork {
    /// Queues `job` on `lane` as the unit's work: until it starts, the unit
    /// moves it to its new priority when that changes, and cancels it when the
    /// unit is disposed of. Nothing is queued for a unit already gone. Call
    /// with the lock held; the job is enqueued after the lock is released.
    func enqueue<Lane: WorkLane>(_ job: Lane.Job, on lane: Lane, _ effects: inout Effects) {
        guard isLive else { return }
        let id = lane.reserveID()
        attach(WorkHandle(cancel: { lane.cancel(id) }, setPriority: { lane.setPriority($0, of: id) }), &effects)
        let priority = self.priority
        effects.add { lane.enqueue(id, priority: priority, job) }
    }
}
