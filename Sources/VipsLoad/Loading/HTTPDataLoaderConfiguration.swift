import Foundation

extension HTTPDataLoader {
    /// How an `HTTPDataLoader` downloads and caches. Every property documents its default.
    public struct Configuration: Sendable {
        /// Downloads running at once; further loads wait for a slot. Default 6.
        public var maxConcurrentDownloads: Int
        /// Fails a download when no byte arrives for this long. Default 30 s.
        public var requestTimeout: TimeInterval
        /// Fails a download that takes longer than this in all. Default 300 s.
        public var resourceTimeout: TimeInterval
        /// The largest body accepted: a larger `Content-Length` fails before any
        /// body is read, a body growing past it fails as soon as it does. Default 256 MiB.
        public var maxBodyBytes: Int
        /// Redirects followed before failing. Default 10.
        public var maxRedirects: Int
        /// Retries for transient failures. Default `.none`.
        public var retryPolicy: HTTPRetryPolicy
        /// How entries of the data cache (the loader's `cache`, or a pipeline's
        /// `dataCache`) are used. Default `.respectExpiry`.
        public var cachePolicy: HTTPCachePolicy
        /// Honour `Cache-Control: stale-if-error` (RFC 5861): when revalidating
        /// a stale entry fails with a 5xx status or a network error (after any
        /// retries), serve the stale entry if its response allowed it and the
        /// window has not passed. Default false: a failure is reported.
        public var usesStaleIfError = false
        /// The folder for downloads that are not cached. Default
        /// `vipsload-downloads` in the system's temporary folder.
        public var temporaryDirectory: URL
        /// Header fields sent with every request. Default
        /// `Accept: image/*,*/*;q=0.8` and a `User-Agent` naming VipsLoad.
        public var headers: [String: String]
        /// Which addresses may be connected to, judged by the transport as it
        /// connects, for every request and every redirect's target (see
        /// `SourceAddressPolicy`).
        /// Default `.unrestricted`; a server fetching URLs its clients name
        /// sets `.publicOnly`.
        public var addressPolicy: SourceAddressPolicy = .unrestricted
        /// Asked about every redirect's target before it is requested: the
        /// URL the `Location` names, resolved against the URL that redirected
        /// (always absolute and http(s); a redirect to another scheme, or one
        /// past `maxRedirects`, is refused before this is asked). `false`
        /// refuses the redirect: the load fails with
        /// `VipsError.Kind.sourceNotAllowed` (its `underlying` error names the
        /// target) and nothing is sent to the target, not even a connection.
        /// Default nil: every http(s) redirect within `maxRedirects` is followed.
        ///
        /// For rules about URLs (hosts, ports, paths) that the first request
        /// had to pass too, such as a server's allow-list of sources: a
        /// redirect must not reach what a direct request could not. Which
        /// addresses a host may resolve to is `addressPolicy`'s, checked for
        /// the target as well. An `ImageRequest` may add a check of its own
        /// (`ImageRequest.allowsRedirect`); a redirect must pass both.
        ///
        /// Called on the loader's transport thread, while the redirecting
        /// response is read, so it must be quick and must not wait for the
        /// loader. For example, following redirects within one host only:
        ///
        /// ```swift
        /// var configuration = HTTPDataLoader.Configuration()
        /// configuration.allowsRedirect = { $0.host == "images.example.com" }
        /// ```
        public var allowsRedirect: (@Sendable (URL) -> Bool)? = nil

        /// A configuration; each parameter defaults as its property documents.
        public init(
            maxConcurrentDownloads: Int = 6, requestTimeout: TimeInterval = 30,
            resourceTimeout: TimeInterval = 300, maxBodyBytes: Int = 256 * 1024 * 1024,
            maxRedirects: Int = 10, retryPolicy: HTTPRetryPolicy = .none,
            cachePolicy: HTTPCachePolicy = .respectExpiry,
            temporaryDirectory: URL = FileManager.default.temporaryDirectory
                .appendingPathComponent("vipsload-downloads", isDirectory: true),
            headers: [String: String] = ["Accept": "image/*,*/*;q=0.8", "User-Agent": "VipsLoad"]
        ) {
            self.maxConcurrentDownloads = maxConcurrentDownloads
            self.requestTimeout = requestTimeout
            self.resourceTimeout = resourceTimeout
            self.maxBodyBytes = maxBodyBytes
            self.maxRedirects = maxRedirects
            self.retryPolicy = retryPolicy
            self.cachePolicy = cachePolicy
            self.temporaryDirectory = temporaryDirectory
            self.headers = headers
        }
    }
}
