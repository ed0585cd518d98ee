import Foundation
import Synchronization
import VipsCore
import VipsHTTP
import VipsLoad

/// What the HTTP layer calls: the checks every request passes (length,
/// method, draining), the routes (`/health`, `/metrics`, images), and the
/// completion of every request, for the metrics and the access log.
///
/// Everything here runs on the network thread and answers at once; image
/// URLs go to the `ImageEndpoint`, which defers what needs work.
final class ImageRouter: HTTPHandler {
    let configuration: ImageServer.Configuration
    let metrics = ServerMetrics()
    let images: ImageEndpoint
    /// `/info/…`: a source's metadata as JSON.
    let info: InfoEndpoint
    private let draining = Atomic<Bool>(false)
    /// The HTTP layer's request and connection counts, for `/metrics` (set once it runs).
    private let httpGauges = LockedState<(@Sendable () -> HTTPGauges)?>(nil)

    /// What the HTTP layer reports for `/metrics`.
    private typealias HTTPGauges = (requests: Int, connections: Int, closed: ConnectionDeadlines.Counts)

    /// Answers made once and sent again and again.
    private struct Fixed: Sendable {
        let health = HTTPResponse.text(200, "ok")
        let methodNotAllowed = ErrorStatus.methodNotAllowed.response(headers: [("Allow", "GET, HEAD")])
        let uriTooLong = ErrorStatus.uriTooLong.response()
        let draining = ErrorStatus.draining.response(headers: [("Retry-After", "1")], closesConnection: true)
    }

    private let fixed = Fixed()

    init(pipeline: ImagePipeline, configuration: ImageServer.Configuration) {
        self.configuration = configuration
        images = ImageEndpoint(pipeline: pipeline, configuration: configuration, metrics: metrics)
        info = InfoEndpoint(images: images)
    }

    /// Connects the HTTP layer's counts to `/metrics`.
    func attach(_ http: HTTPServer) {
        httpGauges.withLock {
            $0 = { [weak http] in
                (http?.activeRequests ?? 0, http?.openConnections ?? 0, http?.deadlines.counts ?? .init())
            }
        }
    }

    /// Whether new requests get 503 (the server is draining).
    var isDraining: Bool { draining.load(ordering: .relaxed) }

    /// From now on new requests get 503 and `/health` fails.
    func beginDraining() {
        draining.store(true, ordering: .relaxed)
    }

    // MARK: - HTTPHandler (the network thread)

    func handle(_ request: borrowing HTTPRequest) -> HTTPHandling {
        guard request.target.utf8.count <= configuration.maxURLLength else {
            return .respond(fixed.uriTooLong, note: nil)
        }
        if request.method == "OPTIONS", let origin = configuration.allowOrigin {
            // CORS preflight, as imgproxy answers it with IMGPROXY_ALLOW_ORIGIN.
            return .respond(HTTPResponse(status: 200, headers: RenderJob.corsHeaders(origin)), note: nil)
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            return .respond(fixed.methodNotAllowed, note: nil)
        }
        if isDraining { return .respond(fixed.draining, note: nil) }
        // With a path prefix, /health and /metrics are also under it (as imgproxy's routes are).
        var path = request.path
        let prefix = configuration.urls.pathPrefix
        if !prefix.isEmpty, path.hasPrefix(prefix) { path = path.dropFirst(prefix.count) }
        switch path {
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
        case let path where path.hasPrefix(InfoEndpoint.prefix):
            return info.handle(request)
        default:
            return images.handle(request)
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
        let http = httpGauges.withLock { $0 }?() ?? (requests: 0, connections: 0, closed: .init())
        return metrics.exposition(
            pipeline: images.pipeline.metrics, inFlight: images.pipeline.inFlight,
            gauges: ServerMetrics.Gauges(
                queueDepth: images.renders.count, queueLimit: images.renders.limit, activeRequests: http.requests,
                openConnections: http.connections, responseCacheBytes: images.responses.totalBytes,
                responseCacheEntries: images.responses.count, draining: isDraining, closedConnections: http.closed,
                cacheWriteFailures: images.processed?.writeFailures ?? 0, admission: images.admission.snapshot))
    }
}
