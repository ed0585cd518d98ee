import Foundation

extension PipelineEngine {
    /// Creates the data unit for a source and queues its first step: local
    /// sources of the default loader are read on the I/O lane; remote sources
    /// are looked up in the data cache on the I/O lane (unless `policy` skips
    /// its reads), then loaded on the network lane; everything else goes to
    /// the network lane at once. A cache-only unit never reaches the network
    /// lane: its miss is `.notCached`. The unit keeps the data while decodes
    /// of any size hold it.
    func startLoad(
        _ source: ImageSource, key: String, policy: DataPolicy, priority: ImageRequest.Priority,
        _ effects: inout Effects
    ) -> SharedWork<ImageData> {
        let unit = SharedWork<ImageData>(priority: priority, retainsValue: true, finishesWithoutSubscribers: false)
        loads.insert(unit, for: key)
        if usesDefaultLoader, source.isLocal {
            enqueue(unit, on: ioPool, &effects) { [weak self] in self?.runLocalLoad(unit, source) }
        } else if policy.cacheOnly || (!source.isLocal && dataCache != nil && policy.reads) {
            enqueue(unit, on: ioPool, &effects) { [weak self] in self?.runCacheLookup(unit, source, policy) }
        } else {
            enqueueNetwork(unit, source, policy, revalidating: nil, &effects)
        }
        return unit
    }

    private func enqueueNetwork(
        _ unit: SharedWork<ImageData>, _ source: ImageSource, _ policy: DataPolicy,
        revalidating stale: DiskCache.Hit?, _ effects: inout Effects
    ) {
        let lane = loadLane
        let id = lane.reserveID()
        unit.attach(WorkHandle(cancel: { lane.cancel(id) }, setPriority: { lane.setPriority($0, of: id) }), &effects)
        let priority = unit.priority
        effects.add { [weak self] in
            lane.enqueue(id, priority: priority) { [weak self] in
                guard let self else { return lane.finish() }
                self.startRemoteLoad(unit, source, policy, revalidating: stale)
            }
        }
    }

    /// Reads a local source on an I/O thread (a file is checked, not read:
    /// libvips reads it while decoding).
    private func runLocalLoad(_ unit: SharedWork<ImageData>, _ source: ImageSource) {
        guard perform({ _ in unit.begin() }) else { return }
        metrics.dataLoadsStarted.add(1, ordering: .relaxed)
        let result = Result { () throws(VipsError) -> ImageData in try DataLoader.local(source) }
        finishLoad(unit, result)
    }

    /// Looks a remote source up in the data cache on an I/O thread: a fresh
    /// entry (any entry, for a cache-only unit) completes the unit at once,
    /// without waiting behind downloads; otherwise the load moves to the
    /// network lane (revalidating a stale entry), or a cache-only unit fails
    /// with `.notCached`.
    private func runCacheLookup(_ unit: SharedWork<ImageData>, _ source: ImageSource, _ policy: DataPolicy) {
        guard perform({ _ in unit.begin() }) else { return }
        var stale: DiskCache.Hit?
        var fresh: ImageData?
        if let disk = dataCache as? DiskCache {
            if let hit = disk.lookup(policy.key) {
                if policy.cacheOnly || cachePolicy == .ignoreExpiry || hit.entry.isFresh() {
                    fresh = hit.data
                } else if hit.entry.http?.canRevalidate == true, policy.writes {
                    stale = hit
                }
            }
        } else if let dataCache, let hit = dataCache.cachedData(for: policy.key),
            policy.cacheOnly || cachePolicy == .ignoreExpiry || hit.isFresh()
        {
            fresh = hit.data
        }
        if let fresh {
            dataCacheHits.add(1, ordering: .relaxed)
            finishLoad(unit, .success(ImageData(fromDataCache: fresh)))
            return
        }
        if policy.cacheOnly {
            finishLoad(
                unit,
                .failure(
                    VipsError(
                        .notCached,
                        "\(source): not in the "
                            + (dataCache == nil
                                ? "memory cache (the pipeline has no data cache)" : "memory or data cache")
                            + ", and the request asks not to load it")))
            return
        }
        perform { effects in
            guard unit.isLive else { return }
            enqueueNetwork(unit, source, policy, revalidating: stale, &effects)
        }
    }

    /// Starts a network-lane load in its own Swift task; its handle lets the
    /// unit cancel it (which runs the loader's cancellation handlers, after
    /// the engine lock is released).
    private func startRemoteLoad(
        _ unit: SharedWork<ImageData>, _ source: ImageSource, _ policy: DataPolicy,
        revalidating stale: DiskCache.Hit?
    ) {
        let lane = loadLane
        let task = Task { [weak self] in
            defer { lane.finish() }
            await self?.runRemoteLoad(unit, source, policy, revalidating: stale)
        }
        perform { effects in
            unit.attach(WorkHandle(cancel: { task.cancel() }, setPriority: { _ in }), &effects)
        }
    }

    private func runRemoteLoad(
        _ unit: SharedWork<ImageData>, _ source: ImageSource, _ policy: DataPolicy,
        revalidating stale: DiskCache.Hit?
    ) async {
        // A unit that came through the cache lookup has begun already.
        let live = perform { _ in unit.begin() || unit.isLive }
        guard live, !Task.isCancelled else { return }
        metrics.dataLoadsStarted.add(1, ordering: .relaxed)
        var result: Result<ImageData, VipsError>
        do {
            if let httpLoader, !source.isLocal, dataCache == nil || dataCache is DiskCache {
                // The default loader streams into a disk cache and revalidates its entries itself.
                result = .success(
                    try await httpLoader.download(
                        source, key: policy.key, headers: policy.headers,
                        modifier: requestModifier,
                        progress: { [weak self] completed, total in
                            self?.perform { effects in
                                unit.reportProgress(completed: completed, total: total, &effects)
                            }
                        },
                        cache: policy.writes ? dataCache as? DiskCache : nil,
                        revalidating: stale))
            } else {
                result = .success(try await loader.loadData(for: source))
                if let dataCache, policy.writes, !source.isLocal, case .success(let data) = result {
                    // A custom loader's result (or a custom cache): stored by the pipeline, on the I/O lane.
                    result = .success(
                        await ioPool.run(priority: unit.priority) {
                            (try? dataCache.store(data, for: policy.key, http: nil)) ?? data
                        })
                }
            }
        } catch {
            result = .failure(VipsError.from(error, source: source))
        }
        finishLoad(unit, result)
    }

    private func finishLoad(_ unit: SharedWork<ImageData>, _ result: Result<ImageData, VipsError>) {
        if case .success(let data) = result { metrics.bytesLoaded.add(data.byteCount, ordering: .relaxed) }
        perform { effects in unit.complete(with: result, &effects) }
    }
}

extension PriorityThreadPool {
    /// Runs `body` on one of the pool's threads and returns its result.
    func run<T: Sendable>(priority: ImageRequest.Priority, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            enqueue(reserveID(), priority: priority) { continuation.resume(returning: body()) }
        }
    }
}

extension VipsError {
    /// Any error a loader threw, as a `VipsError`: cancellation is `.cancelled`,
    /// a foreign error `.internal`, each naming the source.
    static func from(_ error: any Error, source: ImageSource) -> VipsError {
        switch error {
        case let error as VipsError: return error
        case is CancellationError: return .cancelled(source.description)
        default: return VipsError(.internal, "\(source): \(error)")
        }
    }

    /// An error out of a stream that only ever throws `VipsError`.
    static func from(_ error: any Error) -> VipsError {
        (error as? VipsError) ?? VipsError(.internal, "\(error)")
    }
}
