import Foundation
@_exported import VipsCore

/// Where a request's encoded bytes come from: a file, bytes in memory, or a URL.
///
/// Made with `.file(_:)`, `.data(_:identifier:)` or `.url(_:)`; `location`
/// tells which. Two sources are equal when their `key`s are: a relative and
/// an absolute path to one file, and a `file://` URL to it, are one source.
public struct ImageSource: Sendable, Hashable, CustomStringConvertible {
    /// Where the bytes are.
    public enum Location: Sendable, Hashable {
        /// A file on disk, by the path the user gave.
        case file(String)
        /// Bytes already in memory, named by `identifier` (two sources with the
        /// same identifier must hold the same bytes).
        case data(Data, identifier: String)
        /// A URL: `file://` is read from disk, `http(s)://` is downloaded.
        case url(URL)
    }

    /// Where the bytes are.
    public let location: Location
    /// The stable key identifying the source's bytes in caches and coalescing:
    /// `file:` and the absolute, standardised path for files and `file://`
    /// URLs, `data:` and the identifier for data, the URL for other URLs.
    /// Computed once, when the source is made.
    public let key: String
    /// What messages call the source in place of its own description.
    private let name: String?

    private init(location: Location, key: String, name: String? = nil) {
        self.location = location
        self.key = key
        self.name = name
    }

    /// The same source, named `name` in every message: for bytes that stand
    /// in for another source (a URL's downloaded file, decoded by the CLI),
    /// whose messages must name that source, never the stand-in.
    package func named(_ name: String) -> ImageSource {
        ImageSource(location: location, key: key, name: name)
    }

    /// The file at `path` (relative paths are resolved against the current folder now).
    public static func file(_ path: String) -> ImageSource {
        ImageSource(location: .file(path), key: "file:" + canonicalPath(path))
    }

    /// Bytes in memory, named by `identifier`.
    public static func data(_ data: Data, identifier: String) -> ImageSource {
        ImageSource(location: .data(data, identifier: identifier), key: "data:" + identifier)
    }

    /// The image at `url`.
    public static func url(_ url: URL) -> ImageSource {
        let key = url.isFileURL ? "file:" + canonicalPath(url.path) : url.absoluteString
        return ImageSource(location: .url(url), key: key)
    }

    /// The path of a file source (a path or a `file://` URL); nil otherwise.
    public var filePath: String? {
        switch location {
        case .file(let path): return path
        case .url(let url) where url.isFileURL: return url.path
        case .url, .data: return nil
        }
    }

    /// The key a data cache stores the source under: `key`, with a URL's
    /// credentials replaced by their digest so no secret reaches a cache file.
    var dataCacheKey: String { URLRedaction.storageKey(key) }

    /// Whether the bytes are on this machine (a file or memory), not behind a network.
    var isLocal: Bool {
        switch location {
        case .file, .data: return true
        case .url(let url): return url.isFileURL
        }
    }

    /// What messages call the source: the path as given, the data's
    /// identifier, or the URL with any password removed.
    public var description: String {
        if let name { return name }
        switch location {
        case .file(let path): return path
        case .data(_, let identifier): return "data:" + identifier
        case .url(let url): return url.isFileURL ? url.path : URLRedaction.redacted(url.absoluteString)
        }
    }

    public static func == (lhs: ImageSource, rhs: ImageSource) -> Bool { lhs.key == rhs.key }
    public func hash(into hasher: inout Hasher) { hasher.combine(key) }

    /// An absolute path with `.` and `..` components and repeated slashes removed
    /// (symbolic links are kept: they are resolved by the file's identity).
    static func canonicalPath(_ path: String) -> String {
        var absolute = path
        if !path.hasPrefix("/") {
            absolute = FileManager.default.currentDirectoryPath + "/" + path
        }
        var parts: [Substring] = []
        for part in absolute.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": if !parts.isEmpty { parts.removeLast() }
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }
}
