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
/// on dedicated threads, `decodeConcurrency` at a time, highest priority first.
/// Downloads look in the disk cache (`Configuration.diskCache`) first, so a
/// request goes memory → disk → network. Errors reach every caller and are
/// never cached, in memory or on disk.
public final class ImagePipeline: Sendable {
    /// The configuration the pipeline was made with.
    public let configuration: Configuration
    let graph: JobGraph
    /// Watches memory pressure for this pipeline (`Configuration.monitorsMemoryPressure`); its thread ends with the pipeline.
    let memoryPressureMonitor: MemoryPressureMonitor?

    /// A pipeline with the default configuration, for apps that need one.
    public static let shared = ImagePipeline()

    /// A pipeline with its own queues, threads and (unless shared through the
    /// configuration) memory cache. Default: `Configuration()`.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        graph = JobGraph(configuration: configuration)
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
    /// - Throws: `VipsError` when loading or decoding fails, `CancellationError` when cancelled.
    public nonisolated(nonsending) func image(for request: ImageRequest) async throws -> Bitmap {
        switch start(request) {
        case .hit(let bitmap): return bitmap
        case .task(let task): return try await task.image
        }
    }

    /// Starts loading `request` and returns its task, to await, cancel or
    /// reprioritise. A memory-cache hit returns a task that has completed.
    public func imageTask(with request: ImageRequest) -> ImageTask {
        switch start(request) {
        case .hit(let bitmap): return ImageTask(request: request, completedWith: bitmap)
        case .task(let task): return task
        }
    }

    /// The memory-cached bitmap for `request`, if any, without loading anything.
    public func cachedImage(for request: ImageRequest) -> Bitmap? {
        graph.cachedBitmap(for: request)
    }

    /// The memory cache (`configuration.memoryCache`).
    public var memoryCache: MemoryCache? { graph.memoryCache }

    /// Counters since the pipeline was made, with its data loader's network
    /// and disk-cache counters.
    public var metrics: Metrics {
        var metrics = graph.metrics.snapshot
        if let network = graph.loader.networkMetrics { metrics.include(network) }
        return metrics
    }

    /// The sizes of the in-flight tables and queues.
    public var inFlight: InFlight { graph.inFlight }

    /// While true no decode starts: queued decodes wait (and can still be
    /// cancelled or reprioritised), running ones finish. An app can pause
    /// decoding during a fast scroll. Default false.
    public var isDecodingSuspended: Bool {
        get { graph.decodeQueue.isSuspended }
        set { graph.decodeQueue.isSuspended = newValue }
    }

    // MARK: - Internal

    enum Start {
        case hit(Bitmap)
        case task(ImageTask)
    }

    /// Counts the request and serves it from memory or starts a task.
    func start(_ request: ImageRequest) -> Start {
        graph.metrics.requests.add(1, ordering: .relaxed)
        if let bitmap = graph.cachedBitmap(for: request) { return .hit(bitmap) }
        let task = ImageTask(request: request, graph: graph)
        graph.submit(task)
        return .task(task)
    }
}
