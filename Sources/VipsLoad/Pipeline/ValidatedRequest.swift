import Foundation

/// A request checked once, carrying what every stage needs of it: its cache
/// key (with the file's version) and the cache switches.
struct ValidatedRequest: Sendable {
    let request: ImageRequest
    let key: ImageCacheKey

    var priority: ImageRequest.Priority { request.priority }
    var scale: Double { request.scale }
    /// What one data load of this request reads: the source at its version.
    var sourceKey: String { key.versionedSourceKey }
    var readsMemoryCache: Bool {
        request.options.isDisjoint(with: [.disableMemoryCacheReads, .reloadIgnoringCachedData])
    }
    var writesMemoryCache: Bool { !request.options.contains(.disableMemoryCacheWrites) }
    /// How the data unit uses the data cache.
    var dataPolicy: DataPolicy {
        let options = request.options
        return DataPolicy(
            reads: options.isDisjoint(with: [.disableDataCacheReads, .reloadIgnoringCachedData]),
            writes: !options.contains(.disableDataCacheWrites),
            cacheOnly: options.contains(.returnCacheDataDontLoad),
            key: URLRedaction.storageKey(key.sourceKey), headers: request.httpHeaders,
            allowsRedirect: request.allowsRedirect)
    }
    /// The loading switches that keep this request's work apart (0 for none).
    var variant: Int { request.options.intersection(.loadingVariant).rawValue }
    /// Where this request's decode or processing unit is found and joined.
    var workKey: WorkKey { WorkKey(key: key, variant: variant) }
    /// Where the unit that serves this request through the processed-image
    /// data cache is found and joined (beside the decode it falls back to).
    var processedCacheWorkKey: WorkKey { WorkKey(key: key, variant: variant, throughDataCache: true) }
    /// Whether the request asks for more than the source's own pixels: a
    /// box, a resize mode other than fit, or processors.
    var isProcessed: Bool { !key.isOriginal || !key.geometry.isEmpty || !key.processing.isEmpty }
    /// The processed result's key in the data cache: the source's storage key
    /// and version, the pixel box, geometry, processors and `format`.
    func processedCacheKey(format: OutputFormat) -> String {
        "processed:" + URLRedaction.storageKey(key.sourceKey) + (key.version.map { "#" + $0.description } ?? "")
            + "|\(key.width)x\(key.height)" + (key.allowUpscale ? "+upscale" : "") + "|" + key.geometry
            + "|" + key.processing + "|" + format.description
    }
    /// Where this request's data unit is found and joined: the source at its
    /// version, apart for requests with other loading switches.
    var loadKey: String { variant == 0 ? sourceKey : sourceKey + "|" + String(variant) }
    /// The decode a processed request is made from: the same request without
    /// its processors (its key the same without their identifiers).
    var decodeStage: ValidatedRequest {
        var plain = request
        plain.processors = []
        return ValidatedRequest(request: plain, key: key.withoutProcessing)
    }
}

/// The key of a decode or processing unit: the bitmap's key, and the loading
/// switches (a reload must not join a decode of cached data).
struct WorkKey: Hashable, Sendable {
    let key: ImageCacheKey
    let variant: Int
    /// The unit that looks in the processed-image data cache first.
    var throughDataCache = false
}

/// How one data unit uses the data cache.
struct DataPolicy: Sendable {
    /// Look in the data cache before loading.
    let reads: Bool
    /// Store what is loaded.
    var writes: Bool
    /// Never load: a data-cache miss is `.notCached`.
    let cacheOnly: Bool
    /// The entry's key in the data cache (credentials replaced by their digest).
    let key: String
    /// The request's own header fields, merged over the pipeline's.
    var headers: [String: String] = [:]
    /// The request's own redirect check, asked after the loader's.
    var allowsRedirect: (@Sendable (URL) -> Bool)? = nil
}
