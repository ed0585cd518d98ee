import Foundation
import VipsCore
import VipsLoad

/// `thumb --cache-dir`: finished thumbnails, encoded as they are written,
/// kept in the same `DiskCache` as the downloaded originals, so a run into a
/// new `--out` (or another machine's run on a shared folder) copies what was
/// made before instead of decoding it again.
///
/// An entry's key is its source's identity, every option that changes the
/// output's bytes (the journal's fingerprint) and the versions of what made
/// it, so nothing stale is ever served:
/// - a local file's identity is its path, device, inode, size and
///   modification time in nanoseconds: a file replaced or changed in place
///   makes a new thumbnail;
/// - a URL's identity is the URL and the validators (`ETag`,
///   `Last-Modified`) of its original as the disk cache holds it after the
///   load, which revalidates a stale original first: a changed original has
///   new validators and makes a new thumbnail. A URL whose original is not
///   cached, or was served without validators, is never keyed;
/// - `formatVersion`, the vipsload release and the libvips version: another
///   encoder makes new thumbnails.
///
/// The disk cache verifies every entry before it is served (length, format,
/// checksum) and deletes a corrupt one, which is then made again. Only
/// thumbnails that were encoded are stored: an error is never cached.
struct ThumbCache: Sendable {
    /// Bumped when what an entry holds, or how its key is made, changes.
    static let formatVersion = 1

    let disk: DiskCache
    /// Whether stored thumbnails are used (`--force` makes every one again, and stores it).
    let reads: Bool
    /// The key's part after the source: versions and output options.
    private let variant: String

    /// A cache in `disk` for thumbnails made with the options `fingerprint`;
    /// `reads`: whether stored ones are used, or only replaced.
    init(disk: DiskCache, fingerprint: String, reads: Bool = true) {
        self.disk = disk
        self.reads = reads
        variant =
            "thumb/\(Self.formatVersion) vipsload \(Version.vipsLoad) libvips \(VipsRuntime.libraryVersion)"
            + "|" + fingerprint
    }

    /// The key of a local file's thumbnail, from its identity (see `identity(ofFile:)`).
    func key(fileIdentity: String) -> String {
        "thumb|" + fileIdentity + "|" + variant
    }

    /// The key of a URL's thumbnail, made from its original as stored with
    /// `http`; nil when the original carries no validator to tell a change by.
    func key(url: URL, original http: HTTPCacheMetadata?) -> String? {
        guard let http, http.etag != nil || http.lastModified != nil else { return nil }
        // Credentials in the URL become their digest, as in the originals' keys: no secret reaches the disk.
        return "thumb|url:" + URLRedaction.storageKey(url.absoluteString) + "|etag=" + (http.etag ?? "") + "|modified="
            + (http.lastModified ?? "") + "|" + variant
    }

    /// A local file's identity for `key(fileIdentity:)`: "PATH:DEVICE:INODE:SIZE:SECONDS.NANOSECONDS", from its `stat`.
    static func identity(ofFile path: String, _ info: stat) -> String {
        "file:\(URL(fileURLWithPath: path).standardizedFileURL.path):\(info.st_dev):\(info.st_ino):\(info.st_size):"
            + "\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
    }

    /// The stored thumbnail for `key`, verified; nil for a miss (a corrupt
    /// entry is deleted by the disk cache and is a miss).
    func thumbnail(for key: String) -> Data? {
        guard reads, let hit = disk.cachedData(for: key) else { return nil }
        return try? hit.data.contents()
    }

    /// Stores an encoded thumbnail under `key`; a cache that refuses it costs only the caching.
    func store(_ thumbnail: Data, for key: String) {
        _ = try? disk.store(thumbnail, for: key)
    }
}
