import VipsCore

extension ImagePipeline {
    /// The encoded bytes of `request`'s source, loaded as `image(for:)` loads
    /// them but not decoded: the data cache first (per the request's options),
    /// then the loader, joining a load of the same source in flight. For
    /// tools that hand the bytes to another decoder or process.
    ///
    /// The returned `ImageData` keeps a downloaded file alive until it is
    /// released. Cancelling the calling task fails the call with `.cancelled`
    /// at once, and cancels the load unless others share it.
    ///
    /// - Throws: `.invalidArgument` for contradictory options; the load's errors.
    public nonisolated(nonsending) func data(for request: ImageRequest) async throws(VipsError) -> ImageData {
        let validated = try request.validated()
        let call = DataCall(engine: engine, source: request.source)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<ImageData, VipsError>, Never>) in
                call.start(validated, continuation)
            }
        } onCancel: {
            call.cancel()
        }
        return try result.get()
    }

    /// The HTTP metadata (validators `etag` and `lastModified`, freshness)
    /// the data cache holds for the original of `request`'s source, as the
    /// last load stored or revalidated it; nil without a data cache, without
    /// an entry, or for an entry stored without HTTP. Reads only the entry's
    /// metadata, never its bytes.
    ///
    /// After `data(for:)` it describes the bytes just loaded, so a tool that
    /// keeps results made from them can key those results by it: a changed
    /// original gets new validators.
    public func storedHTTPMetadata(for request: ImageRequest) -> HTTPCacheMetadata? {
        guard let dataCache = engine.dataCache, let validated = try? request.validated() else { return nil }
        return dataCache.httpMetadata(for: validated.dataPolicy.key)
    }
}

/// One `data(for:)` call: its continuation is resumed exactly once, by the
/// load's completion or by a cancellation, whichever comes first, and never
/// under a lock.
private final class DataCall: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result<ImageData, VipsError>, Never>?
        var ticket: DataLoadTicket?
        var cancelled = false
    }

    private let engine: PipelineEngine
    private let source: ImageSource
    private let state = LockedState(State(), rank: .task)

    init(engine: PipelineEngine, source: ImageSource) {
        self.engine = engine
        self.source = source
    }

    func start(_ request: ValidatedRequest, _ continuation: CheckedContinuation<Result<ImageData, VipsError>, Never>) {
        let cancelledFirst = state.withLock { state -> Bool in
            guard !state.cancelled else { return true }
            state.continuation = continuation
            return false
        }
        if cancelledFirst { return continuation.resume(returning: .failure(.cancelled(source.description))) }
        let ticket = engine.loadDataOnly(request) { [self] result in finish(result) }
        let cancelledMeanwhile = state.withLock { state -> Bool in
            state.ticket = ticket
            return state.cancelled
        }
        if cancelledMeanwhile { engine.cancel(ticket) }
    }

    private func finish(_ result: Result<ImageData, VipsError>) {
        let continuation = state.withLock { state in
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: result)
    }

    func cancel() {
        let (continuation, ticket) = state.withLock { state in
            state.cancelled = true
            defer { state.continuation = nil }
            return (state.continuation, state.ticket)
        }
        if let ticket { engine.cancel(ticket) }
        // A call still waiting is a request cancelled before it completed, as `ImageTask.cancel()` counts one.
        if continuation != nil { engine.metrics.cancelled.add(1, ordering: .relaxed) }
        continuation?.resume(returning: .failure(.cancelled(source.description)))
    }
}
