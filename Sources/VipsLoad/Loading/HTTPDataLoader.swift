import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Loads `http(s)` URLs: streams each body to a file (a disk-cache entry, or
/// a temporary file when caching is off) so the decoder reads it from disk
/// and a large image never sits whole in memory.
///
/// - One `HTTPTransport` (libcurl's multi interface on a thread of its own,
///   each body written to its file as it arrives), at most
///   `maxConcurrentDownloads` at once, an idle and a whole-transfer timeout,
///   bounded redirects, each target vetted by `Configuration.allowsRedirect`
///   when set.
/// - Concurrent loads of one URL share one download and one `ImageData`;
///   cancelling the last caller cancels the network task.
/// - Only a complete, non-empty 2xx body whose first bytes are an image format
///   is returned or cached; everything else is a typed `VipsError` (status,
///   reason), and nothing of a failed download is kept.
/// - With a data cache (`cache`, a `DiskCache` or any `ImageDataCaching`):
///   bodies stream into it, fresh entries are served without a request, stale
///   ones are revalidated (`If-None-Match` / `If-Modified-Since`) and reused on
///   `304`, following `Cache-Control`, `Expires` and `no-store`. (In an
///   `ImagePipeline` the pipeline's `dataCache` plays this part.)
/// - A cache the file system refuses (disk full, read-only, folder deleted)
///   costs the caching, not the image: the body moves to a temporary file and
///   is delivered uncached, without a second download.
public final class HTTPDataLoader: ImageDataLoading {
    /// The timeouts, limits, retries and cache policy the loader was made with.
    public let configuration: Configuration
    /// Where `loadData(for:)` looks first and stores what it downloads; nil
    /// downloads to temporary files deleted when their `ImageData` is released.
    public let cache: (any ImageDataCaching)?
    private let transport = HTTPTransport()
    /// Nil in a pipeline's default loader: the pipeline's loading lane is the one limiter.
    private let limiter: HTTPDownloadLimiter?
    private let coalescer = SharedLoads()
    private let counters = LockedState(HTTPLoaderMetrics())

    /// A loader with its own transport, storing downloads in `cache` (default
    /// none); at most `maxConcurrentDownloads` downloads run at once.
    public convenience init(configuration: Configuration = Configuration(), cache: (any ImageDataCaching)? = nil) {
        self.init(configuration: configuration, cache: cache, limitsDownloads: true)
    }

    /// With `limitsDownloads` false the caller bounds concurrent loads itself
    /// (an `ImagePipeline`'s loading lane, in priority order).
    init(configuration: Configuration, cache: (any ImageDataCaching)?, limitsDownloads: Bool) {
        self.configuration = configuration
        self.cache = cache
        limiter = limitsDownloads ? HTTPDownloadLimiter(slots: configuration.maxConcurrentDownloads) : nil
    }

    /// This loader's counters.
    public var metrics: HTTPLoaderMetrics { counters.withLock { $0 } }

    /// Downloads waiting for one of the `maxConcurrentDownloads` slots (for tests).
    var waitingDownloads: Int { limiter?.waitingCount ?? 0 }

    /// The loader's counters, for `ImagePipeline.Metrics`.
    public var networkMetrics: HTTPLoaderMetrics? { metrics }

    /// Loads an `http(s)` URL source; other sources are an `unsupportedSource` error.
    public func loadData(for source: ImageSource) async throws(VipsError) -> ImageData {
        let url = try Self.httpURL(of: source)
        // Credentials never reach the cache's files: the stored key holds their digest.
        let key = URLRedaction.storageKey(source.key)
        do {
            return try await coalescer.load(key, joined: { [self] in counters.withLock { $0.coalescedLoads += 1 } }) {
                [self] in
                var stale: CachedImageData?
                switch configuration.cachePolicy.use(of: cache?.cachedData(for: key), canRevalidate: true) {
                case .serve(let data):
                    counters.withLock { $0.diskHits += 1 }
                    return data
                case .revalidate(let hit): stale = hit
                case .load: break
                }
                return try await fetch(url, key: key, cache: cache, revalidating: stale).data(for: url)
            }
        } catch {
            throw VipsError.from(error, source: source)
        }
    }

    /// The download step of an `ImagePipeline`, which coalesces loads and has
    /// already looked in `cache` itself: the network only (with retries),
    /// revalidating `stale` when given, streaming the body into `cache` under
    /// `key`. `headers` are merged over the configuration's; `modifier`, when
    /// given, is called once for the download (every retry sends what it
    /// returned); `allowsRedirect` is asked about every redirect after the
    /// configuration's own check; `progress` hears of the body's bytes as they arrive.
    func download(
        _ source: ImageSource, key: String, headers: [String: String] = [:],
        modifier: RequestModification.Modifier? = nil, allowsRedirect: (@Sendable (URL) -> Bool)? = nil,
        progress: HTTPTransfer.Progress? = nil, cache: (any ImageDataCaching)?, revalidating stale: CachedImageData?
    ) async throws(VipsError) -> ImageData {
        let url = try Self.httpURL(of: source)
        do {
            return try await fetch(
                url, key: key, headers: headers, modifier: modifier, progress: progress,
                allowsRedirect: allowsRedirect, cache: cache, revalidating: stale
            ).data(for: url)
        } catch {
            throw VipsError.from(error, source: source)
        }
    }

    /// A conditional download for `ImagePipeline.data(for:conditions:)`:
    /// `conditions` are sent with the request, and the origin's `304` is
    /// the `.notModified` outcome, not an error. A `200` body is streamed
    /// into `cache` as any download's (nothing of a `304` is stored).
    func conditionalDownload(
        _ source: ImageSource, key: String, conditions: HTTPConditions, headers: [String: String] = [:],
        modifier: RequestModification.Modifier? = nil, allowsRedirect: (@Sendable (URL) -> Bool)? = nil,
        cache: (any ImageDataCaching)?
    ) async throws(VipsError) -> ConditionalLoad {
        let url = try Self.httpURL(of: source)
        var fields = headers
        if let value = conditions.ifNoneMatch { fields["If-None-Match"] = value }
        if let value = conditions.ifModifiedSince { fields["If-Modified-Since"] = value }
        do {
            switch try await fetch(
                url, key: key, headers: fields, modifier: modifier, allowsRedirect: allowsRedirect, cache: cache,
                revalidating: nil)
            {
            case .data(let data): return .loaded(data)
            case .notModified(let validators): return .notModified(validators)
            }
        } catch {
            throw VipsError.from(error, source: source)
        }
    }

    /// What one request brought: the bytes, or a `304` to the caller's own conditions.
    private enum Fetched {
        case data(ImageData)
        case notModified(HTTPValidators)

        /// The bytes; a `304` nobody asked for is the origin's error.
        func data(for url: URL) throws(VipsError) -> ImageData {
            switch self {
            case .data(let data): return data
            case .notModified:
                throw VipsError(
                    .httpStatus, "HTTP 304 for \(URLRedaction.redacted(url)) without a stored entry", httpStatus: 304)
            }
        }
    }

    /// Whether `stale-if-error` covers the failure: a 5xx status or a
    /// network failure (RFC 5861 §4), not a 4xx or a refused body.
    private static func allowsStale(after failure: HTTPTransfer.Failure) -> Bool {
        switch failure.error.kind {
        case .httpStatus: return (failure.error.httpStatus ?? 0) >= 500
        case .network, .timedOut, .incompleteBody: return true
        default: return false
        }
    }

    private static func httpURL(of source: ImageSource) throws(VipsError) -> URL {
        guard case .url(let url) = source.location, let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else {
            throw VipsError(.unsupportedSource, "HTTPDataLoader loads only http(s) URLs", source: source.description)
        }
        return url
    }

    // MARK: - Steps

    /// The network, with retries; failures are counted once per load.
    private func fetch(
        _ url: URL, key: String, headers: [String: String] = [:], modifier: RequestModification.Modifier? = nil,
        progress: HTTPTransfer.Progress? = nil, allowsRedirect: (@Sendable (URL) -> Bool)? = nil,
        cache: (any ImageDataCaching)?, revalidating stale: CachedImageData?
    ) async throws -> Fetched {
        var request = URLRequest(
            url: url, cachePolicy: .reloadIgnoringLocalCacheData,
            timeoutInterval: configuration.requestTimeout)
        for (name, value) in configuration.headers { request.setValue(value, forHTTPHeaderField: name) }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        if let modifier {
            do throws(VipsError) {
                request = try await RequestModification.apply(
                    modifier, to: request, timeout: configuration.requestTimeout,
                    label: URLRedaction.redacted(url))
            } catch {
                if error.kind != .cancelled { counters.withLock { $0.failures += 1 } }
                throw error
            }
        }
        var retries = 0
        while true {
            do {
                return try await attempt(
                    request, key: key, progress: progress, allowsRedirect: allowsRedirect, cache: cache,
                    revalidating: stale)
            } catch let failure as HTTPTransfer.Failure where failure.startsOver {
                // A 416 to a resumed request: the kept partial is gone; the body is asked for whole.
                continue
            } catch let failure as HTTPTransfer.Failure {
                guard failure.isTransient,
                    let delay = configuration.retryPolicy.delay(
                        beforeRetry: retries + 1, retryAfter: failure.retryAfter)
                else {
                    if let stale, Self.allowsStale(after: failure), configuration.usesStaleIfError,
                        stale.http?.mayServeStaleOnError() == true
                    {
                        counters.withLock { $0.staleServedOnError += 1 }
                        return .data(ImageData.with(HTTPValidators(stale.http), stale.data))
                    }
                    counters.withLock { $0.failures += 1 }
                    throw failure.error
                }
                retries += 1
                counters.withLock { $0.retries += 1 }
                try await Task.sleep(nanoseconds: UInt64(delay * 1e9))
            } catch let error as VipsError {
                counters.withLock { $0.failures += 1 }
                throw error
            }
        }
    }

    /// One request: a conditional one when `stale` is given, or when the
    /// caller's own fields hold conditions (then a `304` is `.notModified`).
    private func attempt(
        _ base: URLRequest, key: String, progress: HTTPTransfer.Progress?, allowsRedirect: (@Sendable (URL) -> Bool)?,
        cache: (any ImageDataCaching)?, revalidating stale: CachedImageData?
    ) async throws -> Fetched {
        try await limiter?.acquire()
        defer { limiter?.release() }
        var request = base
        let url = base.url ?? URL(fileURLWithPath: "/")
        let callerConditions =
            base.value(forHTTPHeaderField: "If-None-Match") != nil
            || base.value(forHTTPHeaderField: "If-Modified-Since") != nil
        if let http = stale?.http {
            if let etag = http.etag { request.setValue(etag, forHTTPHeaderField: "If-None-Match") }
            if let lastModified = http.lastModified {
                request.setValue(lastModified, forHTTPHeaderField: "If-Modified-Since")
            }
        }
        let limits = HTTPTransfer.Limits(
            maxBodyBytes: configuration.maxBodyBytes, maxRedirects: configuration.maxRedirects,
            requestTimeout: configuration.requestTimeout,
            resourceTimeout: configuration.resourceTimeout, addressPolicy: configuration.addressPolicy,
            redirectChecks: [configuration.allowsRedirect, allowsRedirect].compactMap { $0 })
        let directory = configuration.temporaryDirectory.path
        // A body cut short is kept where the next attempt finds it: a disk
        // cache's temporary area (for later processes too), else this process's download folder.
        let store =
            (cache as? DiskCache).map(PartialDownloads.inDiskCache) ?? PartialDownloads.inProcessFolder(of: directory)
        // A revalidation asks about the stored entry, never for a range of a newer body.
        let partial = stale == nil && !callerConditions ? store?.partial(for: key) : nil
        if let partial {
            request.setValue("bytes=\(partial.record.byteCount)-", forHTTPHeaderField: "Range")
            request.setValue(partial.record.ifRange, forHTTPHeaderField: "If-Range")
            counters.withLock { $0.resumedRequests += 1 }
        }
        let transfer = HTTPTransfer(
            request: request, conditional: stale != nil || callerConditions, limits: limits, progress: progress,
            resumption: store.map { HTTPTransfer.Resumption(store: $0, key: key, partial: partial) },
            makeSink: { response, receivedAt throws(VipsError) in
                try Self.makeSink(
                    response, receivedAt: receivedAt, cache: cache, key: key, temporaryDirectory: directory)
            })
        counters.withLock { $0.httpRequests += 1 }
        let outcome: HTTPTransfer.Outcome
        do {
            outcome = try await transfer.run(in: transport)
        } catch let failure as HTTPTransfer.Failure where failure.sentNothing {
            // The address policy refused the connection: no request went out.
            counters.withLock { $0.httpRequests -= 1 }
            throw failure
        }

        switch outcome {
        case .notModified(let response, let receivedAt):
            if stale == nil, callerConditions {
                return .notModified(HTTPValidators(header: { response.value(forHTTPHeaderField: $0) }))
            }
            guard let stale, let cache, let stored = stale.http else {
                throw HTTPTransfer.Failure(
                    error: VipsError(
                        .httpStatus, "HTTP 304 for \(URLRedaction.redacted(url)) without a stored entry",
                        httpStatus: 304),
                    isTransient: false)
            }
            let updated = stored.updated(
                byNotModified: { response.value(forHTTPHeaderField: $0) }, receivedAt: receivedAt)
            if let updated {
                cache.updateHTTPMetadata(updated, of: stale)
            } else {
                cache.removeData(for: key)
            }
            counters.withLock { $0.revalidations += 1 }
            return .data(ImageData.with(HTTPValidators(updated ?? stored), stale.data))

        case .body(let response, let file, let sink):
            let byteCount = file.byteCount
            counters.withLock {
                $0.downloads += 1
                $0.bytesDownloaded += byteCount
            }
            // Checked before anything is kept: an error page served as image/jpeg is never cached.
            let leading = file.leadingBytes
            guard ImageFormat.sniff(leading) != nil else {
                file.discard()
                let type = response.value(forHTTPHeaderField: "Content-Type") ?? "no Content-Type"
                throw HTTPTransfer.Failure(
                    error: VipsError(
                        .unsupportedFormat, "(\(type)) is not an image: it starts with \(Self.describe(leading))",
                        source: URLRedaction.redacted(url)),
                    isTransient: false)
            }
            let validators = HTTPValidators(header: { response.value(forHTTPHeaderField: $0) })
            if let entry = sink.cacheEntry, byteCount <= cache?.maxEntryByteCount ?? .max {
                switch try entry.writer.commitKeepingBytes(http: entry.http) {
                case .stored(let data): return .data(ImageData.with(validators, data))
                // A cache the file system refuses costs the caching, not the image.
                case .uncached(let data, _): return .data(ImageData.with(validators, data))
                }
            }
            let summary = try file.finish()
            return .data(
                ImageData(
                    input: .file(file.path), byteCount: summary.byteCount, leadingBytes: summary.prefix,
                    removingFileOnRelease: true, validators: validators.isEmpty ? nil : validators))
        }
    }

    /// Chooses where a 2xx body goes: a new entry of the data cache when it
    /// may be stored there, a temporary file otherwise (also when the cache's folder
    /// refuses new files, or refuses more bytes while the body streams).
    private static func makeSink(
        _ response: HTTPResponseHead, receivedAt: Date, cache: (any ImageDataCaching)?, key: String,
        temporaryDirectory directory: String
    ) throws(VipsError) -> HTTPTransfer.Sink {
        if let cache,
            let metadata = HTTPCacheMetadata(
                header: { response.value(forHTTPHeaderField: $0) }, receivedAt: receivedAt),
            response.expectedContentLength <= Int64(cache.maxEntryByteCount ?? .max),
            let writer = try? cache.makeWriter(for: key)
        {
            return HTTPTransfer.Sink(
                file: writer.file, cacheEntry: (writer, metadata),
                fallback: { () throws(VipsError) in
                    writer.noteRefused()
                    return try Self.makeTemporaryDownload(in: directory)
                })
        }
        return HTTPTransfer.Sink(file: try Self.makeTemporaryDownload(in: directory), cacheEntry: nil)
    }

    /// A new file for an uncached download, in this process's private folder
    /// in `directory` (see `TemporaryDownloads`).
    private static func makeTemporaryDownload(in directory: String) throws(VipsError) -> StreamingFileWriter {
        try StreamingFileWriter(directory: TemporaryDownloads.folder(in: directory), namePrefix: "download-")
    }

    /// The first bytes as text when printable, else in hex, for error messages.
    private static func describe(_ bytes: [UInt8]) -> String {
        let head = bytes.prefix(16)
        if head.allSatisfy({ (0x20..<0x7F).contains($0) || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            return "\""
                + String(decoding: head, as: UTF8.self)
                .replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\r", with: "") + "\""
        }
        return head.map { String(format: "%02x", $0) }.joined(separator: " ")
    }
}
