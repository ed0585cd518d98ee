import Synchronization

/// The engine behind `ImagePipeline`: coalesces tasks into decode jobs and
/// decode jobs into data loads, queues them by priority, and cancels shared
/// work only when its last task leaves.
///
/// All bookkeeping (`State`) sits behind one lock, so every transition —
/// join, leave, load finished, decode finished — is atomic and the tables can
/// never disagree. Lock order: this lock may be held while taking a queue's,
/// the memory cache's, a task's or a load handle's lock, never the reverse;
/// tasks are completed, and so callers resumed, only after it is released.
final class JobGraph: Sendable {
    let metrics = MetricCounters()
    let memoryCache: MemoryCache?
    let decodeQueue: WorkQueue
    let loadQueue: WorkQueue
    /// Test hook: called on the decode thread as each decode or downscale starts.
    let decodeObserver = Mutex<(@Sendable (ImageCacheKey) -> Void)?>(nil)

    /// The data loader in use (`Configuration.makeDataLoader()`).
    let loader: any ImageDataLoading
    private let decoder: ImageDecoder
    private let resizesFromLargerCachedImages: Bool
    let threads: DecodeThreadPool
    private let state = Mutex(State())

    private struct State {
        var jobs: [ImageCacheKey: DecodeJob] = [:]
        var loads: [String: DataLoadJob] = [:]
        /// Which job each attached task waits for.
        var attachments: [Int: ImageCacheKey] = [:]
        var nextID = 0

        mutating func makeID() -> Int {
            nextID += 1
            return nextID
        }
    }

    init(configuration: ImagePipeline.Configuration) {
        memoryCache = configuration.memoryCache
        decoder = ImageDecoder(options: configuration.decodeOptions)
        loader = configuration.makeDataLoader()
        resizesFromLargerCachedImages = configuration.resizesFromLargerCachedImages
        decodeQueue = WorkQueue(maxConcurrent: configuration.decodeConcurrency)
        loadQueue = WorkQueue(maxConcurrent: configuration.dataLoadingConcurrency)
        threads = DecodeThreadPool(maxThreads: configuration.decodeConcurrency)
    }

    deinit {
        threads.shutDown()
    }

    // MARK: - Memory hits

    /// The cached bitmap for `request`, tagged with its scale, counting a hit;
    /// nil when the request skips cache reads or nothing is cached.
    func cachedBitmap(for request: ImageRequest) -> Bitmap? {
        guard let memoryCache, !request.options.contains(.disableMemoryCacheReads),
              (try? request.validate()) != nil,
              let bitmap = memoryCache.bitmap(for: request.cacheKey) else { return nil }
        metrics.memoryHits.add(1, ordering: .relaxed)
        return bitmap.scale == request.scale ? bitmap : bitmap.withScale(request.scale)
    }

    // MARK: - Tasks joining and leaving

    /// Attaches a new task to the job for its cache key, starting one if needed.
    func submit(_ task: ImageTask) {
        let request = task.request
        do throws(VipsError) {
            try request.validate()
        } catch {
            task.complete(with: .failure(error))
            return
        }
        let key = request.cacheKey
        let readsCache = !request.options.contains(.disableMemoryCacheReads)
        let hit = state.withLock { state -> Bitmap? in
            if var job = state.jobs[key] {
                job.tasks.append(task)
                job.writesCache = job.writesCache || !request.options.contains(.disableMemoryCacheWrites)
                state.attachments[task.id] = key
                metrics.coalesced.add(1, ordering: .relaxed)
                if task.priority > job.priority {
                    job.priority = task.priority
                    applyPriority(of: job, &state)
                }
                state.jobs[key] = job
                return nil
            }
            // A decode of this key may have finished since the caller's first
            // look: completion stores the bitmap and removes the job under this
            // lock, so this second look cannot miss it.
            if readsCache, let cached = memoryCache?.peek(key) { return cached }
            let id = state.makeID()
            var job = DecodeJob(id: id, key: key, request: request, tasks: [task], priority: task.priority,
                                writesCache: !request.options.contains(.disableMemoryCacheWrites),
                                stage: .waitingForData(loadID: 0))
            if readsCache, resizesFromLargerCachedImages, let larger = memoryCache?.largerBitmap(for: key) {
                job.stage = .queued(item: enqueueDecode(key: key, id: id, priority: job.priority), input: .bitmap(larger))
            } else {
                job.stage = attachToLoad(key: key, jobID: id, source: request.source, priority: job.priority, &state)
            }
            state.jobs[key] = job
            state.attachments[task.id] = key
            return nil
        }
        if let hit {
            metrics.memoryHits.add(1, ordering: .relaxed)
            task.complete(with: .success(hit.scale == request.scale ? hit : hit.withScale(request.scale)))
        }
    }

    /// Detaches a cancelled task; its job is cancelled when no task is left.
    func detach(_ task: ImageTask) {
        state.withLock { state in
            guard let key = state.attachments.removeValue(forKey: task.id), var job = state.jobs[key] else { return }
            job.tasks.removeAll { $0 === task }
            if job.tasks.isEmpty {
                remove(job, &state)
            } else {
                if job.updatePriority() { applyPriority(of: job, &state) }
                state.jobs[key] = job
            }
        }
    }

