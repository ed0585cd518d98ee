import Dispatch
import Foundation
import Synchronization
import VipsCore
import VipsLoad

/// What the HTTP layer calls: routes, the image path (caches, coalescing,
/// the queue bound, timeouts, cancellation), health, metrics and the log.
///
/// On the network thread it only answers what needs no work (errors,
/// `/health`, `/metrics`, `304`, memory-cache hits) and defers the rest to a
/// render in a Swift task; the pipeline does the loading and decoding on its
/// own threads, and encodes there too.
final class ImageService: HTTPHandler {
    let pipeline: ImagePipeline
    let configuration: ImageServer.Configuration
    let metrics = ServerMetrics()
    let responses: ResponseCache
    let processed: ProcessedCache?
    let renders: RenderTable
    /// The memory budget renders are admitted within.
    let admission: MemoryAdmission
    private let draining = Atomic<Bool>(false)
    /// The HTTP layer's request and connection counts, for `/metrics` (set once it runs).
    private let httpGauges = LockedState<(@Sendable () -> (requests: Int, connections: Int))?>(nil)
    /// Blocking work the image path needs off the cooperative pool: sniffing
    /// a source for isolation, processors after an isolated decode.
    let files = DispatchQueue(label: "vipsload-serve-files", qos: .userInitiated, attributes: .concurrent)

    /// Answers made once and sent again and again.
    private struct Fixed: Sendable {
        let health = HTTPResponse.text(200, "ok")
        let methodNotAllowed = ErrorStatus.methodNotAllowed.response(headers: [("Allow", "GET, HEAD")])
        let uriTooLong = ErrorStatus.uriTooLong.response()
        let draining = ErrorStatus.draining.response(headers: [("Retry-After", "1")], closesConnection: true)
        let queueFull = ErrorStatus.queueFull.response(headers: [("Retry-After", "1")])
    }

    private let fixed = Fixed()

    init(pipeline: ImagePipeline, configuration: ImageServer.Configuration) {
        self.pipeline = pipeline
        self.configuration = configuration
        responses = ResponseCache(byteLimit: configuration.responseCacheBytes)
        processed = configuration.diskCache.map { ProcessedCache(disk: $0) }
        renders = RenderTable(limit: configuration.queueLimit)
        admission = MemoryAdmission(
            budget: configuration.memoryBudget
                ?? ImageServer.Configuration.defaultMemoryBudget(
                    responseCacheBytes: configuration.responseCacheBytes,
                    memoryCacheBytes: pipeline.memoryCache?.costLimit ?? 0))
    }

    /// Connects the HTTP layer's counts to `/metrics`.
    func attach(_ http: HTTPServer) {
        httpGauges.withLock { $0 = { [weak http] in (http?.activeRequests ?? 0, http?.openConnections ?? 0) } }
    }

    /// Whether new requests get 503 (the server is draining).
    var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// From now on new requests get 503 and `/health` fails.
    func beginDraining() {
        draining.store(true, ordering: .relaxed)
    }

    /// Ends every render in flight: its waiters get 503 (a drain out of time).
    func abandonRenders() {
        renders.cancelAll(with: .failure(.draining))
    }

    // MARK: - HTTPHandler (the network thread)

    func handle(_ request: borrowing HTTPRequest) -> HTTPHandling {
        guard request.target.utf8.count <= configuration.maxURLLength else {
            return .respond(fixed.uriTooLong, note: nil)
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            return .respond(fixed.methodNotAllowed, note: nil)
        }
        if isDraining { return .respond(fixed.draining, note: nil) }
        switch request.path {
        case "/health":
            return .respond(fixed.health, note: nil)
        case "/metrics":
            return .respond(
                HTTPResponse(
                    status: 200, body: Data(metricsText.utf8),
                    headers: [
                        ("Content-Type", "text/plain; version=0.0.4; charset=utf-8"), ("Cache-Control", "no-store")
                    ]),
                note: nil)
        default:
            return image(request)
        }
    }

    func completed(_ record: HTTPCompletion) {
        // Nothing sent because the client hung up first: 499, as nginx logs it.
        let status = record.status == 0 && record.clientGone ? 499 : record.status
        metrics.completed(status: status, seconds: record.seconds)
        guard let log = configuration.log, log.logsRequests else { return }
        log.request(
            AccessLogEntry(
                time: Date(), client: record.clientAddress, method: record.method,
                target: URLRedaction.redacted(record.target), status: status, bytes: record.bytes,
                seconds: record.seconds, cache: record.note))
    }

