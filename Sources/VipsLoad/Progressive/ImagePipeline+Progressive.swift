extension ImagePipeline {
    /// Loads a ladder of requests, smallest first, and yields each step as it
    /// arrives — never a smaller step after a larger one.
    ///
    /// A ladder is one source at growing sizes (64 px, 512 px, original) or
    /// growing sources (small thumbnail file, large thumbnail file, full file).
    /// All steps start at once (sizes of one source share one data load);
    /// once a step arrives, the smaller steps still pending are cancelled.
    /// When a step is already in the memory cache it is yielded at once and
    /// no smaller step is loaded: with the largest cached, only it is yielded.
    ///
    /// The sequence ends after the last step, or throws the last step's error
    /// (a smaller step's failure is skipped). Ending the iteration early (a
    /// `break`, or cancelling the iterating task) cancels every step in flight.
    ///
    /// - Throws: `VipsError`: the last step's failure, `.invalidArgument` for an empty ladder.
    public func progressiveImages(for ladder: [ImageRequest]) -> ProgressiveImages {
        let (stream, continuation) = AsyncThrowingStream.makeStream(
            of: ProgressiveImage.self, throwing: (any Error).self)
        let load = ProgressiveLoad(ladder: ladder, continuation: continuation)
        let sequence = ProgressiveImages(stream: stream, lifetime: Lifetime { load.terminate() })
        guard !ladder.isEmpty else {
            continuation.finish(throwing: VipsError(.invalidArgument, "a progressive load needs at least one step"))
            return sequence
        }
        continuation.onTermination = { _ in load.terminate() }

        // The largest step the memory cache holds is shown first, at once.
        var firstToLoad = 0
        for step in ladder.indices.reversed() {
            if let validated = try? ladder[step].validated(), let bitmap = engine.cachedBitmap(for: validated) {
                engine.metrics.requests.add(1, ordering: .relaxed)
                load.receive(.success(bitmap), step: step)
                firstToLoad = step + 1
                break
            }
        }
        for step in ladder.indices where step >= firstToLoad {
            guard !load.isFinished else { break }
            switch start(ladder[step]) {
            case .hit(let bitmap):
                load.receive(.success(bitmap), step: step)
            case .failed(let error):
                load.receive(.failure(error), step: step)
            case .task(let task):
                load.add(task, step: step)
                task.onCompletion { result in load.receive(result, step: step) }
            }
        }
        return sequence
    }
}
