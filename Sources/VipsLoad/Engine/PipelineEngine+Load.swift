import Foundation

extension PipelineEngine {
    /// Creates the data unit for a source and queues its first step: local
    /// sources of a `DataLoader` are read on the I/O lane; remote sources
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
        if readsLocalSources, source.isLocal {
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
        revalidating stale: CachedImageData?, _ effects: inout Effects
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
        var stale: CachedImageData?
        let hit = dataCache?.cachedData(for: policy.key)
        // Only the pipeline's own downloader can ask the server about a stored entry.
        switch cachePolicy.use(of: hit, cacheOnly: policy.cacheOnly, canRevalidate: httpLoader != nil && policy.writes)
        {
        case .serve(let data):
            dataCacheHits.add(1, ordering: .relaxed)
            finishLoad(unit, .success(ImageData(fromDataCache: data)))
            return
        case .revalidate(let entry): stale = entry
        case .load: break
        }
        if policy.cacheOnly {
            finishLoad(
                unit,
                .failure(
                    VipsError(
                        .notCached,
                        "not in the "
                            + (dataCache == nil
                                ? "memory cache (the pipeline has no data cache)" : "memory or data cache")
                            + ", and the request asks not to load it", source: source.description)))
            return
        }
        lock.perform { effects in enqueueNetwork(unit, source, policy, revalidating: stale, &effects) }
    }

    /// Runs a load on the network lane, in the lane's Swift task (cancelled
    /// when the unit is disposed of, which runs the loader's cancellation
    /// handlers after the engine lock is released).
    private func runRemoteLoad(
        _ unit: SharedWork<ImageData>, _ source: ImageSource, _ policy: DataPolicy,
        revalidating stale: CachedImageData?
    ) async {
        guard lock.perform({ _ in unit.begin() }), !Task.isCancelled else { return }
        metrics.dataLoadsStarted.add(1, ordering: .relaxed)
        var result: Result<ImageData, VipsError>
        do throws(VipsError) {
            if let httpLoader, !source.isLocal {
                // The pipeline's own downloader streams into the data cache and revalidates its entries itself.
                result = .success(
                    try await httpLoader.download(
                        source, key: policy.key, headers: policy.headers,
                        modifier: requestModifier, allowsRedirect: policy.allowsRedirect,
                        progress: { [weak self] completed, total, file in
                            self?.lock.perform { effects in
                                unit.reportProgress(completed: completed, total: total, file: file, &effects)
                            }
                        },
                        cache: policy.writes ? dataCache : nil,
                        revalidating: stale))
            } else {
                let data: ImageData
                do {
                    data = try await loader.loadData(for: source)
                } catch {
                    // The one place a loader's error becomes the pipeline's (a `VipsError` stays as it is).
                    throw VipsError(loading: error, source: source.description)
                }
                result = .success(data)
                if let dataCache, policy.writes, !source.isLocal {
                    // Another loader's result: stored by the pipeline, on the I/O lane.
                    let priority = lock.perform { _ in unit.priority }
                    result = .success(
                        await ioPool.run(priority: priority) { (try? dataCache.store(data, for: policy.key)) ?? data })
                }
            }
        } catch {
            result = .failure(error)
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

    /// Runs `body` on one of the pool's threads, as work the calling task's
    /// cancellation stops: while it waits it is taken out of the queue (it
    /// never runs, and the call throws `.cancelled` at once); while it runs
    /// the `DecodeCancellation` it runs under is cancelled, so the libvips
    /// work inside stops at its next region and the call throws when it returns.
    func runStoppable<T: Sendable>(
        priority: ImageRequest.Priority, label: String, _ body: @escaping @Sendable () throws(VipsError) -> T
    ) async throws(VipsError) -> T {
        let id = reserveID()
        let cancellation = DecodeCancellation()
        // The one resume: whoever takes the continuation first (the job, or a cancel that dequeued it).
        let waiting = LockedState<CheckedContinuation<Result<T, VipsError>, Never>?>(nil)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, VipsError>, Never>) in
                waiting.withLock { $0 = continuation }
                enqueue(id, priority: priority) {
                    let result = Result { () throws(VipsError) -> T in try cancellation.run(body) }
                    waiting.withLock { $0.take() }?.resume(returning: result)
                }
            }
        } onCancel: {
            cancellation.cancel()
            // Still queued: it never runs, and the caller is answered now.
            guard cancel(id) else { return }
            waiting.withLock { $0.take() }?.resume(returning: .failure(.cancelled(label)))
        }
        return try result.get()
    }
}

extension VipsError {
    /// Any error of a step that may throw others, as a `VipsError`:
    /// cancellation is `.cancelled`, a foreign error `.internal`, each naming
    /// the source.
    static func from(_ error: any Error, source: ImageSource) -> VipsError {
        switch error {
        case let error as VipsError: return error
        case is CancellationError: return .cancelled(source.description)
        default: return VipsError(.internal, "\(error)", source: source.description, underlying: error)
        }
    }

    /// An error out of a stream that only ever throws `VipsError`.
    static func from(_ error: any Error) -> VipsError {
        (error as? VipsError) ?? VipsError(.internal, "\(error)")
    }
}
