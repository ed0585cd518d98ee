extension PipelineEngine {
    /// Makes `unit` wait for `upstream`'s value (a decode for its data, a
    /// processing unit for its decode): the value (and the unit, held weakly
    /// meanwhile) is handed to `next` under the engine lock while `unit` is
    /// still live; a failure completes `unit` with it, and progress is passed
    /// on to `unit`'s own subscribers. The subscription is left when `unit`
    /// ends. Call with the lock held.
    func chain<Upstream: Sendable, Value: Sendable>(
        _ unit: SharedWork<Value>, to upstream: SharedWork<Upstream>, _ effects: inout Effects,
        next: @escaping @Sendable (Upstream, SharedWork<Value>, inout Effects) -> Void
    ) {
        let subscription = upstream.subscribe(priority: unit.priority, &effects) { [weak self, weak unit] event in
            guard let self, let unit else { return }
            self.perform { effects in
                switch event {
                case .value(let value):
                    guard unit.isLive else { return }
                    next(value, unit, &effects)
                case .failure(let error):
                    unit.complete(with: .failure(error), &effects)
                case .progress(let completed, let total):
                    unit.reportProgress(completed: completed, total: total, &effects)
                }
            }
        }
        unit.attach(upstream: subscription, &effects)
    }

    /// Queues `job` for `unit` on one of the engine's thread pools: the unit
    /// can cancel it or move it to its new priority until it starts. Call with
    /// the lock held; the job is enqueued after the lock is released.
    func enqueue<Value: Sendable>(
        _ unit: SharedWork<Value>, on pool: PriorityThreadPool, _ effects: inout Effects,
        _ job: @escaping @Sendable () -> Void
    ) {
        let id = pool.reserveID()
        unit.attach(WorkHandle(cancel: { pool.cancel(id) }, setPriority: { pool.setPriority($0, of: id) }), &effects)
        let priority = unit.priority
        effects.add { pool.enqueue(id, priority: priority, job) }
    }
}
