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
            self.lock.perform { effects in
                switch event {
                case .value(let value):
                    guard unit.isLive else { return }
                    next(value, unit, &effects)
                case .failure(let error):
                    unit.complete(with: .failure(error), &effects)
                case .progress(let completed, let total, let file):
                    unit.reportProgress(completed: completed, total: total, file: file, &effects)
                }
            }
        }
        unit.attach(upstream: subscription, &effects)
    }

    /// Completes a unit that serves requests for `request.key`: a success is
    /// stored in the memory cache first, when the unit is still live and any
    /// of its subscribers, ever, asked for that (a unit that ended, say at the
    /// decode time limit, drops its late result). The store happens outside
    /// the engine lock (evicted bitmaps are freed there) and before the unit
    /// leaves its table, so an identical request arriving meanwhile finds one
    /// or the other (one who joins between the two locked sections and is
    /// the first to ask for storing has it stored after the unit completes).
    /// Call without the lock.
    func finish(
        _ unit: SharedWork<ImageResponse>, _ request: ValidatedRequest, _ result: Result<ImageResponse, VipsError>
    ) {
        guard case .success(let response) = result, let memoryCache else {
            return lock.perform { effects in unit.complete(with: result, &effects) }
        }
        let stored = lock.perform { _ in unit.isLive && unit.storesResult }
        if stored { memoryCache.store(response.bitmap, for: request.key) }
        let storeLate = lock.perform { effects -> Bool in
            let late = !stored && unit.isLive && unit.storesResult
            unit.complete(with: result, &effects)
            return late
        }
        if storeLate { memoryCache.store(response.bitmap, for: request.key) }
    }
}
