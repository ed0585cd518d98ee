import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension ImagePipeline {
    /// How a pipeline loads, decodes and caches. Every property documents its default.
    public struct Configuration: Sendable {
        /// Decodes (and in-memory downscales) running at once, each on a
        /// dedicated thread. Default: the CPUs this process can use
        /// (`SystemResources.current.usableCPUs`: its affinity, capped by a
        /// cgroup CPU quota), not the host's core count.
        public var decodeConcurrency: Int
        /// Data loads from the network (calls to the data loader for remote
        /// sources, or to a custom loader for any source) running at once,
        /// highest priority first. Default 6 (what a browser opens per host).
        /// With the default loader the pipeline's downloads are also bounded by
        /// `http.maxConcurrentDownloads`: the lane runs the smaller number.
        /// Local files and data-cache hits never take these slots (they are
        /// read on the pipeline's I/O lane).
        public var dataLoadingConcurrency: Int
        /// The step that turns a source into encoded bytes. Default
        /// `DataLoader()`: the pipeline reads files, in-memory data and
        /// `file://` URLs itself (on its I/O lane) and downloads `http(s)://`
        /// URLs with an `HTTPDataLoader` made from `http`, streaming them into
        /// the `dataCache`. A `DataLoader` with a `remoteLoader` hands remote
        /// sources to it instead; any other loader replaces the default for
        /// every source (`http` is then unused). The `dataCache` applies to
        /// every loader's remote sources.
        public var dataLoader: any ImageDataLoading
        /// Decoded bitmaps kept in memory; nil for none. Default: a
        /// `MemoryCache()` of its own for each pipeline (20% of the memory
        /// limit, at most 512 MiB: `MemoryCache.defaultCostLimit`).
        ///
        /// The default is made anew for every pipeline made from the
        /// configuration, with the limits this value has then, so two
        /// pipelines made from one `Configuration` value never answer from
        /// each other's memory (each one's `configuration.memoryCache` and
        /// `ImagePipeline.memoryCache` is its own). A cache you set is used as
        /// it is: set one instance on several configurations to share it.
        public var memoryCache: MemoryCache?
        /// How the default data loader downloads `http(s)` URLs: timeouts,
        /// concurrent downloads, largest body, retries, and how the
        /// `dataCache`'s entries are used (`cachePolicy`: `.ignoreExpiry`
        /// serves stored images however old). Default
        /// `HTTPDataLoader.Configuration()`: 30 s idle and 300 s total timeout,
        /// 6 downloads at once, 256 MiB bodies, no retries, HTTP expiry respected.
        public var http: HTTPDataLoader.Configuration
        /// Encoded images kept between loads and processes, consulted by the
        /// pipeline (on its I/O lane) after the memory cache and before any data
        /// loader, for every remote source. Default nil.
        ///
        /// The one place a pipeline's data cache is configured. A fresh entry
        /// is served without a request; a stale one is revalidated by the
        /// default HTTP loader (`If-None-Match` / `If-Modified-Since`, `304`),
        /// which streams new bodies straight into the cache. With another
        /// loader the pipeline stores what the loader returns. What is stored
        /// (originals, processed images) is `dataCachePolicy`'s choice. Off by
        /// default, as in Nuke, whose default pipeline
        /// has no data cache either: a library should not write to a user's
        /// home folder unasked (servers, CLIs and containers often have none,
        /// or a read-only one). `Configuration.withDiskCache()` turns it on at
        /// the conventional per-user place, `DiskCache.defaultDirectory`.
        public var dataCache: (any ImageDataCaching)?
        /// How images are decoded: limits, strictness, allowed formats. Default `DecodeOptions()`.
        public var decodeOptions: DecodeOptions
        /// Serve a smaller request by downscaling a larger bitmap of the same
        /// source already in the memory cache instead of decoding again.
        /// Default true.
        public var resizesFromLargerCachedImages: Bool
        /// Stop a decode, a downscale or a request's processors part-way when
        /// every request waiting for it has gone (cancelled, or timed out by
        /// its owner). Default false: such work runs to its end, so its bitmap
        /// still reaches the memory cache for the next request.
        ///
        /// A server that answers each request within a deadline sets it, so a
        /// deadline stops the work it times instead of leaving it running: the
        /// work is stopped cooperatively (`DecodeCancellation`), at the next
        /// strip or row libvips or the direct codec computes, and its unit
        /// leaves the pipeline at once, so a later request for the same image
        /// starts afresh rather than joining work that is stopping. A codec
        /// call that cannot be interrupted runs to its end and its result is
        /// dropped, as at `decodeTimeLimit`.
        public var stopsAbandonedWork = false
        /// Watch the kernel's memory pressure and call `handleMemoryPressure`
        /// on it (a warning halves the memory cache, critical empties it).
        /// Default: true where the kernel publishes memory pressure
        /// (`SystemResources.current.memoryPressureFile`, PSI), else false.
        /// The pipeline then owns one idle thread, blocked in `poll()` on
        /// PSI triggers, or sampling usage against the memory limit once a
        /// second where triggers are refused; it ends with the pipeline. No
        /// monitor runs for a pipeline without a memory cache.
        public var monitorsMemoryPressure: Bool = SystemResources.current.memoryPressureFile != nil
        /// What the data cache keeps: originals, encoded processed images,
        /// both, or the one each request needs. Default `.storeOriginalData`.
        /// Without a `dataCache` nothing is stored.
        public var dataCachePolicy: DataCachePolicy = .storeOriginalData
        /// The format processed images are stored in (see `DataCachePolicy`).
        /// Default lossless PNG: a rerun serves the very pixels the first run made.
        public var processedImageFormat: OutputFormat = .png(compression: 6)
        /// Called once for each download of the default HTTP loader (not for
        /// each retry, and once for requests that share a download), with the
        /// request as it would be sent (the pipeline's and the request's header
        /// fields set): it may add fields, rewrite the URL (still http(s)) or
        /// throw. A throw, or no answer within `http.requestTimeout`
        /// (`.timedOut`), fails only the requests sharing that download;
        /// a `VipsError` it throws reaches them as it is. Not called for disk
        /// hits, nor by a custom `dataLoader`. Default nil.
        public var requestModifier: (@Sendable (URLRequest) async throws -> URLRequest)?
        /// The longest one decode may take; nil for no limit. Default 30 s
        /// (a decode within the default `DecodeLimits` takes well under 2 s).
        /// Set it with `setDecodeTimeLimit(_:)`, which refuses a limit of zero or less.
        ///
        /// At the limit the requests waiting for the decode fail with
        /// `.timedOut`, and the decode is stopped cooperatively
        /// (`DecodeCancellation`): its thread goes back to the pool at the next
        /// strip libvips computes. A codec call that cannot be interrupted
        /// keeps its thread until it returns, and its result is dropped; a
        /// decode that never returns keeps it for good, so formats that can hang
        /// (the opt-in ones) belong in another process. An animation's decode
        /// is stopped the same way, but its caller waits for the thread.
        public private(set) var decodeTimeLimit: Duration? = .seconds(30)
        /// The shortest time between two previews of one task, for requests
        /// with `ImageRequest.Options.progressivePreviews`: a scan completing
        /// sooner waits for the next bytes after the interval. Default 0.5 s
        /// (Nuke's default too). Zero previews every scan that completes.
        public var previewInterval: Duration = .milliseconds(500)

        /// Sets `decodeTimeLimit`: a positive duration, or nil for no limit.
        ///
        /// - Throws: `.invalidArgument` for a limit of zero or less (the
        ///   configuration keeps its previous limit).
        public mutating func setDecodeTimeLimit(_ limit: Duration?) throws(VipsError) {
            if let limit, limit <= .zero {
                throw VipsError(.invalidArgument, "decodeTimeLimit must be positive (or nil for none), not \(limit)")
            }
            decodeTimeLimit = limit
        }

        /// A configuration; each parameter defaults as its property documents.
        /// Concurrencies below 1 are raised to 1.
        ///
        /// - Parameters:
        ///   - decodeConcurrency: decodes at once (`decodeConcurrency`).
        ///   - dataLoadingConcurrency: loads on the network lane at once (`dataLoadingConcurrency`).
        ///   - dataLoader: the loader (`dataLoader`); default `DataLoader()`, the default loader.
        ///   - memoryCache: decoded bitmaps kept in memory; nil for none. The
        ///     default is a new cache for each pipeline (see `memoryCache`).
        ///   - dataCache: the data cache (`dataCache`); nil for none.
        ///   - http: how the default loader downloads `http(s)` URLs.
        ///   - decodeOptions: limits, strictness and allowed formats of every decode.
        ///   - resizesFromLargerCachedImages: whether a smaller size may be made
        ///     from a larger cached bitmap of the same source.
        public init(
            decodeConcurrency: Int = SystemResources.current.usableCPUs,
            dataLoadingConcurrency: Int = 6,
            dataLoader: any ImageDataLoading = DataLoader(),
            memoryCache: MemoryCache? = .configurationDefault(),
            dataCache: (any ImageDataCaching)? = nil,
            http: HTTPDataLoader.Configuration = HTTPDataLoader.Configuration(),
            decodeOptions: DecodeOptions = DecodeOptions(),
            resizesFromLargerCachedImages: Bool = true
        ) {
            self.decodeConcurrency = max(1, decodeConcurrency)
            self.dataLoadingConcurrency = max(1, dataLoadingConcurrency)
            self.dataLoader = dataLoader
            self.memoryCache = memoryCache
            self.http = http
            self.decodeOptions = decodeOptions
            self.resizesFromLargerCachedImages = resizesFromLargerCachedImages
            self.dataCache = dataCache
        }

        /// The default configuration with a disk cache for downloaded images.
        ///
        /// - Parameters:
        ///   - directory: the cache folder, created when missing. Default
        ///     `DiskCache.defaultDirectory` (`~/.cache/vipsload/images`).
        ///   - sizeLimit: the most bytes the cache keeps. Default 512 MiB.
        /// - Throws: `.io` when the folder cannot be created.
        public static func withDiskCache(
            directory: URL = DiskCache.defaultDirectory,
            sizeLimit: Int = 512 * 1024 * 1024
        ) throws(VipsError) -> Configuration {
            Configuration(dataCache: try DiskCache(directory: directory, sizeLimit: sizeLimit))
        }

        /// Fail on truncated or corrupt data instead of returning a partly
        /// grey image. Default false. (Shorthand for `decodeOptions.strict`.)
        public var isStrictDecoding: Bool {
            get { decodeOptions.strict }
            set { decodeOptions.strict = newValue }
        }

        /// Largest pixel count an image may declare. Default 100 megapixels.
        /// (Shorthand for `decodeOptions.limits.maxPixelCount`.)
        public var maxPixelCount: Int {
            get { decodeOptions.limits.maxPixelCount }
            set { decodeOptions.limits.maxPixelCount = newValue }
        }

        /// The lane limit for network loads (`dataLoadingConcurrency`, and
        /// with the pipeline's own downloader `http.maxConcurrentDownloads`).
        var loadLimit: Int {
            let loads = max(1, dataLoadingConcurrency)
            guard let standard = dataLoader as? DataLoader, standard.remoteLoader == nil else { return loads }
            return min(loads, max(1, http.maxConcurrentDownloads))
        }
    }
}
