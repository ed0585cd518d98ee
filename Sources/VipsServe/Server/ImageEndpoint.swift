import Foundation
import VipsCore
import VipsHTTP
import VipsLoad

/// The image URLs, in imgproxy's four steps: the URL is parsed and checked
/// into a job (`resolve`), answered at once where no work is needed (`304`,
/// a memory hit, a full queue), and otherwise made by `answer(_:)`: an async
/// function, run in the HTTP layer's task for the request, that joins or
/// starts the job's render and waits for it within the request's deadline.
///
/// A hang-up cancels that task, and the deadline ends the wait: either way
/// the request leaves its render, and a render that no request waits for
/// any more is cancelled, so its download, decode and encode stop
/// (`ImagePipeline.Configuration.stopsAbandonedWork`). The render keeps its
/// place in the queue until its work has returned (`RenderTable`).
final class ImageEndpoint: Sendable {
    let pipeline: ImagePipeline
    let configuration: ImageServer.Configuration
    let metrics: ServerMetrics
    let responses: ResponseCache
    let processed: ProcessedCache?
    let renders: RenderTable
    /// The memory budget renders are admitted within.
    let admission: MemoryAdmission
    /// Where bitmaps come from: the pipeline, or the isolated worker.
    let source: IsolationSource
    private let queueFull = ErrorStatus.queueFull.response(headers: [("Retry-After", "1")])

    init(pipeline: ImagePipeline, configuration: ImageServer.Configuration, metrics: ServerMetrics) {
        self.pipeline = pipeline
        self.configuration = configuration
        self.metrics = metrics
        responses = ResponseCache(byteLimit: configuration.responseCacheBytes)
        processed = configuration.dataCache.map { ProcessedCache(disk: $0, log: configuration.log) }
        renders = RenderTable(limit: configuration.queueLimit)
        admission = MemoryAdmission(
            budget: configuration.memoryBudget
                ?? ImageServer.Configuration.defaultMemoryBudget(
                    responseCacheBytes: configuration.responseCacheBytes,
                    memoryCacheBytes: pipeline.memoryCache?.costLimit ?? 0))
        source = IsolationSource(pipeline: pipeline, isolation: configuration.isolation)
    }

    /// An image URL: answered now from the caches or with `304`, else deferred to `answer(_:)`.
    func handle(_ request: borrowing HTTPRequest) -> HTTPHandling {
        let job: RenderJob
        switch resolve(request) {
        case .success(let resolved): job = datedByFile(resolved)
        case .failure(let status): return .respond(status.response(), note: nil)
        }
        if let tags = request.header("If-None-Match"), job.key.isMatched(by: tags) {
            metrics.record { $0.notModified += 1 }
            return .respond(job.notModified(), note: "not-modified")
        }
        if let conditional = conditionalHandling(request, job) { return conditional }
        if let cached = responses.response(for: job.key.text) {
            metrics.record { $0.memoryHits += 1 }
            return .respond(cached, note: "memory")
        }
        guard renders.hasRoom(for: job.key.text) else {
            metrics.record { $0.rejected += 1 }
            return .respond(queueFull, note: nil)
        }
        return .later { [self] in await answerJob(job) }
    }

    /// Ends every render in flight: its waiters get 503 (a drain out of time).
    func abandonRenders() {
        renders.cancelAll(with: .failure(.draining))
    }

    // MARK: - The deferred answer

    /// `job`'s answer: its render's outcome, or 504 at the request's deadline,
    /// or 499 (nothing is sent) when the calling task is cancelled.
    func answer(_ job: RenderJob) async -> HTTPAnswer {
        let deadline = configuration.requestTimeout
        let outcome = await withTaskGroup(of: (RenderTable.Outcome, joined: Bool)?.self) { group in
            group.addTask { [self] in await wait(for: job) }
            group.addTask {
                // The deadline: ends the wait unless the render answers first.
                try? await Task.sleep(for: deadline)
                return Task.isCancelled ? nil : (.failure(.timedOut), joined: false)
            }
            defer { group.cancelAll() }
            while let next = await group.next() {
                if let next { return next }
            }
            return (RenderTable.Outcome.failure(.clientGone), joined: false)
        }
        switch outcome.0 {
        case .response(let response, let tier):
            return HTTPAnswer(response, note: outcome.joined ? "joined" : tier)
        case .failure(let status):
            if status.code == ErrorStatus.clientGone.code { metrics.record { $0.clientCancels += 1 } }
            if status.code == ErrorStatus.timedOut.code { metrics.record { $0.timeouts += 1 } }
            if status.code == ErrorStatus.queueFull.code { return HTTPAnswer(queueFull) }
            return HTTPAnswer(status.response() ?? queueFull)
        }
    }

