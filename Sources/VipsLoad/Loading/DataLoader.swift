import Foundation

/// The data-loading step: files, in-memory data and `file://` URLs, and
/// every other URL through `remoteLoader`.
///
/// Files are not read here: the returned `ImageData` names the file and
/// libvips reads it incrementally while decoding, so a large file never sits
/// whole in memory. Other URL schemes go to `remoteLoader` when one is set;
/// without it they fail with `.unsupportedSource`. A pipeline made without a
/// `dataLoader` uses `DataLoader(remoteLoader: HTTPDataLoader(...))`, and
/// reads local sources itself on its I/O lane.
public struct DataLoader: ImageDataLoading {
    /// Loads every non-file URL; nil (the default) refuses them.
    public var remoteLoader: (any ImageDataLoading)?

    /// A loader for local sources that hands other URLs to `remoteLoader`.
    public init(remoteLoader: (any ImageDataLoading)? = nil) {
        self.remoteLoader = remoteLoader
    }

    /// The remote loader's counters.
    public var networkMetrics: HTTPLoaderMetrics? { remoteLoader?.networkMetrics }

    /// The bytes of `source`: a checked file for libvips to read, the data itself, or the remote loader's result.
    public func loadData(for source: ImageSource) async throws -> ImageData {
        try Task.checkCancellation()
        if source.isLocal { return try Self.local(source) }
        guard let remoteLoader else {
            let scheme: String
            if case .url(let url) = source.location, let name = url.scheme {
                scheme = "'\(name)' URLs"
            } else {
                scheme = "URLs without a scheme"
            }
            throw VipsError(.unsupportedSource, "\(source): no loader for \(scheme) is configured")
        }
        return try await remoteLoader.loadData(for: source)
    }

    /// A local source (a file, a `file://` URL or data) as `ImageData`; blocking (a file is opened and checked).
    static func local(_ source: ImageSource) throws(VipsError) -> ImageData {
        switch source.location {
        case .data(let data, _):
            return ImageData(input: .data(data), byteCount: data.count)
        case .file, .url:
            guard let path = source.filePath else {
                throw VipsError(.unsupportedSource, "\(source) is not a local source")
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
