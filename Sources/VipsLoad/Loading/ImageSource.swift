import Foundation
@_exported import VipsCore

/// Where a request's encoded bytes come from.
public enum ImageSource: Sendable, Hashable, CustomStringConvertible {
    /// A file on disk (a path, or a `file://` URL through `.url`).
    case file(String)
    /// Bytes already in memory, named by `identifier` (the cache key: two sources
    /// with the same identifier must hold the same bytes).
    case data(Data, identifier: String)
    /// A URL: `file://` is read from disk, `http(s)://` is downloaded.
    case url(URL)

    /// The stable key identifying the source's bytes in caches and coalescing.
    public var key: String {
        switch self {
        case .file(let path): return "file:" + path
        case .data(_, let identifier): return "data:" + identifier
        case .url(let url): return url.isFileURL ? "file:" + url.path : url.absoluteString
        }
    }

    /// The key for people: a URL's credentials redacted (`http://***@host/…`).
    public var description: String { URLRedaction.redacted(key) }

    public static func == (lhs: ImageSource, rhs: ImageSource) -> Bool { lhs.key == rhs.key }
    public func hash(into hasher: inout Hasher) { hasher.combine(key) }
}
