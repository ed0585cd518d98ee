import Foundation

/// Encoded image data kept between loads and between processes: the cache an
/// `ImagePipeline` consults before any data loader, whatever the loader, and
/// the one an `HTTPDataLoader` streams downloads into.
///
/// `DiskCache` is the implementation VipsLoad ships. Every method may block on
/// file I/O: the pipeline calls them on its I/O lane, never on Swift's
/// cooperative pool and never behind downloads. A cache that cannot store
/// (full, read-only) costs only the caching: the pipeline still delivers the
/// image.
public protocol ImageDataCaching: Sendable {
    /// The stored, verified entry for `key`, with what it was stored with; nil
    /// for a miss (absent, unreadable or corrupt entries are misses).
    func cachedData(for key: String) -> CachedImageData?

    /// A writer for a new entry for `key`: bytes stream into a file as they
    /// arrive, and the entry appears (replacing any previous one) only when
    /// the writer commits.
    ///
    /// - Throws: `VipsError` when the cache cannot take a new entry now (its
    ///   folder refuses new files).
    func makeWriter(for key: String) throws(VipsError) -> ImageDataCacheWriter

    /// Replaces the HTTP metadata of the entry `hit` was read from (after a
    /// `304 Not Modified`), unless that entry has been replaced meanwhile.
    /// A failure costs only a revalidation next time.
    func updateHTTPMetadata(_ http: HTTPCacheMetadata, of hit: CachedImageData)

    /// Removes the entry for `key`, if any.
    func removeData(for key: String)

    /// The largest entry the cache keeps, in bytes; nil for no limit. A
    /// download that declares a larger body is not streamed into the cache.
    var maxEntryByteCount: Int? { get }

    /// The HTTP metadata (validators, freshness) of the entry stored for
    /// `key`, without reading its bytes; nil when there is no entry or it was
    /// stored without HTTP. The default reads the entry through `cachedData(for:)`.
    func httpMetadata(for key: String) -> HTTPCacheMetadata?

    /// Brings the cache within its limits now and returns the bytes its
    /// entries take afterwards, so `configuration.dataCache?.sweep()` works
    /// whatever the cache. `DiskCache` deletes leftovers of interrupted writes
    /// and the least recently used entries past its size limit
    /// (`DiskCache.sweep()`); the default does nothing and returns 0.
    @discardableResult
    func sweep() -> Int
}

extension ImageDataCaching {
    /// Nothing to sweep: 0.
    @discardableResult
    public func sweep() -> Int { 0 }

    /// `cachedData(for:)`'s HTTP metadata (a cache that can read metadata
    /// alone, as `DiskCache` does, implements it without reading the bytes).
    public func httpMetadata(for key: String) -> HTTPCacheMetadata? {
        cachedData(for: key)?.http
    }

    /// Stores `data` (bytes, or a file's contents) as the entry for `key`
    /// through a writer, and returns data to decode (the stored copy).
    ///
    /// - Throws: `VipsError` when the entry cannot be stored (the bytes are
    ///   not an image, or the cache refuses them).
    func store(
        _ data: ImageData, for key: String, http: HTTPCacheMetadata? = nil, sourceInfo: ImageInfo? = nil
    ) throws(VipsError) -> ImageData {
        let writer = try makeWriter(for: key)
        switch data.input {
        case .data(let bytes):
            try writer.write(bytes)
        case .file(let path):
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                writer.discard()
                throw VipsError.file(errno, "cannot open \(path) to cache it")
            }
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 256 << 10)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count == 0 { break }
                guard count > 0 else {
                    writer.discard()
                    throw VipsError.file(errno, "cannot read \(path) to cache it")
                }
                try writer.write(Data(buffer[0..<count]))
            }
        }
        return try writer.commit(http: http, sourceInfo: sourceInfo)
    }
}

/// A data-cache hit: the bytes and what they were stored with.
public struct CachedImageData: Sendable {
    /// The key the entry is stored under.
    public let key: String
    /// The bytes, ready for the decoder.
    public let data: ImageData
    /// The HTTP validators and freshness the data was stored with; nil for
    /// data stored without HTTP (always fresh).
    public let http: HTTPCacheMetadata?
    /// The header of the image the entry was made from, when it is not the
    /// stored bytes' own (a processed image keeps its source's size, format,
    /// orientation and pages); nil otherwise.
    public let sourceInfo: ImageInfo?
    /// The cache's own name for the stored version (a `DiskCache` body
    /// file), so `updateHTTPMetadata(_:of:)` can tell it was not replaced;
    /// nil when the cache keeps none.
    public let storedVersion: String?

    /// A hit for `data` under `key`, stored with `http` metadata and
    /// `sourceInfo`; `storedVersion` is the cache's own name for that version,
    /// if it keeps one.
    public init(
        key: String, data: ImageData, http: HTTPCacheMetadata?, sourceInfo: ImageInfo? = nil,
        storedVersion: String? = nil
    ) {
        self.key = key
        self.data = data
        self.http = http
        self.sourceInfo = sourceInfo
        self.storedVersion = storedVersion
    }

    /// Whether it may be served without asking the server.
    public func isFresh(at date: Date = Date()) -> Bool {
        http?.isFresh(at: date) ?? true
    }
}

extension HTTPCachePolicy {
    /// What a load does with what the data cache holds for its source.
    enum CachedDataUse {
        /// Serve the stored bytes without asking the server.
        case serve(ImageData)
        /// Ask the server with the entry's validators; a `304` serves it.
        case revalidate(CachedImageData)
        /// Load as if nothing were stored.
        case load
    }

    /// The one freshness decision, for the pipeline and an `HTTPDataLoader`
    /// alike: a fresh entry is served (any entry under `.ignoreExpiry`, or for
    /// a request that must not load); a stale one with validators is
    /// revalidated when the loader can; anything else is loaded again.
    func use(of hit: CachedImageData?, cacheOnly: Bool = false, canRevalidate: Bool) -> CachedDataUse {
        guard let hit else { return .load }
        if cacheOnly || self == .ignoreExpiry || hit.isFresh() {
            return .serve(ImageData.with(HTTPValidators(hit.http), hit.data))
        }
        if canRevalidate, hit.http?.canRevalidate == true { return .revalidate(hit) }
        return .load
    }
}
