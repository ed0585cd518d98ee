import Foundation
import VipsCore

extension ImagePipeline {
    /// The encoded bytes of `request`'s source, asked for with `conditions`
    /// (a client's `If-None-Match` and `If-Modified-Since`, forwarded to the
    /// origin as a proxy such as imgproxy forwards them): the bytes, or
    /// `.notModified` when the copy the conditions describe is current.
    ///
    /// - An `http(s)` source loaded by the pipeline's own HTTP loader: a
    ///   fresh data-cache entry answers by itself (`.notModified` when its
    ///   stored validators meet the conditions, see `HTTPConditions.areMet(by:)`,
    ///   else `.loaded` with its bytes). Otherwise one request goes to the
    ///   origin with the conditions, on the pipeline's network lane (in
    ///   `request.priority` order, within `Configuration.loadLimit`), with
    ///   the request's own header fields, redirect check and the pipeline's
    ///   request modifier. Its `304` is `.notModified`, carrying the 304's
    ///   validators; a `200` body is streamed into the data cache (per the
    ///   request's options) and returned as `.loaded`.
    /// - The load is never shared with other loads of the source, and a
    ///   `304` is never stored: it answers this call only.
    /// - Empty `conditions`, a source that is not `http(s)`, a custom
    ///   `dataLoader`, or `.returnCacheDataDontLoad`: loaded as
    ///   `data(for:)` loads it, as `.loaded`.
    ///
    /// Cancelling the calling task fails the call with `.cancelled` at once
    /// and stops the request.
    ///
    /// - Throws: `.invalidArgument` for contradictory options; the load's errors.
    public nonisolated(nonsending) func data(
        for request: ImageRequest, conditions: HTTPConditions
    ) async throws(VipsError) -> ConditionalLoad {
        guard !conditions.isEmpty, let http = engine.httpLoader, case .url(let url) = request.source.location,
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            !request.options.contains(.returnCacheDataDontLoad)
        else {
            return .loaded(try await data(for: request))
        }
        let policy = try request.validated().dataPolicy
        let engine = self.engine
        if policy.reads, let dataCache = engine.dataCache {
            let hit = await engine.ioPool.run(priority: request.priority) { dataCache.cachedData(for: policy.key) }
            if case .serve(let data) = engine.cachePolicy.use(of: hit, canRevalidate: false) {
                if let validators = data.validators, conditions.areMet(by: validators) {
                    return .notModified(validators)
                }
                return .loaded(ImageData(fromDataCache: data))
            }
        }
        let label = request.source.description
        let id = engine.loadLane.reserveID()
        // The one resume: the download's end, or a cancellation, whichever comes first.
        let waiting = LockedState<CheckedContinuation<Result<ConditionalLoad, VipsError>, Never>?>(nil)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<ConditionalLoad, VipsError>, Never>) in
                waiting.withLock { $0 = continuation }
                if Task.isCancelled {
                    waiting.withLock { $0.take() }?.resume(returning: .failure(.cancelled(label)))
                    return
                }
                engine.loadLane.enqueue(id, priority: request.priority) {
                    let result: Result<ConditionalLoad, VipsError>
                    do throws(VipsError) {
                        result = .success(
                            try await http.conditionalDownload(
                                request.source, key: policy.key, conditions: conditions, headers: policy.headers,
                                modifier: engine.requestModifier, allowsRedirect: policy.allowsRedirect,
                                cache: policy.writes ? engine.dataCache : nil))
                    } catch {
                        result = .failure(error)
                    }
                    waiting.withLock { $0.take() }?.resume(returning: result)
                }
            }
        } onCancel: {
            // Still waiting: it never runs; running: its task is cancelled, and its late answer dropped.
            engine.loadLane.cancel(id)
            waiting.withLock { $0.take() }?.resume(returning: .failure(.cancelled(label)))
        }
        return try result.get()
    }
}