    /// Propagates a task's new priority to its job and the job's data load.
    func priorityChanged(of task: ImageTask) {
        state.withLock { state in
            guard let key = state.attachments[task.id], var job = state.jobs[key], job.updatePriority() else { return }
            state.jobs[key] = job
            applyPriority(of: job, &state)
        }
    }

    // MARK: - Data loads

    /// Subscribes a job to its source's data load (joining one in flight or
    /// starting one) and returns the job's stage.
    private func attachToLoad(key: ImageCacheKey, jobID: Int, source: ImageSource,
                              priority: ImageRequest.Priority, _ state: inout State) -> DecodeJob.Stage {
        let sourceKey = key.sourceKey
        guard var load = state.loads[sourceKey] else {
            let loadID = state.makeID()
            let handle = LoadHandle()
            let item = loadQueue.enqueue(priority: priority) { [self] in
                handle.start { await self.runLoad(sourceKey: sourceKey, loadID: loadID) }
            }
            state.loads[sourceKey] = DataLoadJob(id: loadID, source: source, handle: handle, waiting: [key],
                                                 priority: priority, stage: .queued(item: item))
            return .waitingForData(loadID: loadID)
        }
        metrics.dataLoadsShared.add(1, ordering: .relaxed)
        let stage: DecodeJob.Stage
        if case .loaded(let data) = load.stage {
            load.users += 1
            stage = .queued(item: enqueueDecode(key: key, id: jobID, priority: priority), input: .data(data, loadID: load.id))
        } else {
            load.waiting.append(key)
            if priority > load.priority {
                load.priority = priority
                if case .queued(let item) = load.stage { loadQueue.setPriority(priority, of: item) }
            }
            stage = .waitingForData(loadID: load.id)
        }
        state.loads[sourceKey] = load
        return stage
    }

    /// Runs one data load (in its own Swift task) and hands the data to every
    /// waiting decode job, or the error to all their tasks.
    private func runLoad(sourceKey: String, loadID: Int) async {
        defer { loadQueue.finish() }
        let source = state.withLock { state -> ImageSource? in
            guard var load = state.loads[sourceKey], load.id == loadID, case .queued = load.stage else { return nil }
            load.stage = .loading
            state.loads[sourceKey] = load
            return load.source
        }
        guard let source, !Task.isCancelled else { return }
        metrics.dataLoadsStarted.add(1, ordering: .relaxed)
        let result: Result<ImageData, any Error>
        do {
            let data = try await loader.loadData(for: source)
            metrics.bytesLoaded.add(data.byteCount, ordering: .relaxed)
            result = .success(data)
        } catch {
            result = .failure(error)
        }
        let failed = state.withLock { state -> [ImageTask] in
            // Gone: every job left while loading; the handle's task was cancelled.
            guard var load = state.loads[sourceKey], load.id == loadID else { return [] }
            let waiting = load.waiting
            load.waiting = []
            switch result {
            case .success(let data):
                for key in waiting {
                    guard var job = state.jobs[key], case .waitingForData(loadID) = job.stage else { continue }
                    load.users += 1
                    job.stage = .queued(item: enqueueDecode(key: key, id: job.id, priority: job.priority),
                                        input: .data(data, loadID: loadID))
                    state.jobs[key] = job
                }
                if load.users > 0 {
                    load.stage = .loaded(data)
                    state.loads[sourceKey] = load
                } else {
                    state.loads[sourceKey] = nil
                }
                return []
            case .failure:
                // Errors are never kept: the next request for this source loads again.
                state.loads[sourceKey] = nil
                var tasks: [ImageTask] = []
                for key in waiting {
                    guard let job = state.jobs[key], case .waitingForData(loadID) = job.stage else { continue }
                    state.jobs[key] = nil
                    for task in job.tasks { state.attachments[task.id] = nil }
                    tasks += job.tasks
                }
                return tasks
            }
        }
        if case .failure(let error) = result {
            for task in failed { task.complete(with: .failure(error)) }
        }
    }

    /// A job stopped waiting for (or using) a load; the load is cancelled or
    /// released when nothing needs it any more.
    private func leaveLoad(sourceKey: String, loadID: Int, waitingKey: ImageCacheKey?, _ state: inout State) {
        guard var load = state.loads[sourceKey], load.id == loadID else { return }
        if let waitingKey {
            load.waiting.removeAll { $0 == waitingKey }
        } else {
            load.users -= 1
        }
        guard load.waiting.isEmpty, load.users == 0 else {
            var highest = ImageRequest.Priority.veryLow
            for key in load.waiting { highest = max(highest, state.jobs[key]?.priority ?? .veryLow) }
            if highest != load.priority {
                load.priority = highest
                if case .queued(let item) = load.stage { loadQueue.setPriority(highest, of: item) }
            }
            state.loads[sourceKey] = load
            return
        }
        state.loads[sourceKey] = nil
        switch load.stage {
        case .queued(let item):
            loadQueue.cancel(item)
            load.handle.cancel()
        case .loading:
            load.handle.cancel()
        case .loaded:
            break
        }
    }

