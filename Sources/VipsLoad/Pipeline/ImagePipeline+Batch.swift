import Synchronization

extension ImagePipeline {
    /// One completed request of a batch.
    public struct BatchResult: Sendable {
        /// The request's position in the array passed to `images(for:)`.
        public let index: Int
        /// The request at `index`.
        public let request: ImageRequest
        /// The bitmap, or the error (`CancellationError` for a cancelled request).
        public let result: Result<Bitmap, any Error>
    }

    /// Starts every request at once and yields each result, success or error,
    /// with its index, in the order they complete; the sequence ends after the
    /// last one.
    ///
    /// Requests are queued by their own priorities and coalesced like any
    /// others. Ending the iteration early (a `break`, or cancelling the
    /// iterating Swift task) cancels the requests still in flight.
    public func images(for requests: [ImageRequest]) -> ImageBatch {
        let (stream, continuation) = AsyncStream.makeStream(of: BatchResult.self)
        let batch = Batch(remaining: requests.count)
        let sequence = ImageBatch(stream: stream, lifetime: Lifetime { batch.terminate() })
        guard !requests.isEmpty else {
            continuation.finish()
            return sequence
        }
        continuation.onTermination = { _ in batch.terminate() }
        for (index, request) in requests.enumerated() {
            switch start(request) {
            case .hit(let bitmap):
                batch.complete(BatchResult(index: index, request: request, result: .success(bitmap)), continuation)
            case .task(let task):
                batch.add(task)
                task.onCompletion { result in
                    batch.complete(BatchResult(index: index, request: request, result: result), continuation)
                }
            }
        }
        return sequence
    }
}

/// The tasks of one batch, so that ending the stream cancels them.
private final class Batch: Sendable {
    private struct State {
        var tasks: [ImageTask] = []
        var remaining: Int
        var isTerminated = false
    }

    private let state: Mutex<State>

    init(remaining: Int) {
        state = Mutex(State(remaining: remaining))
    }

    func add(_ task: ImageTask) {
        let terminated = state.withLock { state -> Bool in
            if !state.isTerminated { state.tasks.append(task) }
            return state.isTerminated
        }
        if terminated { task.cancel() }
    }

    func complete(_ result: ImagePipeline.BatchResult, _ continuation: AsyncStream<ImagePipeline.BatchResult>.Continuation) {
        let isLast = state.withLock { state -> Bool in
            state.remaining -= 1
            return state.remaining == 0
        }
        continuation.yield(result)
        if isLast { continuation.finish() }
    }

    func terminate() {
        let tasks = state.withLock { state -> [ImageTask] in
            state.isTerminated = true
            defer { state.tasks = [] }
            return state.tasks
        }
        for task in tasks { task.cancel() }
    }
}
