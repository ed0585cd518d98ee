import CGLib
import Foundation
import VipsCore
import VipsLoad

#if canImport(Glibc)
    import Glibc
#endif

/// What defines one response's bytes: the source's identity, the canonical
/// processing options and the output format. It keys the memory and disk
/// caches and the coalescing of identical requests, and its SHA-256 is the
/// strong `ETag`.
///
/// Computed without decoding anything: a local file's identity is one
/// `stat` (device, inode, size, modification time in nanoseconds, as the
/// pipeline's own file identity), so an edited or replaced file gets a new
/// key and a new `ETag`; a URL's identity is the URL itself.
struct RepresentationKey: Sendable, Hashable {
    /// The full key text (never hashed for lookups: no two representations share one).
    let text: String
    /// The strong entity tag, quoted: 32 hex digits of SHA-256 of `text`.
    let entityTag: String

    /// The key of `source` (see `identity(ofFile:)`), processed as `options`, in `format`.
    init(source: String, options: String, format: String) {
        text = "v1|\(source)|\(options)|\(format)"
        entityTag = Self.tag(text)
    }

    /// A local file's identity, "file:PATH:DEVICE:INODE:SIZE:SECONDS.NANOSECONDS"
    /// (symbolic links followed); `.fileNotFound` (also for a folder) or
    /// `.permissionDenied` when `stat` fails.
    /// A source's identity in keys: a local file's (`identity(ofFile:)`, one
    /// `stat`), else the source's own key.
    static func identity(of source: ImageSource) -> Result<String, VipsError> {
        guard let path = source.filePath else { return .success(source.key) }
        return identity(ofFile: path)
    }

    static func identity(ofFile path: String) -> Result<String, VipsError> {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let kind: VipsError.Kind = errno == EACCES ? .permissionDenied : .fileNotFound
            return .failure(VipsError(kind, "\(path): \(String(cString: strerror(errno)))"))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            return .failure(VipsError(.fileNotFound, "\(path): not a regular file"))
        }
        return .success(
            "file:\(path):\(info.st_dev):\(info.st_ino):\(info.st_size):\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)")
    }

    /// Whether an `If-None-Match` field value names `entityTag` (or is `*`),
    /// compared weakly as RFC 9110 asks for `If-None-Match`.
    func isMatched(by ifNoneMatch: String) -> Bool {
        for candidate in ifNoneMatch.split(separator: ",") {
            var tag = candidate.trimmingCharacters(in: .whitespaces)
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            if tag == entityTag { return true }
        }
        return false
    }

    /// GLib's SHA-256 (linked through libvips), first 128 bits, in quotes.
    private static func tag(_ text: String) -> String {
        guard let digest = g_compute_checksum_for_string(G_CHECKSUM_SHA256, text, -1) else {
            return "\"\(text.hashValue)\""
        }
        defer { g_free(digest) }
        return "\"" + String(String(cString: digest).prefix(32)) + "\""
    }
}
