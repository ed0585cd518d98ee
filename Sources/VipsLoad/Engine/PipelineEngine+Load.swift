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
        if usesDefaultLoader, source.isLocal {
            unit.enqueue({ [weak self] in self?.runLocalLoad(unit, source) }, on: ioPool, &effects)
        } else if policy.cacheOnly || (!source.isLocal && dataCache != nil && policy.reads) {
            unit.enqueue({ [weak self] in self?.runCacheLookup(unit, source, policy) }, on: ioPool, &effects)
        } else {
            enqueueNetwork(unit, source, policy, revalidating: nil, &effects)
        }
        return unit
    }

    /// Queues the unit's load on the network lane; the unit cancels it there
    /// while it waits, and cancels its Swift task once it runs.
    private func enqueueNetwork(
        _ unit: SharedWork<ImageData>, _ source: ImageSource, _ policy: DataPolicy,
        revalidating stale: DiskCache.Hit?, _ effects: inout Effects
    ) {
        unit.enqueue(
            { [weak self] in await self?.runRemoteLoad(unit, source, policy, revalidating: stale) }, on: loadLane,
            &effects)
    }

    /// Reads a local source on an I/O thread (a file is checked, not read:
    /// libvips reads it while decoding).
    private func runLocalLoad(_ unit: SharedWork<ImageData>, _ source: ImageSource) {
        guard lock.perform({ _ in unit.begin() }) else { return }
        metrics.dataLoadsStarted.add(1, ordering: .relaxed)
        let result = Result { () throws(VipsError) -> ImageData in try DataLoader.local(source) }
        finishLoad(unit, result)
    }

    /// Looks a remote source up in the data cache on an I/O thread: a fresh
    /// entry (any entry, for a cache-only unit) completes the unit at once,
    /// without waiting behind downloads; otherwise the load moves to the
    /// network lane (revalidating a stale entry), or a cache-only unit fails
    /// with `.notCached`. The unit stays pending meanwhile (a lookup is not
    /// the load): when its subscribers leave, the lookup's answer is dropped.
    private func runCacheLookup(_ unit: SharedWork<ImageData>, _ source: ImageSource, _ policy: DataPolicy) {
        guard lock.perform({ _ in unit.isLive }) else { return }
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
        lock.perform { effects in enqueueNetwork(unit, source, policy, revalidating: stale, &effects) }
    }

    /// Runs a load on the network lane, in the lane's Swift task (cancelled
    /// when the unit is disposed of, which runs the loader's cancellation
    /// handlers after the engine lock is released).
    private func runRemoteLoad(
        _ unit: SharedWork<ImageData>, _ source: ImageSource, _ policy: DataPolicy,
        revalidating stale: DiskCache.Hit?
    ) async {
        guard lock.perform({ _ in unit.begin() }), !Task.isCancelled else { return }
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
                            self?.lock.perform { effects in
                                unit.reportProgress(completed: completed, total: total, &effects)
                            }
                        },
                        cache: policy.writes ? dataCache as? DiskCache : nil,
                        revalidating: stale))
            } else {
                result = .success(try await loader.loadData(for: source))
                if let dataCache, policy.writes, !source.isLocal, case .success(let data) = result {
                    // A custom loader's result (or a custom cache): stored by the pipeline, on the I/O lane.
                    let priority = lock.perform { _ in unit.priority }
                    result = .success(
                        await ioPool.run(priority: priority) {
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
        lock.perform { effects in unit.complete(with: result, &effects) }
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