    /// Joins or starts `job`'s render and waits for its outcome; leaves the
    /// render (its outcome then is 499's) when the calling task is cancelled.
    private func wait(for job: RenderJob) async -> (RenderTable.Outcome, joined: Bool) {
        let key = job.key.text
        let place = WaiterPlace()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<(RenderTable.Outcome, Bool), Never>) in
                let join = renders.join(
                    key, deliver: { outcome, joined in continuation.resume(returning: (outcome, joined)) },
                    work: { [self] in await render(job) })
                switch join {
                case .full:
                    metrics.record { $0.rejected += 1 }
                    continuation.resume(returning: (.failure(.queueFull), false))
                case .started(let id), .joined(let id):
                    if case .joined = join { metrics.record { $0.coalesced += 1 } }
                    if place.settle(id) { renders.leave(key, waiter: id, with: .failure(.clientGone)) }
                }
            }
        } onCancel: { [renders] in
            if let id = place.cancel() { renders.leave(key, waiter: id, with: .failure(.clientGone)) }
        }
    }

    /// Makes `job`'s response: from the disk cache, else through the pipeline.
    private func render(_ job: RenderJob) async -> RenderTable.Outcome {
        let key = job.key.text
        if let processed, let bytes = await processed.bytes(for: key) {
            let format = ImageFormat.sniff(bytes.prefix(64)) ?? .jpeg
            guard let response = job.response(body: bytes, format: format) else {
                return .failure(ErrorStatus(500, "internal error"))
            }
            responses.store(response, for: key, lifetime: job.cacheLifetime.map { .seconds($0) })
            metrics.record { $0.diskHits += 1 }
            return .response(response, tier: "disk")
        }
        metrics.record { $0.renders += 1 }
        let admitted: (request: ImageRequest, ticket: MemoryAdmission.Ticket, data: ImageData?)
        switch await admit(job) {
        case .success(let value): admitted = value
        case .failure(let status): return .failure(status)
        }
        defer { withExtendedLifetime(admitted.data) { admitted.ticket.release() } }
        let job = datedByOrigin(job, admitted.data?.validators)
        do throws(VipsError) {
            let encoded = try await encode(job, admitted.request)
            guard let response = job.response(body: encoded.data, format: encoded.format.imageFormat) else {
                return .failure(ErrorStatus(500, "internal error"))
            }
            responses.store(response, for: key, lifetime: job.cacheLifetime.map { .seconds($0) })
            processed?.store(
                encoded.data, for: key, contentType: RenderJob.contentType(encoded.format.imageFormat),
                lifetime: job.cacheLifetime)
            return .response(response, tier: "miss")
        } catch {
            return .failure(ErrorStatus(error))
        }
    }

    /// Loads `job`'s source bytes (a local file or in-memory source is used
    /// as it is), reads their header and waits until the memory the render
    /// needs fits in the budget. Returns the request to decode, reading
    /// those same bytes, the admission ticket, and the loaded data (kept
    /// alive until the render ends).
    private func admit(
        _ job: RenderJob
    ) async -> Result<(request: ImageRequest, ticket: MemoryAdmission.Ticket, data: ImageData?), ErrorStatus> {
        var request = job.request
        var data: ImageData?
        let input: ImageInput
        if let path = request.source.filePath {
            input = .file(path)
        } else if case .data(let bytes, _) = request.source.location {
            input = .data(bytes)
        } else {
            do throws(VipsError) {
                let loaded: ImageData
                if let preloaded = job.preloaded {
                    loaded = preloaded
                } else {
                    loaded = try await pipeline.data(for: request)
                }
                data = loaded
                input = loaded.input
            } catch {
                return .failure(ErrorStatus(error))
            }
            switch input {
            case .file(let path):
                // A download's file: its bitmap is not worth keeping under that name, and messages name the URL.
                request.source = ImageSource.file(path).named(job.request.source.description)
                request.options.insert(.disableMemoryCacheWrites)
            case .data(let bytes):
                request.source = ImageSource.data(bytes, identifier: job.request.source.key)
                    .named(job.request.source.description)
            }
        }
        if let refusal = job.securityLimits.refusal(fileSize: Self.byteCount(of: input)) {
            return .failure(ErrorStatus(422, refusal))
        }
        let header: ImageInfo
        if let isolation = configuration.isolation, isolation.isolates(await source.sniff(input)) {
            // Never parsed here: the worker decodes it, and only the result comes back. Estimated as
            // an image the size of the box (4096 px for a free side) that is not enlarged.
            let side = { (pixels: Int) in pixels > 0 ? pixels : 4096 }
            header = ImageInfo(
                width: side(job.geometry.width), height: side(job.geometry.height), format: .png, bands: 4,
                hasAlpha: true, orientation: 1, pages: 1)
        } else {
            let decoder = ImageDecoder(options: pipeline.configuration.decodeOptions)
            let probed = await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<ImageInfo, VipsError>, Never>) in
                source.files.async {
                    continuation.resume(returning: Result { () throws(VipsError) in try decoder.info(input) })
                }
            }
            switch probed {
            case .success(let info): header = info
            case .failure(let error): return .failure(ErrorStatus(error))
            }
            // A worker's decode is bounded by its own limits; this header is read here only.
            if let refusal = job.securityLimits.refusal(width: header.width, height: header.height) {
                return .failure(ErrorStatus(422, refusal))
            }
        }
        let estimate = RenderMemoryEstimate(info: header, geometry: job.geometry, format: job.knownFormat)
        do throws(MemoryAdmission.Refusal) {
            let ticket = try await admission.acquire(estimate.bytes)
            return .success((request, ticket, data))
        } catch {
            switch error {
            case .overBudget: return .failure(.overMemoryBudget)
            case .cancelled: return .failure(.clientGone)
            }
        }
    }

    /// The encoded size of `input`: its count, or its file's size (0 when it cannot be read: the decode says why).
    private static func byteCount(of input: ImageInput) -> Int {
        switch input {
        case .data(let bytes): return bytes.count
        case .file(let path):
            var status = stat()
            return stat(path, &status) == 0 ? Int(status.st_size) : 0
        }
    }

    /// The bitmap of `request` (`job`'s, reading the bytes `admit` loaded;
    /// from the pipeline, or the isolated decoder), encoded on the pipeline's threads.
    private func encode(_ job: RenderJob, _ request: ImageRequest) async throws(VipsError) -> EncodedImage {
        var request = request
        if job.keepsMetadata { request.options.insert(.keepMetadata) }
        let bitmap = try await source.bitmap(for: request)
        return try await job.encode(
            bitmap, pipeline: pipeline, priority: request.priority, label: request.source.description)
    }

    // MARK: - Resolving

    /// The job an image URL asks for, or the status refusing it.
    ///
    /// Nothing is decoded: the URL is parsed and checked (signature, options,
    /// source policy), a local file's identity is one `stat`, and the format
    /// is the URL's or negotiated from `Accept`.
    private func resolve(_ request: borrowing HTTPRequest) -> Result<RenderJob, ErrorStatus> {
        let settings = configuration.output
        let processing: ProcessingRequest
        do throws(ProcessingURLError) {
            processing = try configuration.urls.parse(request.target, defaults: clientHintDefaults(request))
        } catch {
            return .failure(ErrorStatus(error))
        }
        let source = processing.imageRequest.source
        let identity: String
        switch RepresentationKey.identity(of: source) {
        case .success(let found): identity = found
        case .failure(let error): return .failure(ErrorStatus(error))
        }
        let plan = processing.output
        let options = processing.options
        let negotiated = settings.negotiated(accept: request.header("Accept"), urlFormat: plan.format)
        let format = negotiated ?? plan.format
        let qualities = Dictionary(
            uniqueKeysWithValues: ProcessingOptions.Format.allCases.filter(\.hasQuality).map {
                ($0, settings.quality(for: $0, options: options))
            })
        let encoding = RenderJob.Encoding(
            format: format, preferred: settings.preferred, qualities: qualities, maxBytes: options.maxBytes,
            keepsColorProfile: !(options.stripColorProfile ?? settings.stripColorProfile))
        var imageRequest = processing.imageRequest
        // Whether the source had a profile is recorded with the metadata the decode keeps.
        if encoding.keepsColorProfile { imageRequest.options.insert(.keepMetadata) }
        // The answer depends on `Accept` when a preference could apply: no format in the URL, or one enforced.
        var vary: [String] = []
        if settings.readsAccept, plan.format == nil || settings.enforcesAny { vary.append("Accept") }
        if settings.enableClientHints { vary += ["Sec-CH-DPR", "DPR", "Sec-CH-Width", "Width"] }
        let formatName =
            (format.map(\.rawValue) ?? "source")
            + "|" + settings.keyText(options: options, chosenFromSource: format == nil)
        let maxAge =
            configuration.maxAge ?? (processing.isSigned ? configuration.signedMaxAge : configuration.unsignedMaxAge)
        return .success(
            withResponseOptions(
                RenderJob(
                    key: RepresentationKey(source: identity, options: processing.variantKey, format: formatName),
                    request: imageRequest, encoding: encoding, keepsMetadata: plan.keepsMetadata,
                    background: plan.background, maxAge: maxAge, isRemote: source.filePath == nil,
                    geometry: RenderMemoryEstimate.Geometry(processing), vary: vary,
                    securityLimits: processing.securityLimits, allowOrigin: configuration.allowOrigin),
                processing))
    }

    /// The options a URL's own are applied over: the parser's defaults and, with client hints on,
    /// imgproxy's `dpr` from `Sec-CH-DPR` or `DPR` (0 < dpr ≤ 8) and `width`
    /// from `Sec-CH-Width` or `Width` (physical pixels over that dpr, rounded).
    /// The URL's options override them, and the canonical options (the cache
    /// key and `ETag`) carry what they set.
    private func clientHintDefaults(_ request: borrowing HTTPRequest) -> ProcessingOptions {
        var defaults = configuration.urls.defaults
        guard configuration.output.enableClientHints else { return defaults }
        var dpr = 1.0
        for name in ["Sec-CH-DPR", "DPR"] {
            guard let text = request.header(name), !text.isEmpty else { continue }
            if let value = Double(text.trimmingCharacters(in: .whitespaces)), value > 0, value <= 8 {
                dpr = value
                defaults.dpr = value
                break
            }
        }
        for name in ["Sec-CH-Width", "Width"] {
            guard let text = request.header(name), !text.isEmpty else { continue }
            if let value = Int(text.trimmingCharacters(in: .whitespaces)), value > 0 {
                // A client's width is never a 400: at most the result limit (imgproxy has none; a
                // result that large is the image itself unless the URL enlarges).
                let limit = Double(configuration.urls.limits.maxResultDimension)
                let width = (Double(value) / dpr).rounded()
                defaults.width = Int(width * dpr > limit ? (limit / dpr).rounded(.down) : width)
                break
            }
        }
        return defaults
    }
}

/// One request's place among a render's waiters, known once `join` returns:
/// a cancellation that comes before that is kept, and acted on then.
private final class WaiterPlace: Sendable {
    private let state = LockedState<(id: UInt64?, cancelled: Bool)>((nil, false))

    /// Records the waiter's id; true when the request was cancelled already (it must leave now).
    func settle(_ id: UInt64) -> Bool {
        state.withLock { state in
            state.id = id
            return state.cancelled
        }
    }

    /// Marks the request cancelled; the id to leave with, when known already.
    func cancel() -> UInt64? {
        state.withLock { state in
            state.cancelled = true
            return state.id
        }
    }
}