    func serverMessage(_ text: String) {
        configuration.log?.event("libmicrohttpd: \(text)")
    }

    /// `/metrics`' text.
    var metricsText: String {
        let http = httpGauges.withLock { $0 }?() ?? (requests: 0, connections: 0)
        return metrics.exposition(
            pipeline: pipeline.metrics, inFlight: pipeline.inFlight,
            gauges: ServerMetrics.Gauges(
                queueDepth: renders.count, queueLimit: renders.limit, activeRequests: http.requests,
                openConnections: http.connections, responseCacheBytes: responses.totalBytes,
                responseCacheEntries: responses.count, draining: isDraining, admission: admission.snapshot))
    }

    // MARK: - Images

    /// An image URL: answered now from the caches or with `304`, else deferred to a render.
    private func image(_ request: borrowing HTTPRequest) -> HTTPHandling {
        let job: RenderJob
        switch resolve(request) {
        case .success(let resolved): job = resolved
        case .failure(let status): return .respond(status.response(), note: nil)
        }
        if let tags = request.header("If-None-Match"), job.key.isMatched(by: tags) {
            metrics.record { $0.notModified += 1 }
            return .respond(job.notModified(), note: "not-modified")
        }
        if let cached = responses.response(for: job.key.text) {
            metrics.record { $0.memoryHits += 1 }
            return .respond(cached, note: "memory")
        }
        guard renders.hasRoom(for: job.key.text) else {
            metrics.record { $0.rejected += 1 }
            return .respond(fixed.queueFull, note: nil)
        }
        return .later { [self] reply in start(job, reply) }
    }

