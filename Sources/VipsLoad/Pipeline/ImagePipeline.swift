/// Loads, decodes and caches images: the Linux counterpart of Nuke's `ImagePipeline`.
///
/// ```swift
/// let pipeline = ImagePipeline()
/// let thumbnail = try await pipeline.image(for: ImageRequest(path: "photo.jpg", size: .maxPixelSize(256)))
/// ```
///
/// Sources are files, in-memory data, and `file://` or `http(s)://` URLs.
/// A request is served from the memory cache when it can be — synchronously,
/// without a queue or a thread hop — and otherwise joins an identical request
/// in flight or starts a load and a decode. Identical requests share one
/// decode; different sizes of one source share one data load; a smaller size
/// of a cached larger bitmap is made by downscaling it in memory. Decodes run
/// on dedicated threads, `decodeConcurrency` at a time, highest priority first;
/// local files are opened on a separate I/O lane, so they never wait behind
/// downloads. Downloads look in the data cache (`Configuration.dataCache`)
/// first, so a request goes memory → disk → network. Every failure is a
/// `VipsError` that names the request's source; errors reach every caller and
/// are never cached, in memory or on disk.
///
/// Every method may be called from any thread, including from inside the
/// pipeline's own callbacks, a data loader's cancellation handler or an
/// `ImageSlot` event: the pipeline never calls out while it holds a lock.
public final class ImagePipeline: Sendable {
    /// The configuration the pipeline was made with.
    public let configuration: Configuration
    let engine: PipelineEngine
    /// Watches memory pressure for this pipeline (`Configuration.monitorsMemoryPressure`); its thread ends with the pipeline.
    let memoryPressureMonitor: MemoryPressureMonitor?

    /// A pipeline with the default configuration, for apps that need one.
    public static let shared = ImagePipeline()

    /// A pipeline with its own queues, threads, downloader and (unless one
    /// instance is set on several configurations) memory cache. Default:
    /// `Configuration()`.
    ///
    /// Its `configuration` is the one given, with what the pipeline made of
    /// the defaults filled in: its own memory cache for the default one, and
    /// with the default `DataLoader`, one whose `networkMetrics` are this
    /// pipeline's downloader's.
    public init(configuration: Configuration = Configuration()) {
        var configuration = configuration
        configuration.memoryCache = configuration.memoryCache?.forOnePipeline
        engine = PipelineEngine(configuration: configuration)
        if var standard = configuration.dataLoader as? DataLoader, let downloader = engine.httpLoader {
            standard.downloader = downloader
            configuration.dataLoader = standard
        }
        self.configuration = configuration
        // Memory pressure (ImagePipeline+MemoryPressure.swift): the monitor reaches this pipeline weakly.
        let pressureTarget = MemoryPressureTarget()
        memoryPressureMonitor = Self.makeMemoryPressureMonitor(configuration, target: pressureTarget)
        pressureTarget.pipeline = self
    }

    /// The decoded bitmap for `request`.
    ///
    /// A memory-cache hit returns without suspending or leaving the caller's
    /// executor (the method is `nonisolated(nonsending)`), so it costs about
    /// as much as a dictionary lookup. Cancelling the calling Swift task
    /// cancels the request.
    ///
    /// - Throws: `VipsError`: the load's or decode's failure, `.invalidArgument`
    ///   for an impossible size, `.cancelled` when cancelled.
    public nonisolated(nonsending) func image(for request: ImageRequest) async throws(VipsError) -> Bitmap {
        switch start(request) {
        case .hit(let bitmap): return bitmap
        case .failed(let error): throw error
        case .task(let task): return try await task.image
        }
    }

    /// Starts loading `request` and returns its task, to await, cancel or
    /// reprioritise. A memory-cache hit (or an invalid request) returns a task
    /// that has already completed.
    public func imageTask(with request: ImageRequest) -> ImageTask {
        switch start(request) {
        case .hit(let bitmap): return ImageTask(request: request, completedWith: .success(bitmap), cacheHit: .memory)
        case .failed(let error): return ImageTask(request: request, completedWith: .failure(error))
        case .task(let task): return task
        }
    }

    /// The memory-cached bitmap for `request`, if any, without loading anything.
    public func cachedImage(for request: ImageRequest) -> Bitmap? {
        guard let validated = try? request.validated() else { return nil }
        return engine.cachedBitmap(for: validated)
    }

    /// Forgets every memory-cached size of `source` (every version of a file),
    /// so the next request decodes it again.
    public func removeCachedImages(for source: ImageSource) {
        engine.memoryCache?.removeBitmaps(forSourceKey: source.key)
    }

    /// The memory cache (`configuration.memoryCache`).
    public var memoryCache: MemoryCache? { engine.memoryCache }

    /// Counters since the pipeline was made, with its data loader's network
    /// and disk-cache counters.
    public var metrics: Metrics {
        var metrics = engine.metrics.snapshot
        if let network = engine.networkMetrics { metrics.include(network) }
        metrics.diskHits += engine.dataCacheHits.load(ordering: .relaxed)
        return metrics
    }

    /// The sizes of the in-flight tables and queues.
    public var inFlight: InFlight { engine.inFlight }

    /// While true no decode starts: queued decodes wait (and can still be
    /// cancelled or reprioritised), running ones finish. An app can pause
    /// decoding during a fast scroll. Default false.
    public var isDecodingSuspended: Bool {
        get { engine.decodePool.isSuspended }
        set { engine.decodePool.isSuspended = newValue }
    }

    // MARK: - Internal

    enum Start {
        case hit(Bitmap)
        case failed(VipsError)
        case task(ImageTask)
    }

    /// Counts the request, validates it once, and serves it from memory or starts a task.
    func start(_ request: ImageRequest) -> Start {
        engine.metrics.requests.add(1, ordering: .relaxed)
        let validated: ValidatedRequest
        do throws(VipsError) {
            validated = try request.validated()
        } catch {
            engine.metrics.failed.add(1, ordering: .relaxed)
            return .failed(error)
        }
        if let bitmap = engine.cachedBitmap(for: validated) { return .hit(bitmap) }
        let task = ImageTask(request: request, engine: engine)
        engine.submit(task, validated)
        return .task(task)
    }
}
