/// Counters of one `HTTPDataLoader` since it was created.
public struct HTTPLoaderMetrics: Sendable, Hashable {
    /// HTTP requests sent: first attempts, retries and conditional requests.
    public var httpRequests = 0
    /// 2xx bodies received completely.
    public var downloads = 0
    /// Loads served from the disk cache without any request.
    public var diskHits = 0
    /// Stale entries revalidated by a `304 Not Modified` and served from disk.
    public var revalidations = 0
    /// Body bytes received in completed downloads.
    public var bytesDownloaded = 0
    /// Attempts repeated after a transient failure.
    public var retries = 0
    /// Loads that joined a load of the same URL already in flight.
    public var coalescedLoads = 0
    /// Stale entries served because revalidating them failed (`usesStaleIfError`).
    public var staleServedOnError = 0
    /// Loads that ended in an error (each shared load counted once).
    public var failures = 0
    /// Requests that asked for the rest of a body cut short earlier
    /// (`Range` with `If-Range`, from a kept partial body).
    public var resumedRequests = 0

    /// All counters at zero.
    public init() {}
}
