import Foundation
import Synchronization

/// The engine behind `ImagePipeline`: tasks subscribe to decode units, decode
/// units to data units (`SharedWork`), and each kind of work runs in its own
/// lane.
///
/// Lanes, one limiter per resource:
/// - **decode** (`decodePool`): `decodeConcurrency` named threads
///   (`vipsload-decode`), highest priority first; decodes and in-memory downscales.
/// - **disk I/O** (`ioPool`): two named threads (`vipsload-io`) for local files
///   and data-cache lookups, so neither waits behind a slow download nor blocks
///   Swift's cooperative pool.
/// - **network** (`loadLane`): calls to the data loader for remote sources,
///   `Configuration.loadLimit` at once, highest priority first; each runs in a
///   Swift task, cancelled when its last subscriber leaves.
///
/// Locking: all bookkeeping (the unit tables, every unit's subscribers and
/// phase, tasks' subscriptions) is guarded by one `WorkLock`, taken only in
/// `lock.perform`; locked sections collect `Effects` (start, enqueue, cancel,
/// deliver) that run after unlocking. The memory cache is written outside it
/// (`finish`), so bitmaps it evicts are freed under no engine lock. Lock order
/// (asserted in debug builds by `Lock`): engine → task → queue → cache;
/// nothing is called back while any of them is held.
final class PipelineEngine: @unchecked Sendable {
    let metrics = MetricCounters()
    let memoryCache: MemoryCache?
    /// The loader the network lane calls: a custom loader (for every
    /// source), or a `DataLoader`'s `remoteLoader` (for remote ones).
    let loader: any ImageDataLoading
    /// The pipeline's own downloader, with a `DataLoader` that has no
    /// `remoteLoader` (the default): it streams into the data cache and
    /// revalidates its entries. Nil otherwise.
    let httpLoader: HTTPDataLoader?
    /// Consulted before any loader for remote sources.
    let dataCache: (any ImageDataCaching)?
    let cachePolicy: HTTPCachePolicy
    /// `Configuration.dataCachePolicy` and `processedImageFormat`.
    let dataCachePolicy: DataCachePolicy
    let processedImageFormat: OutputFormat
    /// `Configuration.requestModifier`, for the default HTTP loader's downloads.
    let requestModifier: RequestModification.Modifier?
    /// Data-cache hits served by the pipeline's own lookups.
    let dataCacheHits = Atomic<Int>(0)
    let decoder: ImageDecoder
    let resizesFromLargerCachedImages: Bool
    /// `Configuration.stopsAbandonedWork`.
    let stopsAbandonedWork: Bool
    /// `Configuration.decodeTimeLimit`.
    let decodeTimeLimit: Duration?
    /// `Configuration.previewInterval`.
    let previewInterval: Duration
    /// Whether the configured loader is a `DataLoader`, whose local sources
    /// the engine reads on the I/O lane instead of the network lane.
    let readsLocalSources: Bool

    let decodePool: PriorityThreadPool
    let ioPool: PriorityThreadPool
    let loadLane: WorkQueue

    /// Test hook: called on the decode thread as each decode or downscale starts.
    let decodeObserver = LockedState<(@Sendable (ImageCacheKey) -> Void)?>(nil)
    /// Test hook: called on the decode thread as each processing unit's processors start.
    let processObserver = LockedState<(@Sendable (ImageCacheKey) -> Void)?>(nil)

    let lock = WorkLock()
    // Guarded by `lock`.
    /// Decode units, and processing units (keys with processors) beside them.
    let decodes = WorkTable<WorkKey, ImageResponse>()
    let loads = WorkTable<String, ImageData>()
    var attachedTasks = 0

