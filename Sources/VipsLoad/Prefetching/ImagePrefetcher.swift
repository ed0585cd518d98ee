import Foundation

/// Warms a pipeline's caches ahead of need, for example the rows just past
/// the edge of a scrolling list: the counterpart of Nuke's `ImagePrefetcher`.
///
/// Prefetches run at `.veryLow` priority, at most `maxConcurrentRequestCount`
/// at a time, in the order they were asked for. Each is an ordinary request
/// of the pipeline, so a real request for the same image joins the prefetch
/// in flight (one download, one decode) and raises its priority to its own.
/// Failures are dropped: a prefetch is a hint. Stopping a prefetch a real
/// request has joined leaves the real request running.
public final class ImagePrefetcher: Sendable {
    /// Which cache a prefetch fills.
    public enum Destination: Sendable, Hashable {
        /// Load and decode: the bitmap lands in the memory cache (and the
        /// downloaded bytes in the data cache, when there is one).
        case memoryCache
        /// Download only, into the pipeline's data cache, without decoding.
        /// With no data cache, or for local sources, there is nothing to do.
        case diskCache
    }

    /// The pipeline the prefetches run in.
    public let pipeline: ImagePipeline
    /// Which cache the prefetches fill.
    public let destination: Destination
    /// Prefetches running at once.
    public let maxConcurrentRequestCount: Int

    private enum Key: Hashable {
        case image(ImageCacheKey)
        case data(String)
    }

    private enum Running {
        /// Being started (its handle is not stored yet).
        case starting
        case task(ImageTask)
        case data(DataLoadTicket)
    }

    private struct State {
        var pending: [(key: Key, request: ImageRequest)] = []
        /// Each running prefetch, with the number it was started as.
        var running: [Key: (id: Int, work: Running)] = [:]
        var nextID = 0
        var isPaused = false
        /// Whether a thread is starting prefetches (`pump`); others leave it to that one.
        var isPumping = false
    }

    private let state = LockedState(State())

    /// A prefetcher for `pipeline`. Default: the memory cache, 2 at a time.
    public init(
        pipeline: ImagePipeline = .shared, destination: Destination = .memoryCache,
        maxConcurrentRequestCount: Int = 2
    ) {
        self.pipeline = pipeline
        self.destination = destination
        self.maxConcurrentRequestCount = max(1, maxConcurrentRequestCount)
    }

    deinit {
        stopAll()
    }

    /// While true no new prefetch starts (running ones finish). Default false.
    public var isPaused: Bool {
        get { state.withLock { $0.isPaused } }
        set {
            state.withLock { $0.isPaused = newValue }
            if !newValue { pump() }
        }
    }

    /// Queues prefetches for `requests` (run at `.veryLow` priority); requests
    /// already queued or running are not added twice.
    public func startPrefetching(with requests: [ImageRequest]) {
        state.withLock { state in
            for var request in requests {
                request.priority = .veryLow
                let key = Self.key(for: request, destination)
                guard state.running[key] == nil, !state.pending.contains(where: { $0.key == key }) else { continue }
                state.pending.append((key, request))
            }
        }
        pump()
    }

    /// Queues prefetches of the images at `urls`, at their own size.
    public func startPrefetching(with urls: [URL]) {
        startPrefetching(with: urls.map { ImageRequest(url: $0) })
    }

    /// Drops the queued prefetches for `requests` and cancels running ones
    /// (a real request that joined one keeps running).
    public func stopPrefetching(with requests: [ImageRequest]) {
        let keys = Set(requests.map { Self.key(for: $0, destination) })
        let stopped = state.withLock { state -> [Running] in
            state.pending.removeAll { keys.contains($0.key) }
            var stopped: [Running] = []
            for key in keys {
                if let running = state.running.removeValue(forKey: key) { stopped.append(running.work) }
            }
            return stopped
        }
        for running in stopped { cancel(running) }
        pump()
    }

    /// Stops prefetching the images at `urls`.
    public func stopPrefetching(with urls: [URL]) {
        stopPrefetching(with: urls.map { ImageRequest(url: $0) })
    }

    /// Drops every queued prefetch and cancels every running one.
    public func stopAll() {
        let stopped = state.withLock { state -> [Running] in
            state.pending = []
            defer { state.running = [:] }
            return state.running.values.map(\.work)
        }
        for running in stopped { cancel(running) }
    }

    /// Queued and running prefetches, for tests.
    var counts: (pending: Int, running: Int) { state.withLock { ($0.pending.count, $0.running.count) } }

    // MARK: - Running

    private static func key(for request: ImageRequest, _ destination: Destination) -> Key {
        switch destination {
        case .memoryCache: return .image(request.cacheKey)
        case .diskCache: return .data(request.imageID ?? request.source.key)
        }
    }

    /// Starts queued prefetches while there are free slots. One thread at a
    /// time does it (a prefetch that completes at once, a memory hit, does
    /// not recurse); the flag is dropped in the same locked section that
    /// finds nothing to start, so no freed slot is missed.
    private func pump() {
        let owns = state.withLock { state -> Bool in
            guard !state.isPumping else { return false }
            state.isPumping = true
            return true
        }
        guard owns else { return }
        while let (key, id, request) = nextToStart() {
            start(key, id, request)
        }
    }

    private func nextToStart() -> (Key, Int, ImageRequest)? {
        state.withLock { state -> (Key, Int, ImageRequest)? in
            guard !state.isPaused, state.running.count < maxConcurrentRequestCount, !state.pending.isEmpty else {
                state.isPumping = false
                return nil
            }
            let next = state.pending.removeFirst()
            state.nextID += 1
            state.running[next.key] = (state.nextID, .starting)
            return (next.key, state.nextID, next.request)
        }
    }

    private func start(_ key: Key, _ id: Int, _ request: ImageRequest) {
        switch destination {
        case .memoryCache:
            let task = pipeline.imageTask(with: request)
            store(.task(task), for: key, id)
            task.onCompletion { [weak self] _ in self?.finished(key, id) }
        case .diskCache:
            guard pipeline.engine.dataCache != nil, !request.source.isLocal,
                let validated = try? request.validated()
            else {
                finished(key, id)
                return
            }
            let ticket = pipeline.engine.loadDataOnly(validated) { [weak self] _ in self?.finished(key, id) }
            store(.data(ticket), for: key, id)
        }
    }

    /// Records a started prefetch's handle; one stopped while it was being
    /// started is cancelled.
    private func store(_ running: Running, for key: Key, _ id: Int) {
        let stillWanted = state.withLock { state -> Bool in
            guard let current = state.running[key], current.id == id else { return false }
            if case .starting = current.work { state.running[key] = (id, running) }
            return true
        }
        if !stillWanted { cancel(running) }
    }

    /// A prefetch ended (or was stopped): its slot frees, unless the key now
    /// belongs to a newer prefetch.
    private func finished(_ key: Key, _ id: Int) {
        state.withLock { state in
            if state.running[key]?.id == id { state.running[key] = nil }
        }
        pump()
    }

    private func cancel(_ running: Running) {
        switch running {
        case .starting: break
        case .task(let task): task.cancel()
        case .data(let ticket): pipeline.engine.cancel(ticket)
        }
    }
}
