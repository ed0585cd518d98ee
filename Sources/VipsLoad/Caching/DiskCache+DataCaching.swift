import Foundation

/// `DiskCache` as the pipeline's data cache (and an `HTTPDataLoader`'s).
extension DiskCache: ImageDataCaching {
    /// The verified entry for `key` (see `lookup`), with its HTTP metadata and source header.
    public func cachedData(for key: String) -> CachedImageData? {
        guard let hit = lookup(key) else { return nil }
        return CachedImageData(
            key: key, data: hit.data, http: hit.entry.http, sourceInfo: hit.entry.sourceInfo,
            storedVersion: hit.entry.bodyFile)
    }

    /// A writer streaming a new entry for `key` into a temporary file in the
    /// cache folder (same file system, so the commit is a rename); its commit
    /// returns a private link to the stored body. Writes in progress count
    /// against the size limit (see `DiskCache`).
    public func makeWriter(for key: String) throws(VipsError) -> ImageDataCacheWriter {
        let file = try makeTemporaryFile()
        return ImageDataCacheWriter(
            file: file,
            commit: { [self] file, http, sourceInfo, keepingBytes throws(VipsError) in
                switch try commit(
                    file, key: key, http: http, sourceInfo: sourceInfo, openForReading: true,
                    keepingBytes: keepingBytes)
                {
                case .committed(let hit): return .stored(hit.data)
                case .uncached(let data, let reason): return .uncached(data, reason: reason)
                }
            },
            refused: { [self] in noteWriteFailure() })
    }

    /// Replaces the HTTP metadata of the entry `hit` was read from (see `refresh`).
    public func updateHTTPMetadata(_ http: HTTPCacheMetadata, of hit: CachedImageData) {
        guard let current = entry(for: hit.key), current.bodyFile == hit.storedVersion else { return }
        // A failed metadata write only costs a revalidation next time.
        _ = try? refresh(current, http: http)
    }

    /// The stored entry's HTTP metadata, read from its metadata file alone
    /// (the body is neither read nor verified).
    public func httpMetadata(for key: String) -> HTTPCacheMetadata? {
        entry(for: key)?.http
    }

    /// Removes the entry for `key` (see `remove`).
    public func removeData(for key: String) {
        remove(key)
    }

    /// `configuration.sizeLimit`.
    public var maxEntryByteCount: Int? { configuration.sizeLimit }
}
