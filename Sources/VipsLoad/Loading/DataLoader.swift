import Foundation

/// The default data-loading step: files, in-memory data and `file://` URLs,
/// and every other URL through `remoteLoader`.
///
/// Files are not read here: the returned `ImageData` names the file and
/// libvips reads it incrementally while decoding, so a large file never sits
/// whole in memory. Other URLs go to `remoteLoader`; without one, `http(s)`
/// URLs are downloaded by an `HTTPDataLoader`: in an `ImagePipeline` the
/// pipeline's own (made from `Configuration.http`, streaming into
/// `Configuration.dataCache`, its downloads in the pipeline's priority order),
/// used on its own a shared one with the default configuration.
///
/// `ImagePipeline.Configuration.dataLoader` is `DataLoader()` by default, and
/// a pipeline given one explicitly behaves exactly the same: it reads local
/// sources itself, on its I/O lane, so they never wait behind downloads.
public struct DataLoader: ImageDataLoading {
    /// Loads every non-file URL; nil (the default) downloads `http(s)` URLs
    /// as the type's documentation says and refuses other schemes (`.unsupportedSource`).
    public var remoteLoader: (any ImageDataLoading)?

    /// The downloader of the pipeline whose configuration holds this loader
    /// (`ImagePipeline.configuration.dataLoader`); nil for a loader made by
    /// its user, which downloads with `sharedDownloader`.
    var downloader: HTTPDataLoader?

    /// A loader for local sources that hands other URLs to `remoteLoader`.
    public init(remoteLoader: (any ImageDataLoading)? = nil) {
        self.remoteLoader = remoteLoader
    }

    /// The remote loader's counters; without one, the downloader's: the
    /// pipeline's own for the loader in `ImagePipeline.configuration`
    /// (so they are that pipeline's), the shared one for a loader used on its own.
    public var networkMetrics: HTTPLoaderMetrics? {
        (remoteLoader ?? downloader ?? Self.sharedDownloader).networkMetrics
    }

    /// The bytes of `source`: a checked file for libvips to read, the data itself, or the remote loader's result.
    public func loadData(for source: ImageSource) async throws(VipsError) -> ImageData {
        if Task.isCancelled { throw .cancelled(source.description) }
        if source.isLocal { return try Self.local(source) }
        if let remoteLoader {
            do {
                return try await remoteLoader.loadData(for: source)
            } catch {
                throw VipsError(loading: error, source: source.description)
            }
        }
        guard case .url(let url) = source.location, let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else {
            let scheme: String
            if case .url(let url) = source.location, let name = url.scheme {
                scheme = "'\(name)' URLs"
            } else {
                scheme = "URLs without a scheme"
            }
            throw VipsError(.unsupportedSource, "no loader for \(scheme) is configured", source: source.description)
        }
        return try await (downloader ?? Self.sharedDownloader).loadData(for: source)
    }

    /// The downloader of a `DataLoader` without a `remoteLoader` used outside
    /// a pipeline: made on first use, with the default configuration.
    static let sharedDownloader = HTTPDataLoader()

    /// A local source (a file, a `file://` URL or data) as `ImageData`; blocking (a file is opened and checked).
    static func local(_ source: ImageSource) throws(VipsError) -> ImageData {
        switch source.location {
        case .data(let data, _):
            return ImageData(input: .data(data), byteCount: data.count)
        case .file, .url:
            guard let path = source.filePath else {
                throw VipsError(.unsupportedSource, "not a local source", source: source.description)
            }
            return try file(at: path)
        }
    }

    /// Checks that `path` is a readable regular file and returns it for the decoder.
    static func file(at path: String) throws(VipsError) -> ImageData {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw VipsError.file(errno, "cannot open \(path)") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw VipsError.file(errno, "cannot stat \(path)") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw VipsError(.io, "\(path) is not a regular file") }
        // The first bytes, read here once, so the decoder need not open the file to sniff it.
        var prefix = [UInt8](repeating: 0, count: 32)
        let count = prefix.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 32, 0) }
        return ImageData(
            input: .file(path), byteCount: Int(info.st_size), leadingBytes: count > 0 ? Array(prefix.prefix(count)) : []
        )
    }
}

extension VipsError {
    /// A failed file operation's `errno` as its kind: `.fileNotFound`,
    /// `.permissionDenied` or `.io`, with the system's reason.
    static func file(_ code: Int32, _ what: String) -> VipsError {
        let kind: Kind
        switch code {
        case ENOENT, ENOTDIR: kind = .fileNotFound
        case EACCES, EPERM: kind = .permissionDenied
        default: kind = .io
        }
        return VipsError(kind, "\(what): \(String(cString: strerror(code)))")
    }
}
