import Foundation
import VipsCore
import VipsLoad

extension ImageServer {
    /// How an `ImageServer` listens, limits, caches and reports. Every
    /// property documents its default; the pipeline's own settings (decode
    /// concurrency, decode limits, decode time limit, download limits) are
    /// the `ImagePipeline`'s configuration.
    public struct Configuration: Sendable {
        /// The address to listen on, an IPv4 or IPv6 literal. Default
        /// "127.0.0.1" (this machine only; "0.0.0.0" or "::" for every interface).
        public var address = "127.0.0.1"
        /// The port; 0 lets the kernel choose a free one (read it back from
        /// `ImageServer.port`). Default 8080.
        public var port: UInt16 = 8080
        /// Open connections at most; more are refused. Default 1024.
        public var maxConnections = 1024
        /// Open connections from one client address at most; 0 for no limit.
        /// Default 128 (raise it behind a load balancer or CDN, whose
        /// connections all come from a few addresses).
        public var maxConnectionsPerIP = 128
        /// An idle connection (keep-alive between requests, or a client that
        /// stops sending its request) is closed after this long. Default 30 s.
        public var connectionTimeout: Duration = .seconds(30)
        /// A request's header section must be complete within this long,
        /// however slowly its bytes come (nginx's `client_header_timeout`):
        /// from the accept for a new connection's first request, and from
        /// the end of the previous response plus `connectionTimeout` on a
        /// kept-alive one (whose wait for the first byte is the idle
        /// timer's). Past it the connection is closed without an answer
        /// (logged as 408). Zero for no deadline. Default 10 s.
        ///
        /// Besides, when a network thread's open connections pass 90 % of
        /// its share of `maxConnections`, each new one closes the connection
        /// that has waited longest for a request's header, so slow clients
        /// cannot hold every slot until their deadlines pass.
        public var headerTimeout: Duration = .seconds(10)
        /// A request's answer must be ready within this long (loading,
        /// decoding, encoding), else 504. Default 10 s.
        public var requestTimeout: Duration = .seconds(10)
        /// The longest request target in bytes; longer ones get 414. Default 8192.
        public var maxURLLength = 8192
        /// Memory per connection, which bounds the request line and header
        /// fields (libmicrohttpd answers 431 beyond it). Default 32 KiB.
        public var maxHeaderBytes = 32 * 1024
        /// After `shutdown()` begins, requests in flight get this long to
        /// finish; whatever is left then gets 503. Default 10 s.
        public var drainTimeout: Duration = .seconds(10)
        /// Distinct images being made (decoding, or waiting to) at most;
        /// a request for another one then gets 429 with `Retry-After`.
        /// Identical requests share one image and do not count twice.
        /// Default 4 × the usable CPUs (`SystemResources.current.usableCPUs`).
        public var queueLimit = 4 * SystemResources.current.usableCPUs
        /// `Cache-Control: public, max-age=N` of image responses, in seconds:
        /// `maxAge` for all when set, else `signedMaxAge` for signed URLs and
        /// `unsignedMaxAge` for the rest. Defaults nil, one year, one hour.
        public var maxAge: Int?
        /// See `maxAge`. Default 31,536,000 (one year).
        public var signedMaxAge = 31_536_000
        /// See `maxAge`. Default 3,600 (one hour).
        public var unsignedMaxAge = 3_600
        /// Body bytes of encoded responses kept in memory (least recently
        /// used evicted; a response over a tenth of it is not kept); 0 for
        /// none. Default a tenth of the memory limit, at most 256 MiB.
        public var responseCacheBytes = min(SystemResources.current.memoryLimit / 10, 256 << 20)
        /// Bytes the renders running at once may hold together, as estimated
        /// from each source's header before it is decoded (the decoded and
        /// resized bitmaps and the encoder's working memory). A render that
        /// does not fit waits in line (first come, first served) until enough
        /// is released, or its `requestTimeout` runs out (504); one that needs
        /// more than the whole budget gets 422 at once. nil for the default:
        /// half of what the memory limit (`SystemResources.current.memoryLimit`,
        /// the container's where there is one) leaves after the response cache
        /// and the pipeline's memory cache (`defaultMemoryBudget`).
        public var memoryBudget: Int?
        /// Where encoded responses are kept between runs (so a restarted
        /// server makes nothing it made before); nil for none. Default nil.
        /// (Named as `ImagePipeline.Configuration.dataCache`, the pipeline's
        /// cache of encoded originals: both keep encoded bytes, not bitmaps.)
        public var dataCache: DiskCache?
        /// The former name of `dataCache`.
        @available(*, deprecated, renamed: "dataCache")
        public var diskCache: DiskCache? {
            get { dataCache }
            set { dataCache = newValue }
        }
        /// Threads of libmicrohttpd serving connections (each with its own
        /// epoll set). Default 1: it only parses requests and sends
        /// responses, which one thread does at well over 10,000 a second.
        public var networkThreads = 1
        /// Where decodes of untrusted formats go instead of the pipeline
        /// (worker processes, say), and which formats those are; nil decodes
        /// everything in the pipeline. Default nil.
        public var isolation: (any IsolatedDecoding)?
        /// How image URLs are read: imgproxy's processing-URL grammar, the
        /// keys their signatures are checked with, and where sources may come
        /// from. Default: no keys (any signature segment is accepted, as
        /// imgproxy does without a key) and `SourcePolicy.none` (every image
        /// URL is refused with 404 until a local root or source patterns are set).
        /// Its `watermark` is the image imgproxy's `wm` option draws (a
        /// `WatermarkImage`, decoded before the server starts); default none.
        public var urls = ProcessingURLParser(sources: .none)
        /// imgproxy's `IMGPROXY_ALLOW_ORIGIN`: the `Access-Control-Allow-Origin`
        /// (with `Access-Control-Allow-Methods: GET, OPTIONS`) of every image
        /// response, and `OPTIONS` requests answered 200 with them; nil for
        /// no CORS header (and `OPTIONS` gets 405). Default nil.
        public var allowOrigin: String?
        /// Where the access log and the server's events go; nil for nowhere. Default nil.
        public var log: (any ImageServerLogging)?
        /// Whether a client's `If-None-Match` that does not name this
        /// server's own `ETag` is forwarded to an `http(s)` origin, whose
        /// `304` is then answered with a `304` (imgproxy's
        /// `IMGPROXY_USE_ETAG`). Default true.
        public var forwardsEntityTagConditions = true
        /// Whether answers carry `Last-Modified` (the origin's, or a local
        /// file's modification time) and a client's `If-Modified-Since` is
        /// honoured: against a local file's time, or forwarded to an
        /// `http(s)` origin (imgproxy's `IMGPROXY_USE_LAST_MODIFIED`). Default true.
        public var usesLastModified = true
        /// How results are encoded where the URL leaves it open (qualities,
        /// preferred formats, `Accept` and client hints). Default imgproxy's.
        public var output = OutputSettings()

        /// The defaults, as each property documents.
        public init() {}

        /// Half of what `memoryLimit` leaves after `responseCacheBytes` and
        /// `memoryCacheBytes` (the pipeline's decoded bitmaps), at least 64 MiB.
        public static func defaultMemoryBudget(
            memoryLimit: Int = SystemResources.current.memoryLimit, responseCacheBytes: Int, memoryCacheBytes: Int
        ) -> Int {
            max(64 << 20, (memoryLimit - max(0, responseCacheBytes) - max(0, memoryCacheBytes)) / 2)
        }
    }
}
