/// One request in flight: await its `image`, `cancel()` it, or change its
/// `priority` while it waits.
///
/// A task completes exactly once — with a bitmap or a `VipsError` (kind
/// `.cancelled` when cancelled) — and every caller awaiting it is resumed
/// exactly once with that outcome, never while the pipeline holds a lock.
/// Cancelling a task cancels the underlying work only when no other task
/// shares it.
///
/// The pipeline keeps a running task alive until it completes, so a task
/// nobody keeps still runs to its end and its `events` still end:
///
/// ```swift
/// for await event in pipeline.imageTask(with: request).events {
///     if case .finished(let outcome) = event { print(outcome) }
/// }
/// ```
public final class ImageTask: Sendable, Hashable, CustomStringConvertible {
    /// What the task loads.
    public let request: ImageRequest

    /// Where the task stands.
    public enum State: Sendable, Hashable {
        /// Waiting or working.
        case running
        /// Cancelled before it completed.
        case cancelled
        /// Completed with a bitmap or an error.
        case completed
    }

    private typealias Outcome = Result<Bitmap, VipsError>

    private struct Shared {
        var priority: ImageRequest.Priority
        var outcome: Outcome?
        var waiters: [CheckedContinuation<Outcome, Never>] = []
        var observers: [@Sendable (Outcome) -> Void] = []
        /// The latest progress of the task's download.
        var progress = Progress(completed: 0, total: nil)
        var cacheHit: CacheHit?
        /// Where the result came from, once the task has one.
        var origin: ImageResponse.Origin?
        var streams: [Int: AsyncStream<Event>.Continuation] = [:]
        var nextStreamID = 0
        /// The pixels of the largest preview shown: a smaller one is never shown after it.
        var previewPixels = 0
        /// Previews and the final events waiting to reach the streams, in
        /// decision order, and whether a thread is yielding them now.
        var streamOutbox: [StreamDelivery] = []
        var drainingStreams = false
    }

    /// What reaches the streams in order: a preview cannot overtake the final events.
    private enum StreamDelivery {
        case preview(Bitmap, [AsyncStream<Event>.Continuation])
        case final(Outcome, CacheHit?, [AsyncStream<Event>.Continuation])
    }

    private let engine: PipelineEngine?
    /// Decides and decodes this task's previews, when its request asks for them.
    private let previews: PreviewFeed?
    private let scale: Double
    private let shared: LockedState<Shared>
    /// The task's place in its decode unit. Guarded by the engine lock.
    nonisolated(unsafe) var subscription: WorkSubscription?

    init(request: ImageRequest, engine: PipelineEngine?) {
        self.request = request
        self.engine = engine
        previews =
            request.options.contains(.progressivePreviews)
            ? engine.map { PreviewFeed(engine: $0, request: request) } : nil
        scale = request.scale
        shared = LockedState(Shared(priority: request.priority), rank: .task)
    }

    /// A task that has already completed (a memory-cache hit, or a request
    /// that failed validation).
    convenience init(request: ImageRequest, completedWith outcome: Result<Bitmap, VipsError>, cacheHit: CacheHit? = nil)
    {
        self.init(request: request, engine: nil)
        shared.withLock {
            $0.outcome = outcome
            $0.cacheHit = cacheHit
            if case .success = outcome, cacheHit == .memory { $0.origin = .memoryCache }
        }
    }

    /// The task's priority. Raising it while the task waits moves it ahead of
    /// waiting work of lower priority; work shared by several tasks runs at the
    /// highest of their priorities. No effect once the task has completed.
    public var priority: ImageRequest.Priority {
        get { shared.withLock { $0.priority } }
        set {
            let changed = shared.withLock { shared -> Bool in
                guard shared.outcome == nil, shared.priority != newValue else { return false }
                shared.priority = newValue
                return true
            }
            if changed { engine?.priorityChanged(of: self, to: newValue) }
        }
    }

    /// Running, cancelled or completed.
    public var state: State {
        shared.withLock { shared in
            switch shared.outcome {
            case nil: return .running
            case .failure(let error) where error.kind == .cancelled: return .cancelled
            default: return .completed
            }
        }
    }

    /// Cancels the task and resumes every awaiting caller with a `.cancelled`
    /// error. Work no other task shares is cancelled: a waiting load or decode
    /// never starts, a running load is cancelled, and a running decode (which
    /// cannot be interrupted) delivers to no one but still fills the memory
    /// cache. No effect once the task has completed. Safe to call from any
    /// thread, callback or cancellation handler.
    public func cancel() {
        guard let taken = settle(.failure(.cancelled(request.source.description))) else { return }
        engine?.detach(self)
        engine?.metrics.cancelled.add(1, ordering: .relaxed)
        deliver(.failure(.cancelled(request.source.description)), to: taken)
    }

