import Foundation
import Synchronization
import VipsCore
import VipsHTTP
import VipsLoad

/// `/info/…`: a source's metadata as JSON, in imgproxy Pro's URL form
/// (`/info/%signature/%info_options/plain/%source_url`, or a base64url
/// source), signed as processing URLs are (the signature covers the path
/// after its own segment).
///
/// The answer: the source's `width`, `height`, `format`, `size` (bytes),
/// `orientation` (EXIF, 1–8), `pages`, `alpha`, its `average` colour
/// (`R`, `G`, `B`, `A`, in linear light as the library computes it), and
/// its `blurhash` and `thumbhash` (base64), from a decode at most
/// `ImagePlaceholder.side` pixels a side (shrunk on load where the format
/// allows).
///
/// Bounded as image renders are: at most `queueLimit` at once (429 beyond),
/// the request's deadline (504), the memory budget for the small decode,
/// the isolated decoder for formats it isolates; answers are cached and
/// tagged (`ETag`, `304`) as image answers are. The only options are
/// `cachebuster` and `expires`; any other is 404.
final class InfoEndpoint: Sendable {
    private let images: ImageEndpoint
    /// Info answers being made now.
    private let inFlight = Atomic<Int>(0)

    init(images: ImageEndpoint) {
        self.images = images
    }

    /// The prefix of the route.
    static let prefix = "/info/"

    /// An info URL: answered now (a refusal, a `304`, a cached answer, a full
    /// queue), else made by `answer(_:)` within the request's deadline.
    func handle(_ request: borrowing HTTPRequest) -> HTTPHandling {
        let job: Job
        switch resolve(String(request.target.dropFirst(Self.prefix.count - 1))) {
        case .success(let resolved): job = resolved
        case .failure(let status): return .respond(status.response(), note: nil)
        }
        if let tags = request.header("If-None-Match"), job.key.isMatched(by: tags) {
            images.metrics.record { $0.notModified += 1 }
            return .respond(job.notModified(), note: "not-modified")
        }
        if let cached = images.responses.response(for: job.key.text) {
            images.metrics.record { $0.memoryHits += 1 }
            return .respond(cached, note: "memory")
        }
        guard enter() else {
            images.metrics.record { $0.rejected += 1 }
            return .respond(ErrorStatus.queueFull.response(headers: [("Retry-After", "1")]), note: nil)
        }
        return .later { [self] in
            defer { inFlight.subtract(1, ordering: .relaxed) }
            return await images.withDeadline { [self] in await answer(job) }
        }
    }

