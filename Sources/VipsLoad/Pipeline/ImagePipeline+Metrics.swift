import Synchronization

extension ImagePipeline {
    /// Counters since the pipeline was made, read as one snapshot.
    ///
    /// They let tests and benchmarks prove what happened (how many decodes,
    /// how much work was shared) without measuring time.
    public struct Metrics: Sendable, Hashable, CustomStringConvertible {
        /// Requests made, however they were served.
        public var requests = 0
        /// Requests served straight from the memory cache.
        public var memoryHits = 0
        /// Decodes avoided by downscaling a larger bitmap of the same source
        /// found in the memory cache.
        public var memoryResizes = 0
        /// Requests that joined an identical request already in flight.
        public var coalesced = 0
        /// Calls to the data loader.
        public var dataLoadsStarted = 0
        /// Decodes (of distinct sizes) that used source data already being
        /// loaded or loaded for another size, instead of loading it again.
        public var dataLoadsShared = 0
        /// Decodes of source data begun. (A processed image stored in the
        /// data cache, `DataCachePolicy`, is decoded too when it is served:
        /// those decodes are `processedImageDecodes`, not counted here, so a
        /// rerun served from stored thumbnails shows no decode of its sources.)
        public var decodesStarted = 0
        /// Decodes of source data that ran to the end, successfully or not.
        public var decodesFinished = 0
        /// Processed images read back from the data cache and decoded
        /// (`DataCachePolicy`): each serves a request without decoding its source.
        public var processedImageDecodes = 0
        /// Requests cancelled before they completed.
        public var cancelled = 0
        /// Requests completed with an error other than cancellation.
        public var failed = 0
        /// Encoded bytes delivered by the data loader.
        public var bytesLoaded = 0
        /// Pixel bytes produced by decodes of source data.
        public var bytesDecoded = 0

        // The data loader's counters (`ImageDataLoading.networkMetrics`): the
        // pipeline's own downloader's with the default loader; a custom
        // loader shared by several pipelines counts for all of them.

        /// Downloads served from the disk cache without any request.
        public var diskHits = 0
        /// HTTP requests sent: first attempts, retries and conditional requests.
        public var networkRequests = 0
        /// Bodies downloaded completely (a `304` downloads none).
        public var downloads = 0
        /// Stale disk-cache entries revalidated by a `304 Not Modified` and
        /// served from disk.
        public var revalidations = 0
        /// Body bytes received in completed downloads.
        public var bytesDownloaded = 0
        /// HTTP attempts repeated after a transient failure.
        public var retries = 0
        /// HTTP requests that asked only for the rest of a body cut short
        /// earlier (`Range` with `If-Range`, from a kept partial body).
        public var resumedRequests = 0

        /// All counters at zero.
        public init() {}

        public var description: String {
            "requests \(requests), memory hits \(memoryHits), memory resizes \(memoryResizes), coalesced \(coalesced), "
                + "loads \(dataLoadsStarted) (shared \(dataLoadsShared)), decodes \(decodesStarted)/\(decodesFinished) "
                + "(processed from the data cache \(processedImageDecodes)), "
                + "cancelled \(cancelled), failed \(failed), bytes loaded \(bytesLoaded), decoded \(bytesDecoded), "
                + "disk hits \(diskHits), network requests \(networkRequests) (downloads \(downloads), "
                + "revalidations \(revalidations), retries \(retries), resumed \(resumedRequests)), bytes downloaded \(bytesDownloaded)"
        }

        /// Adds a data loader's network and disk-cache counters.
        mutating func include(_ network: HTTPLoaderMetrics) {
            diskHits += network.diskHits
            networkRequests += network.httpRequests
            downloads += network.downloads
            revalidations += network.revalidations
            bytesDownloaded += network.bytesDownloaded
            retries += network.retries
            resumedRequests += network.resumedRequests
        }
    }
}

/// The live counters behind `ImagePipeline.Metrics`: relaxed atomics, so
/// counting costs a few nanoseconds on the memory-hit path and takes no lock.
final class MetricCounters: Sendable {
    let requests = Atomic<Int>(0)
    let memoryHits = Atomic<Int>(0)
    let memoryResizes = Atomic<Int>(0)
    let coalesced = Atomic<Int>(0)
    let dataLoadsStarted = Atomic<Int>(0)
    let dataLoadsShared = Atomic<Int>(0)
    let decodesStarted = Atomic<Int>(0)
    let decodesFinished = Atomic<Int>(0)
    let processedImageDecodes = Atomic<Int>(0)
    let cancelled = Atomic<Int>(0)
    let failed = Atomic<Int>(0)
    let bytesLoaded = Atomic<Int>(0)
    let bytesDecoded = Atomic<Int>(0)

    var snapshot: ImagePipeline.Metrics {
        var metrics = ImagePipeline.Metrics()
        metrics.requests = requests.load(ordering: .relaxed)
        metrics.memoryHits = memoryHits.load(ordering: .relaxed)
        metrics.memoryResizes = memoryResizes.load(ordering: .relaxed)
        metrics.coalesced = coalesced.load(ordering: .relaxed)
        metrics.dataLoadsStarted = dataLoadsStarted.load(ordering: .relaxed)
        metrics.dataLoadsShared = dataLoadsShared.load(ordering: .relaxed)
        metrics.decodesStarted = decodesStarted.load(ordering: .relaxed)
        metrics.decodesFinished = decodesFinished.load(ordering: .relaxed)
        metrics.processedImageDecodes = processedImageDecodes.load(ordering: .relaxed)
        metrics.cancelled = cancelled.load(ordering: .relaxed)
        metrics.failed = failed.load(ordering: .relaxed)
        metrics.bytesLoaded = bytesLoaded.load(ordering: .relaxed)
        metrics.bytesDecoded = bytesDecoded.load(ordering: .relaxed)
        return metrics
    }
}
