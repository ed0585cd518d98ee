import Foundation

/// The metadata of one disk-cache entry: which source it holds, how to check
/// its bytes, and the HTTP validators and freshness it was stored with.
///
/// Stored as a small JSON file beside the body; its modification time is the
/// entry's last access, which the LRU sweep orders by.
public struct DiskCacheEntry: Sendable, Hashable, Codable {
    /// The source key (`ImageSource.key`) the entry stores.
    public let key: String
    /// The body's size in bytes.
    public let byteCount: Int
    /// When the body was stored.
    public let storedAt: Date
    /// The HTTP response's validators and freshness; nil for data stored without HTTP.
    public internal(set) var http: HTTPCacheMetadata?
    /// The header of the image the entry was made from, when the body is not
    /// that image itself (a processed thumbnail keeps its source's size,
    /// format, orientation and pages); nil otherwise.
    public let sourceInfo: ImageInfo?

    /// The metadata layout; entries of another version are misses.
    let version: Int
    /// The body's file name inside the entries folder (unique per write, so a
    /// replacement never changes a body a reader may hold).
    let bodyFile: String
    /// Checksum of every byte (`ContentChecksum`: XXH3-64 since version 2).
    let checksum: String
    /// Checksum of the start, middle and end windows, for large entries.
    let sampledChecksum: String

    /// 2: XXH3 checksums and file names (version 1 used FNV-1a and a checksum of the project's own).
    static let currentVersion = 2

    /// Whether the entry may be served without asking the server: entries
    /// stored without HTTP metadata are always fresh.
    public func isFresh(at date: Date = Date()) -> Bool {
        http?.isFresh(at: date) ?? true
    }
}