    /// Joins or starts the render of `job` for one request, with its own
    /// deadline and its own hang-up.
    private func start(_ job: RenderJob, _ reply: PendingReply) {
        let key = job.key.text
        let queueFull = fixed.queueFull
        let join = renders.join(
            key,
            deliver: { [metrics] outcome, joined in
                switch outcome {
                case .response(let response, let tier):
                    reply.send(response, note: joined ? "joined" : tier)
                case .failure(let status):
                    // Counted before the answer goes out, so the metrics never lag the response.
                    if status.code == ErrorStatus.clientGone.code { metrics.record { $0.clientCancels += 1 } }
                    if status.code == ErrorStatus.timedOut.code { metrics.record { $0.timeouts += 1 } }
                    if let response = status.response() ?? queueFull { reply.send(response) }
                }
            },
            work: { [self] in await render(job) })
        switch join {
        case .full:
            metrics.record { $0.rejected += 1 }
            if let queueFull { reply.send(queueFull) }
        case .started(let id), .joined(let id):
            if case .joined = join { metrics.record { $0.coalesced += 1 } }
            reply.onClientGone { [renders] in
                renders.leave(key, waiter: id, with: .failure(.clientGone))
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + configuration.requestTimeout.dispatchInterval) {
                [renders] in
                renders.leave(key, waiter: id, with: .failure(.timedOut))
            }
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
                let loaded = try await pipeline.data(for: request)
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
        let header: ImageInfo
        if let isolation = configuration.isolation, isolation.isolates(await sniff(input)) {
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
                files.async {
                    continuation.resume(returning: Result { () throws(VipsError) in try decoder.info(input) })
                }
            }
            switch probed {
            case .success(let info): header = info
            case .failure(let error): return .failure(ErrorStatus(error))
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

    /// The bitmap of `request` (`job`'s, reading the bytes `admit` loaded;
    /// from the pipeline, or the isolated decoder), encoded on the pipeline's threads.
    private func encode(_ job: RenderJob, _ request: ImageRequest) async throws(VipsError) -> EncodedImage {
        var request = request
        if job.keepsMetadata { request.options.insert(.keepMetadata) }
        let bitmap: Bitmap
        if let isolation = configuration.isolation {
            bitmap = try await image(for: request, isolation: isolation)
        } else {
            bitmap = try await pipeline.image(for: request)
        }
        return try await pipeline.encode(
            bitmap, as: job.encoding.format(for: bitmap), keepingMetadata: job.keepsMetadata,
            background: job.background, priority: request.priority, label: request.source.description)
    }

    // MARK: - Isolation

    /// With an isolated decode step, the source's first bytes decide where
    /// it is decoded: a local file's are read here, a remote source is
    /// downloaded through the pipeline first (data cache, shared loads), and
    /// decoded in this process from those same bytes when it stays here.
    private func image(for request: ImageRequest, isolation: any IsolatedDecoding) async throws(VipsError) -> Bitmap {
        if let path = request.source.filePath {
            guard isolation.isolates(await sniff(.file(path))) else { return try await pipeline.image(for: request) }
            return try await isolatedImage(.file(path), request, isolation)
        }
        if case .data(let bytes, _) = request.source.location {
            guard isolation.isolates(ImageFormat.sniff(bytes.prefix(64))) else {
                return try await pipeline.image(for: request)
            }
            return try await isolatedImage(.data(bytes), request, isolation)
        }
        let data = try await pipeline.data(for: request)
        defer { withExtendedLifetime(data) {} }
        if isolation.isolates(await sniff(data.input)) {
            return try await isolatedImage(data.input, request, isolation)
        }
        var local = request
        switch data.input {
        case .file(let path):
            // A download's file: its bitmap is not worth keeping under that name, and messages name the URL.
            local.source = ImageSource.file(path).named(request.source.description)
            local.options.insert(.disableMemoryCacheWrites)
        case .data(let bytes):
            local.source = ImageSource.data(bytes, identifier: request.source.key).named(request.source.description)
        }
        return try await pipeline.image(for: local)
    }

    /// An isolated decode, then the request's processors (on a queue of
    /// their own, not Swift's cooperative pool).
    private func isolatedImage(
        _ input: ImageInput, _ request: ImageRequest, _ isolation: any IsolatedDecoding
    ) async throws(VipsError) -> Bitmap {
        let decoded = try await isolation.decode(input, for: request).get()
        guard !request.processors.isEmpty else { return decoded }
        let processors = request.processors
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Bitmap, VipsError>, Never>) in
            files.async {
                continuation.resume(
                    returning: Result { () throws(VipsError) -> Bitmap in
                        var bitmap = decoded
                        for processor in processors {
                            try processor.validate()
                            bitmap = try processor.process(bitmap)
                        }
                        return bitmap
                    })
            }
        }
        return try result.get()
    }

    /// The format the first bytes of `input` name (a file's read on the files queue).
    private func sniff(_ input: ImageInput) async -> ImageFormat? {
        switch input {
        case .data(let bytes):
            return ImageFormat.sniff(bytes.prefix(64))
        case .file(let path):
            return await withCheckedContinuation { continuation in
                files.async {
                    let handle = FileHandle(forReadingAtPath: path)
                    let prefix = (try? handle?.read(upToCount: 64)) ?? nil
                    try? handle?.close()
                    continuation.resume(returning: prefix.flatMap { ImageFormat.sniff($0) })
                }
            }
        }
    }

    /// The job an image URL asks for, or the status refusing it.
    ///
    /// Nothing is decoded: the URL is parsed and checked (signature, options,
    /// source policy), a local file's identity is one `stat`, and the format
    /// is the URL's or negotiated from `Accept`.
    private func resolve(_ request: borrowing HTTPRequest) -> Result<RenderJob, ErrorStatus> {
        let processing: ProcessingRequest
        do throws(ProcessingURLError) {
            processing = try configuration.urls.parse(request.target)
        } catch {
            return .failure(ErrorStatus(error))
        }
        let source = processing.imageRequest.source
        let identity: String
        if let path = source.filePath {
            switch RepresentationKey.identity(ofFile: path) {
            case .success(let found): identity = found
            case .failure(let error): return .failure(ErrorStatus(error))
            }
        } else {
            identity = source.key
        }
        let plan = processing.output
        let encoding: RenderJob.Encoding
        let formatName: String
        if let format = plan.format {
            encoding = .format(plan.outputFormat(format))
            formatName = format.rawValue
        } else {
            let choice = FormatNegotiation(accept: request.header("Accept"))
            switch choice {
            case .avif: encoding = .format(plan.outputFormat(.avif))
            case .webp: encoding = .format(plan.outputFormat(.webp))
            case .sourceFamily:
                encoding = .sourceFamily(jpeg: plan.outputFormat(.jpeg), png: plan.outputFormat(.png))
            }
            formatName = "negotiated:" + choice.rawValue
        }
        let maxAge =
            configuration.maxAge ?? (processing.isSigned ? configuration.signedMaxAge : configuration.unsignedMaxAge)
        return .success(
            RenderJob(
                key: RepresentationKey(source: identity, options: processing.variantKey, format: formatName),
                request: processing.imageRequest, encoding: encoding, keepsMetadata: plan.keepsMetadata,
                background: plan.background, maxAge: maxAge, variesByAccept: plan.format == nil,
                isRemote: source.filePath == nil, geometry: RenderMemoryEstimate.Geometry(processing)))
    }
}