    /// Takes one of the `queueLimit` places; false when none is free.
    private func enter() -> Bool {
        let limit = max(1, images.configuration.queueLimit)
        var current = inFlight.load(ordering: .relaxed)
        while current < limit {
            let (exchanged, original) = inFlight.compareExchange(
                expected: current, desired: current + 1, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    /// One info URL, resolved.
    struct Job: Sendable {
        let key: RepresentationKey
        let request: ImageRequest
        let maxAge: Int
        let isRemote: Bool
        /// The memory estimate's geometry: a box of `ImagePlaceholder.side`.
        let geometry: RenderMemoryEstimate.Geometry
        /// `Last-Modified`: a local file's time, or the origin's once loaded.
        var lastModified: String?

        var headers: [(String, String)] {
            [("ETag", key.entityTag), ("Cache-Control", "public, max-age=\(maxAge)")]
                + (lastModified.map { [("Last-Modified", $0)] } ?? [])
        }

        func notModified() -> HTTPResponse? { HTTPResponse(status: 304, headers: headers) }
    }

    /// The info URL `target` (from the signature segment on) as a job, or the refusal.
    private func resolve(_ target: String) -> Result<Job, ErrorStatus> {
        let configuration = images.configuration
        let processing: ProcessingRequest
        do throws(ProcessingURLError) {
            processing = try configuration.urls.parse(target)
        } catch {
            return .failure(ErrorStatus(error))
        }
        let options = processing.options
        if let other = options.canonicalSegments.first(where: { !$0.hasPrefix("cb:") && !$0.hasPrefix("exp:") }) {
            let name = other.prefix { $0 != ":" }
            return .failure(ErrorStatus(404, "\(name): not an info option (only cachebuster and expires are)"))
        }
        let source = processing.imageRequest.source
        let identity: String
        switch RepresentationKey.identity(of: source) {
        case .success(let found): identity = found
        case .failure(let error): return .failure(ErrorStatus(error))
        }
        var maxAge =
            configuration.maxAge ?? (processing.isSigned ? configuration.signedMaxAge : configuration.unsignedMaxAge)
        if let expires = options.expires { maxAge = max(0, min(maxAge, expires - Int(Date().timeIntervalSince1970))) }
        var request = ImageRequest(source: source, size: .maxPixelSize(ImagePlaceholder.side))
        request.allowsRedirect = processing.imageRequest.allowsRedirect
        var geometry = RenderMemoryEstimate.Geometry(processing)
        geometry.width = ImagePlaceholder.side
        geometry.height = ImagePlaceholder.side
        return .success(
            Job(
                key: RepresentationKey(source: identity, options: "info", format: "json"), request: request,
                maxAge: maxAge, isRemote: source.filePath == nil, geometry: geometry,
                lastModified: configuration.usesLastModified
                    ? source.filePath.flatMap(ImageEndpoint.lastModified(ofFile:)) : nil))
    }

    /// Loads the source, reads its header, waits for the memory its small
    /// decode needs, decodes it and answers the JSON (cached as image answers are).
    private func answer(_ job: Job) async -> HTTPAnswer? {
        let pipeline = images.pipeline
        let data: ImageData
        do throws(VipsError) {
            data = try await pipeline.data(for: job.request)
        } catch {
            return Task.isCancelled ? nil : HTTPAnswer(ErrorStatus(error).response())
        }
        var job = job
        if job.isRemote, images.configuration.usesLastModified, let lastModified = data.validators?.lastModified {
            job.lastModified = lastModified
        }
        var request = job.request
        if !job.isRemote {
            // A local file is read where it is.
        } else if case .file(let path) = data.input {
            request.source = ImageSource.file(path).named(job.request.source.description)
            request.options.insert(.disableMemoryCacheWrites)
        } else if case .data(let bytes) = data.input {
            request.source = ImageSource.data(bytes, identifier: job.request.source.key)
                .named(job.request.source.description)
        }
        // The header, for the memory estimate. A format the isolated decoder takes is never parsed
        // here: its header comes back with the worker's small decode, estimated meanwhile as a
        // source the size of the box, as a render's is.
        var header: ImageInfo?
        if let isolation = images.configuration.isolation, isolation.isolates(await images.source.sniff(data.input)) {
            header = nil
        } else {
            let decoder = ImageDecoder(options: pipeline.configuration.decodeOptions)
            let probed = await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<ImageInfo, VipsError>, Never>) in
                images.source.files.async {
                    continuation.resume(returning: Result { () throws(VipsError) in try decoder.info(data.input) })
                }
            }
            switch probed {
            case .success(let info): header = info
            case .failure(let error): return HTTPAnswer(ErrorStatus(error).response())
            }
        }
        let side = ImagePlaceholder.side
        let estimated =
            header
            ?? ImageInfo(width: side, height: side, format: .png, bands: 4, hasAlpha: true, orientation: 1, pages: 1)
        let ticket: MemoryAdmission.Ticket
        do throws(MemoryAdmission.Refusal) {
            ticket = try await images.admission.acquire(
                RenderMemoryEstimate(info: estimated, geometry: job.geometry, format: nil).bytes)
        } catch {
            switch error {
            case .overBudget: return HTTPAnswer(ErrorStatus.overMemoryBudget.response())
            case .cancelled: return nil
            }
        }
        defer { withExtendedLifetime(data) { ticket.release() } }
        let placeholder: ImagePlaceholder
        let info: ImageInfo
        do throws(VipsError) {
            let bitmap = try await images.source.bitmap(for: request)
            guard let source = bitmap.source?.info ?? header else {
                return HTTPAnswer(ErrorStatus(500, "internal error").response())
            }
            info = source
            placeholder = try ImagePlaceholder(bitmap)
        } catch {
            return Task.isCancelled ? nil : HTTPAnswer(ErrorStatus(error).response())
        }
        let body = Self.json(info, size: data.byteCount, placeholder: placeholder)
        guard
            let response = HTTPResponse(
                status: 200, body: Data(body.utf8),
                headers: job.headers + [
                    ("Content-Type", "application/json"), ("X-Content-Type-Options", "nosniff")
                ])
        else { return HTTPAnswer(nil) }
        images.responses.store(response, for: job.key.text, lifetime: job.isRemote ? .seconds(job.maxAge) : nil)
        images.metrics.record { $0.renders += 1 }
        return HTTPAnswer(response, note: "info")
    }

    /// The JSON object of the answer (every value a number, a boolean or a
    /// string the library made: base64, hex digits, a format name).
    static func json(_ info: ImageInfo, size: Int, placeholder: ImagePlaceholder) -> String {
        let average = placeholder.averageColour
        return "{\"width\":\(info.width),\"height\":\(info.height),\"format\":\"\(info.format.rawValue)\","
            + "\"size\":\(size),\"orientation\":\(info.orientation),\"pages\":\(info.pages),"
            + "\"alpha\":\(info.hasAlpha),\"average\":{\"R\":\(average.red),\"G\":\(average.green),"
            + "\"B\":\(average.blue),\"A\":\(average.alpha)},\"blurhash\":\"\(placeholder.blurHash)\","
            + "\"thumbhash\":\"\(placeholder.thumbHashBase64)\"}"
    }
}
