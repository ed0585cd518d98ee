import Foundation

/// Encoded image data kept between loads and between processes: the cache an
/// `ImagePipeline` consults before any data loader, whatever the loader.
///
/// `DiskCache` is the one implementation. Every method may block on file I/O:
/// the pipeline calls them on its I/O lane, never on Swift's cooperative pool
/// and never behind downloads. A cache that cannot store (full, read-only)
/// costs only the caching: the pipeline still delivers the image.
public protocol ImageDataCaching: Sendable {
    /// The stored, verified data for `key`, or nil (absent, unreadable or
    /// corrupt entries are misses).
    func cachedData(for key: String) -> CachedImageData?

    /// Stores `data` as the entry for `key`, replacing any previous one, and
    /// returns data to decode (the stored copy, or `data` itself).
    ///
    /// - Throws: `VipsError` when the entry cannot be stored.
    func store(_ data: ImageData, for key: String, http: HTTPCacheMetadata?) throws(VipsError) -> ImageData

    /// Removes the entry for `key`, if any.
    func removeData(for key: String)
}

/// A data-cache hit: the bytes and what is known of their freshness.
public struct CachedImageData: Sendable {
    /// The bytes, ready for the decoder.
    public let data: ImageData
    /// The HTTP validators and freshness the data was stored with; nil for
    /// data stored without HTTP (always fresh).
    public let http: HTTPCacheMetadata?

    /// A hit for `data`, stored with `http` metadata.
    public init(data: ImageData, http: HTTPCacheMetadata?) {
        self.data = data
        self.http = http
    }

    /// Whether it may be served without asking the server.
    public func isFresh(at date: Date = Date()) -> Bool {
        http?.isFresh(at: date) ?? true
    }
}

extension DiskCache: ImageDataCaching {
    /// The verified entry for `key` (see `lookup`).
    public func cachedData(for key: String) -> CachedImageData? {
        guard let hit = lookup(key) else { return nil }
        return CachedImageData(data: hit.data, http: hit.entry.http)
    }

    /// Streams `data` (bytes, or a file's contents) into a new entry and returns
    /// a private link to the stored body.
    public func store(_ data: ImageData, for key: String, http: HTTPCacheMetadata?) throws(VipsError) -> ImageData {
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
        return try writer.commitForReading(http: http)
    }

    /// Removes the entry for `key` (see `remove`).
    public func removeData(for key: String) {
        remove(key)
    }
}