    /// The decoded bitmap. Cancelling the awaiting Swift task cancels this task.
    ///
    /// - Throws: `VipsError`: the load's or decode's failure, `.cancelled` when cancelled.
    public nonisolated(nonsending) var image: Bitmap {
        get async throws(VipsError) {
            let outcome = await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                    let outcome = shared.withLock { shared -> Outcome? in
                        if let outcome = shared.outcome { return outcome }
                        shared.waiters.append(continuation)
                        return nil
                    }
                    if let outcome { continuation.resume(returning: outcome) }
                }
            } onCancel: {
                cancel()
            }
            return try outcome.get()
        }
    }

    /// "ImageTask" and the request.
    public var description: String { "ImageTask \(request)" }

    public static func == (lhs: ImageTask, rhs: ImageTask) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    // MARK: - Pipeline side

    /// Completes the task with its unit's event, or passes a progress event
    /// on; no effect when it had already completed or been cancelled.
    func complete(with event: SharedWork<ImageResponse>.Event) {
        let outcome: Outcome
        var origin: ImageResponse.Origin?
        switch event {
        case .value(let response):
            outcome = .success(response.bitmap.tagged(scale))
            origin = response.origin
        case .failure(let error): outcome = .failure(error)
        case .progress(let completed, let total, let file):
            reportProgress(Progress(completed: completed, total: total))
            if let previews, let file { previews.offer(file, completed: completed, for: self) }
            return
        }
        guard let taken = settle(outcome, origin: origin) else { return }
        engine?.detach(self)
        if case .failure(let error) = outcome {
            if error.kind == .cancelled {
                engine?.metrics.cancelled.add(1, ordering: .relaxed)
            } else {
                engine?.metrics.failed.add(1, ordering: .relaxed)
            }
        }
        deliver(outcome, to: taken)
    }

    /// Where the task's result came from; nil until it completes with one.
    var origin: ImageResponse.Origin? { shared.withLock { $0.origin } }

    /// Records that the result came from a cache, before the task completes.
    func noteCacheHit(_ hit: CacheHit) {
        shared.withLock { shared in
            if shared.outcome == nil, shared.cacheHit == nil { shared.cacheHit = hit }
        }
    }

    private func reportProgress(_ progress: Progress) {
        let streams = shared.withLock { shared -> [AsyncStream<Event>.Continuation] in
            guard shared.outcome == nil else { return [] }
            shared.progress = progress
            return Array(shared.streams.values)
        }
        for stream in streams { stream.yield(.progress(completed: progress.completed, total: progress.total)) }
    }

    /// Calls `body` once with the outcome: at once if the task has completed,
    /// otherwise on the thread that completes it (never under a lock).
    func onCompletion(_ body: @escaping @Sendable (Result<Bitmap, VipsError>) -> Void) {
        let outcome = shared.withLock { shared -> Outcome? in
            if let outcome = shared.outcome { return outcome }
            shared.observers.append(body)
            return nil
        }
        if let outcome { body(outcome) }
    }

    /// Shows a preview on the task's streams, unless the task has its
    /// outcome already or showed a larger preview before. The preview's
    /// events and the final ones go out in the order they were decided.
    func deliverPreview(_ bitmap: Bitmap) {
        let batch = shared.withLock { shared -> [StreamDelivery]? in
            let pixels = bitmap.width * bitmap.height
            guard shared.outcome == nil, pixels >= shared.previewPixels, !shared.streams.isEmpty else { return nil }
            shared.previewPixels = pixels
            shared.streamOutbox.append(.preview(bitmap, Array(shared.streams.values)))
            return Self.takeStreamOutbox(&shared)
        }
        if let batch { drainStreams(batch) }
    }

    /// Whether the task still waits for its outcome and is not cancelled.
    var isRunning: Bool { shared.withLock { $0.outcome == nil } }

    private typealias Taken = (
        waiters: [CheckedContinuation<Outcome, Never>], observers: [@Sendable (Outcome) -> Void],
        streams: [StreamDelivery]?
    )

    /// Records the outcome once and takes whoever waits for it. A result
    /// decoded from data-cache bytes is a disk hit; one made from a memory-cached
    /// bitmap is a memory hit.
    private func settle(_ outcome: Outcome, origin: ImageResponse.Origin? = nil) -> Taken? {
        shared.withLock { shared -> Taken? in
            guard shared.outcome == nil else { return nil }
            shared.outcome = outcome
            shared.origin = origin
            if shared.cacheHit == nil, let origin {
                switch origin {
                case .dataCache: shared.cacheHit = .disk
                case .memoryCache, .derivedFromMemoryCache: shared.cacheHit = .memory
                case .load: break
                }
            }
            defer { shared.waiters = []; shared.observers = []; shared.streams = [:] }
            if !shared.streams.isEmpty {
                shared.streamOutbox.append(.final(outcome, shared.cacheHit, Array(shared.streams.values)))
            }
            return (shared.waiters, shared.observers, Self.takeStreamOutbox(&shared))
        }
    }

    /// Resumes outside every lock: a resumed caller may at once call back into the pipeline.
    private func deliver(_ outcome: Outcome, to taken: Taken) {
        for waiter in taken.waiters { waiter.resume(returning: outcome) }
        for observer in taken.observers { observer(outcome) }
        if let streams = taken.streams { drainStreams(streams) }
    }

    /// The stream outbox, when no other thread is yielding it (this one then does).
    private static func takeStreamOutbox(_ shared: inout Shared) -> [StreamDelivery]? {
        guard !shared.drainingStreams, !shared.streamOutbox.isEmpty else { return nil }
        shared.drainingStreams = true
        defer { shared.streamOutbox = [] }
        return shared.streamOutbox
    }

    /// Yields `first` and whatever is queued meanwhile, in order, under no lock.
    private func drainStreams(_ first: [StreamDelivery]) {
        var batch = first
        while true {
            for delivery in batch {
                switch delivery {
                case .preview(let bitmap, let streams):
                    for stream in streams { stream.yield(.preview(bitmap)) }
                case .final(let outcome, let hit, let streams):
                    for stream in streams {
                        if let hit { stream.yield(.cacheHit(hit)) }
                        stream.yield(.finished(outcome))
                        stream.finish()
                    }
                }
            }
            let more = shared.withLock { shared -> [StreamDelivery]? in
                guard !shared.streamOutbox.isEmpty else {
                    shared.drainingStreams = false
                    return nil
                }
                defer { shared.streamOutbox = [] }
                return shared.streamOutbox
            }
            guard let more else { return }
            batch = more
        }
    }

    // MARK: - Events

    /// The task's events: `progress` while its download's body streams (every
    /// task sharing a download sees it), `preview` bitmaps meanwhile when the
    /// request asks for them (`ImageRequest.Options.progressivePreviews`;
    /// never after `finished`, never smaller than an earlier one; a stream
    /// made later does not get the previews shown before), then `cacheHit` when the result came
    /// from the memory or data cache, then `finished` with the outcome, after
    /// which the sequence ends. Each access is a new sequence; one made while
    /// the task runs starts with the latest progress, one made after it
    /// completed holds only `cacheHit` and `finished`. Never ends before the
    /// task does, and never throws.
    public var events: AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream()
        let state = shared.withLock { shared -> (Outcome?, CacheHit?, Progress, Int) in
            guard shared.outcome == nil else { return (shared.outcome, shared.cacheHit, shared.progress, 0) }
            shared.nextStreamID += 1
            shared.streams[shared.nextStreamID] = continuation
            return (nil, nil, shared.progress, shared.nextStreamID)
        }
        if state.3 > 0 {
            // Set after the lock: it may run at once, and takes the lock.
            let id = state.3
            continuation.onTermination = { [weak self] _ in
                self?.shared.withLock { _ = $0.streams.removeValue(forKey: id) }
            }
        }
        switch (state.0, state.1, state.2) {
        case (let outcome?, let hit, _):
            if let hit { continuation.yield(.cacheHit(hit)) }
            continuation.yield(.finished(outcome))
            continuation.finish()
        case (nil, _, let progress):
            if progress.completed > 0 {
                continuation.yield(.progress(completed: progress.completed, total: progress.total))
            }
        }
        return stream
    }

    /// How far the task's download has come: bytes received and the total
    /// when the response declared it. Zero of unknown for a task served from
    /// a cache or not downloading.
    public var progress: Progress { shared.withLock { $0.progress } }
}

extension Bitmap {
    /// The bitmap described for display `scale` (itself when already so).
    func tagged(_ scale: Double) -> Bitmap {
        self.scale == scale ? self : withScale(scale)
    }
}