    // MARK: - Decodes

    private func enqueueDecode(key: ImageCacheKey, id: Int, priority: ImageRequest.Priority) -> WorkQueue.ItemID {
        decodeQueue.enqueue(priority: priority) { [self] in
            threads.submit { self.runDecode(key: key, jobID: id) }
        }
    }

    /// Runs one decode or downscale on a decode thread and completes the
    /// job's tasks; a job removed while queued never starts.
    private func runDecode(key: ImageCacheKey, jobID: Int) {
        defer { decodeQueue.finish() }
        let work = state.withLock { state -> (ImageRequest, DecodeJob.Input)? in
            guard var job = state.jobs[key], job.id == jobID, case .queued(_, let input) = job.stage else { return nil }
            job.stage = .running(input: input)
            state.jobs[key] = job
            return (job.request, input)
        }
        guard let (request, input) = work else { return }
        decodeObserver.withLock { $0 }?(key)

        let result: Result<Bitmap, VipsError>
        switch input {
        case .data(let data, _):
            metrics.decodesStarted.add(1, ordering: .relaxed)
            result = Result { () throws(VipsError) -> Bitmap in
                try decoder.decode(data.input, size: request.size, scale: request.scale,
                                   allowUpscale: request.options.contains(.allowUpscale))
            }
            metrics.decodesFinished.add(1, ordering: .relaxed)
            if case .success(let bitmap) = result { metrics.bytesDecoded.add(bitmap.cost, ordering: .relaxed) }
        case .bitmap(let larger):
            metrics.memoryResizes.add(1, ordering: .relaxed)
            result = Result { () throws(VipsError) -> Bitmap in
                try decoder.resize(larger, to: request.size, scale: request.scale)
            }
        }

        let tasks = state.withLock { state -> [ImageTask] in
            guard let job = state.jobs[key], job.id == jobID else { return [] }
            state.jobs[key] = nil
            for task in job.tasks { state.attachments[task.id] = nil }
            if case .data(_, let loadID) = input {
                leaveLoad(sourceKey: key.sourceKey, loadID: loadID, waitingKey: nil, &state)
            }
            // Stored before the job leaves the table (same critical section), so
            // an identical request arriving now finds one or the other. A job
            // whose tasks all left still stores: the work is done, and the row a
            // user scrolled past may well come back.
            if case .success(let bitmap) = result, let memoryCache, job.writesCache {
                memoryCache.store(bitmap, for: key)
            }
            return job.tasks
        }
        for task in tasks {
            task.complete(with: result
                .map { $0.scale == task.request.scale ? $0 : $0.withScale(task.request.scale) }
                .mapError { $0 as any Error })
        }
    }

    // MARK: - Shared steps

    /// Removes a job no task waits for any more, cancelling what it waits on.
    /// A running decode cannot be interrupted: its job stays, without tasks,
    /// until the decode returns (see `DecodeJob.Stage.running`).
    private func remove(_ job: DecodeJob, _ state: inout State) {
        let sourceKey = job.key.sourceKey
        switch job.stage {
        case .waitingForData(let loadID):
            state.jobs[job.key] = nil
            leaveLoad(sourceKey: sourceKey, loadID: loadID, waitingKey: job.key, &state)
        case .queued(let item, let input):
            state.jobs[job.key] = nil
            decodeQueue.cancel(item)
            if case .data(_, let loadID) = input { leaveLoad(sourceKey: sourceKey, loadID: loadID, waitingKey: nil, &state) }
        case .running:
            state.jobs[job.key] = job
        }
    }

    /// Moves a job's queue entry (or its data load's) to the job's priority.
    private func applyPriority(of job: DecodeJob, _ state: inout State) {
        switch job.stage {
        case .queued(let item, _):
            decodeQueue.setPriority(job.priority, of: item)
        case .waitingForData(let loadID):
            guard var load = state.loads[job.key.sourceKey], load.id == loadID else { return }
            var highest = job.priority
            for key in load.waiting where key != job.key {
                highest = max(highest, state.jobs[key]?.priority ?? .veryLow)
            }
            guard highest != load.priority else { return }
            load.priority = highest
            if case .queued(let item) = load.stage { loadQueue.setPriority(highest, of: item) }
            state.loads[job.key.sourceKey] = load
        case .running:
            break
        }
    }

    // MARK: - Diagnostics

    /// Sizes of the in-flight tables and queues.
    var inFlight: ImagePipeline.InFlight {
        let tables = state.withLock { ($0.attachments.count, $0.jobs.count, $0.loads.count) }
        return ImagePipeline.InFlight(
            tasks: tables.0, decodeJobs: tables.1, dataLoads: tables.2,
            queuedDecodes: decodeQueue.waitingCount, runningDecodes: decodeQueue.runningCount,
            queuedLoads: loadQueue.waitingCount, runningLoads: loadQueue.runningCount)
    }
}
