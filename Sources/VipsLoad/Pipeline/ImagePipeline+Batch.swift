extension ImagePipeline {
    /// One completed request of a batch.
    public struct BatchResult: Sendable {
        /// The request's position in the array passed to `images(for:)`.
        public let index: Int
        /// The request at `index`.
        public let request: ImageRequest
        /// The bitmap, or the error (kind `.cancelled` for a cancelled request).
        public let result: Result<Bitmap, VipsError>
    }

    /// Starts every request at once and yields each result, success or error,
    /// with its index, in the order they complete; the sequence ends after the
    /// last one.
    ///
    /// Each request is an ordinary task of the pipeline: queued by its own
    /// priority and coalesced like any other. Ending the iteration early (a
    /// `break`, or cancelling the iterating Swift task) cancels the requests
    /// still in flight.
    public func images(for requests: [ImageRequest]) -> ImageBatch {
        let (stream, continuation) = AsyncStream.makeStream(of: BatchResult.self)
        let batch = TaskGroupHandle(remaining: requests.count)
        let sequence = ImageBatch(stream: stream, lifetime: Lifetime { batch.cancelAll() })
        guard !requests.isEmpty else {
            continuation.finish()
            return sequence
        }
        continuation.onTermination = { _ in batch.cancelAll() }
        for (index, request) in requests.enumerated() {
            let task = imageTask(with: request)
            batch.add(task)
            task.onCompletion { result in
                // Yielded before it is counted: whoever counts the last one
                // finishes, after every result is in the stream.
                continuation.yield(BatchResult(index: index, request: request, result: result))
                if batch.completeOne() { continuation.finish() }
            }
        }
        return sequence
    }
}