    init(configuration: ImagePipeline.Configuration) {
        memoryCache = configuration.memoryCache
        decoder = ImageDecoder(options: configuration.decodeOptions)
        // The default loader is a value like any other: any `DataLoader` gets the
        // pipeline's lanes, whether made by `Configuration()` or passed in.
        if let standard = configuration.dataLoader as? DataLoader {
            readsLocalSources = true
            if let remote = standard.remoteLoader {
                loader = remote
                httpLoader = nil
            } else {
                let http = HTTPDataLoader(configuration: configuration.http, cache: nil, limitsDownloads: false)
                loader = http
                httpLoader = http
            }
        } else {
            readsLocalSources = false
            loader = configuration.dataLoader
            httpLoader = nil
        }
        dataCache = configuration.dataCache
        cachePolicy = configuration.http.cachePolicy
        requestModifier = configuration.requestModifier
        dataCachePolicy = configuration.dataCachePolicy
        processedImageFormat = configuration.processedImageFormat
        resizesFromLargerCachedImages = configuration.resizesFromLargerCachedImages
        stopsAbandonedWork = configuration.stopsAbandonedWork
        decodeTimeLimit = configuration.decodeTimeLimit
        previewInterval = configuration.previewInterval
        decodePool = PriorityThreadPool(name: "vipsload-decode", maxThreads: configuration.decodeConcurrency)
        ioPool = PriorityThreadPool(name: "vipsload-io", maxThreads: 2)
        loadLane = WorkQueue(maxConcurrent: configuration.loadLimit)
    }

    deinit {
        decodePool.shutDown()
        ioPool.shutDown()
    }

    // MARK: - Memory hits

    /// The memory-cached bitmap for a validated request, tagged with its
    /// scale, counting a hit; nil when the request skips cache reads or misses.
    func cachedBitmap(for request: ValidatedRequest) -> Bitmap? {
        guard let memoryCache, request.readsMemoryCache,
            let bitmap = memoryCache.bitmap(for: request.key)
        else { return nil }
        metrics.memoryHits.add(1, ordering: .relaxed)
        return bitmap.tagged(request.scale)
    }

    // MARK: - Tasks

    /// Subscribes a task to the decode unit for its key, creating one (and
    /// its data load) when none is in flight. A bitmap stored since the
    /// caller's first look completes the task at once.
    func submit(_ task: ImageTask, _ request: ValidatedRequest) {
        let hit = lock.perform { effects -> Bitmap? in
            let storesProcessed = storesProcessedImage(request)
            let key = storesProcessed ? request.processedCacheWorkKey : request.workKey
            // A decode of this key may have finished since the caller's first
            // look: `finish` stores the bitmap before the unit leaves the table,
            // so this second look cannot miss both.
            if decodes[key] == nil, request.readsMemoryCache, let cached = memoryCache?.peek(request.key) {
                return cached
            }
            let (unit, joined) = decodes.join(key) {
                storesProcessed ? startProcessedCacheWork(request, &effects) : startWork(request, &effects)
            }
            if joined { metrics.coalesced.add(1, ordering: .relaxed) }
            task.subscription = unit.subscribe(
                priority: task.priority, storesResult: request.writesMemoryCache,
                &effects
            ) { event in
                // Held strongly until the task completes or is cancelled (either removes this handler):
                // a task nobody keeps, whose `events` someone iterates, still finishes and leaves.
                task.complete(with: event)
            }
            attachedTasks += 1
            return nil
        }
        if let hit {
            metrics.memoryHits.add(1, ordering: .relaxed)
            task.noteCacheHit(.memory)
            task.complete(with: .value(ImageResponse(bitmap: hit, origin: .memoryCache)))
        }
    }

    /// A task left (cancelled) or completed: it gives up its subscription.
    func detach(_ task: ImageTask) {
        lock.perform { effects in
            guard let subscription = task.subscription else { return }
            task.subscription = nil
            attachedTasks -= 1
            subscription.cancel(&effects)
        }
    }

    /// A task's priority changed: its unit (and the units that unit waits
    /// for) move to their new highest priority.
    func priorityChanged(of task: ImageTask, to priority: ImageRequest.Priority) {
        lock.perform { effects in
            task.subscription?.setPriority(priority, &effects)
        }
    }

    // MARK: - Diagnostics

    /// The counters of the loader's network and disk-cache work.
    var networkMetrics: HTTPLoaderMetrics? { loader.networkMetrics }

    /// Sizes of the in-flight tables and lanes.
    var inFlight: ImagePipeline.InFlight {
        let tables = lock.perform { _ in (attachedTasks, decodes.count, loads.count) }
        return ImagePipeline.InFlight(
            tasks: tables.0, decodeJobs: tables.1, dataLoads: tables.2,
            queuedDecodes: decodePool.waitingCount, runningDecodes: decodePool.runningCount,
            queuedLoads: loadLane.waitingCount + ioPool.waitingCount,
            runningLoads: loadLane.runningCount + ioPool.runningCount)
    }
}
