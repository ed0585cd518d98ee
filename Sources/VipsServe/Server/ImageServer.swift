import Dispatch
import Foundation
import VipsCore
import VipsHTTP
import VipsLoad

/// An on-demand image server over an `ImagePipeline`: imgproxy's URL format,
/// HTTP/1.1 served by libmicrohttpd, encoded responses cached in memory and
/// on disk, identical requests made once.
///
/// ```swift
/// import VipsServe
///
/// let pipeline = ImagePipeline()
/// var configuration = ImageServer.Configuration()
/// configuration.port = 0                        // any free port
/// // Where images may come from: every other source is refused with 403. Here, files under
/// // /srv/images (`local:///photo.jpg`) and images from https://cdn.example.com.
/// configuration.urls = ProcessingURLParser(
///     sources: try SourcePolicy(
///         localRoot: "/srv/images", allowedSources: [try SourcePattern("https://cdn.example.com")]))
/// let server = try ImageServer(pipeline: pipeline, configuration: configuration)
/// print("listening on http://127.0.0.1:\(server.port)")
/// // ... on SIGTERM:
/// await server.shutdown()                       // drains, then stops
/// ```
///
/// Its network threads never wait for work: a request the caches cannot
/// answer is suspended while the pipeline loads, decodes and encodes on its
/// own threads, and resumed with the answer. A client that hangs up cancels
/// its request (and the pipeline's work, when no one else waits for it); a
/// request still unanswered after `requestTimeout` gets 504; when
/// `queueLimit` distinct images are in flight, a request for another gets
/// 429. `/health` answers 200 until `shutdown()` begins, and `/metrics`
/// answers in the Prometheus text format.
///
/// The server keeps itself running until `shutdown()` has returned: call it
/// before letting the server go.
public final class ImageServer: Sendable {
    /// The pipeline every image goes through.
    public let pipeline: ImagePipeline
    /// The configuration the server was made with.
    public let configuration: Configuration
    let router: ImageRouter
    let http: HTTPServer
    private let shutdownState = LockedState<Task<Void, Never>?>(nil)

    /// Starts serving; it is listening when this returns, and has told
    /// `configuration.log` so (`listening on http://ADDRESS:PORT`, the port
    /// the kernel chose for port 0, an IPv6 address in brackets).
    ///
    /// - Throws: `.invalidArgument` for an `address` that is not an IP
    ///   literal; `.io` when it cannot listen (the port is in use, say).
    public init(pipeline: ImagePipeline, configuration: Configuration = Configuration()) throws(VipsError) {
        self.pipeline = pipeline
        self.configuration = configuration
        let router = ImageRouter(pipeline: pipeline, configuration: configuration)
        self.router = router
        let http: HTTPServer
        do throws(HTTPServerError) {
            http = try Self.listen(configuration, router)
        } catch {
            throw VipsError(error.kind == .invalidAddress ? .invalidArgument : .io, error.message)
        }
        self.http = http
        router.attach(http)
        let host = configuration.address.contains(":") ? "[\(configuration.address)]" : configuration.address
        configuration.log?.event("listening on http://\(host):\(http.port)")
    }

    /// The HTTP layer for `configuration`, listening.
    private static func listen(
        _ configuration: Configuration, _ router: ImageRouter
    ) throws(HTTPServerError)
        -> HTTPServer
    {
        try HTTPServer(
            configuration: HTTPServer.Configuration(
                address: configuration.address, port: configuration.port,
                maxConnections: configuration.maxConnections, maxConnectionsPerIP: configuration.maxConnectionsPerIP,
                connectionTimeoutSeconds: Self.wholeSeconds(configuration.connectionTimeout),
                connectionMemoryBytes: configuration.maxHeaderBytes, threads: max(1, configuration.networkThreads),
                listenBacklog: max(128, configuration.maxConnections),
                headerTimeout: configuration.headerTimeout > .zero ? configuration.headerTimeout : nil),
            handler: router)
    }

    /// `duration` in whole seconds for libmicrohttpd, rounded up (a timeout
    /// under a second is one second, not none); 0 or less is 0 (no timeout).
    static func wholeSeconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        guard seconds > 0 || attoseconds > 0 else { return 0 }
        return Int(clamping: seconds) + (attoseconds > 0 ? 1 : 0)
    }

    /// The port the server listens on (the one the kernel chose for port 0).
    public var port: UInt16 { http.port }

    /// Whether `shutdown()` has begun: new requests get 503, `/health` too.
    public var isDraining: Bool { router.isDraining }

    /// Everything `/metrics` answers, in the Prometheus text exposition format.
    public var metricsText: String { router.metricsText }

    /// Stops the server gracefully: it stops accepting connections, answers
    /// new requests on open ones with 503 (and `/health` with 503), lets the
    /// requests in flight finish for up to `drainTimeout`, answers what is
    /// left with 503, then closes every connection. Calling it again waits
    /// for the same shutdown.
    public func shutdown() async {
        let task = shutdownState.withLock { state -> Task<Void, Never> in
            if let running = state { return running }
            let started = Task { [router, http, configuration] in
                await Self.drain(router: router, http: http, configuration: configuration)
            }
            state = started
            return started
        }
        await task.value
    }

    private static func drain(router: ImageRouter, http: HTTPServer, configuration: Configuration) async {
        router.beginDraining()
        http.quiesce()
        let inFlight = http.activeRequests
        configuration.log?.event("draining: \(inFlight) request\(inFlight == 1 ? "" : "s") in flight")
        if await !http.waitUntilIdle(timeout: configuration.drainTimeout) {
            configuration.log?.event(
                "drain timeout: \(http.activeRequests) request(s) still in flight get 503")
            router.images.abandonRenders()
            http.answerSuspended { ErrorStatus.draining.response(closesConnection: true) }
            // The 503s are being sent; a client that reads nothing cannot hold the exit.
            _ = await http.waitUntilIdle(timeout: .seconds(1))
        }
        await router.images.processed?.flush()
        http.stop()
        configuration.log?.event("stopped")
    }
}
