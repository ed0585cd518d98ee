/// A request checked once, carrying what every stage needs of it: its cache
/// key (with the file's version) and the cache switches.
struct ValidatedRequest: Sendable {
    let request: ImageRequest
    let key: ImageCacheKey

    var priority: ImageRequest.Priority { request.priority }
    var scale: Double { request.scale }
    /// What one data load of this request reads: the source at its version.
    var sourceKey: String { key.versionedSourceKey }
    var readsMemoryCache: Bool { !request.options.contains(.disableMemoryCacheReads) }
    var writesMemoryCache: Bool { !request.options.contains(.disableMemoryCacheWrites) }
    /// The decode a processed request is made from: the same request without
    /// its processors (its key the same without their identifiers).
    var decodeStage: ValidatedRequest {
        var plain = request
        plain.processors = []
        return ValidatedRequest(request: plain, key: key.withoutProcessing)
    }
}
