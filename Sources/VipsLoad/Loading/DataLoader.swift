import Foundation

/// The data-loading step: files, in-memory data and `file://` URLs, and
/// every other URL through `remoteLoader`.
///
/// Files are not read here: the returned `ImageData` names the file and
/// libvips reads it incrementally while decoding, so a large file never sits
/// whole in memory. Other URL schemes go to `remoteLoader` when one is set;
/// without it they fail with `.unsupportedSource`. A pipeline made without a
/// `dataLoader` uses `DataLoader(remoteLoader: HTTPDataLoader(...))`.
public struct DataLoader: ImageDataLoading {
    /// Loads every non-file URL; nil (the default) refuses them.
    public var remoteLoader: (any ImageDataLoading)?

    public init(remoteLoader: (any ImageDataLoading)? = nil) {
        self.remoteLoader = remoteLoader
    }

    /// The remote loader's counters.
    public var networkMetrics: HTTPLoaderMetrics? { remoteLoader?.networkMetrics }

    /// The bytes of `source`: a checked file for libvips to read, the data itself, or the remote loader's result.
    public func loadData(for source: ImageSource) async throws -> ImageData {
        try Task.checkCancellation()
        switch source {
        case .data(let data, _):
            return ImageData(input: .data(data), byteCount: data.count)
        case .file(let path):
            return try Self.file(at: path)
        case .url(let url) where url.isFileURL:
            return try Self.file(at: url.path)
        case .url(let url):
            guard let remoteLoader else {
                throw VipsError(.unsupportedSource, "\(url.absoluteString): no loader for \(url.scheme.map { "'\($0)' URLs" } ?? "URLs without a scheme") is configured")
            }
            return try await remoteLoader.loadData(for: source)
        }
    }

    /// Checks that `path` is a readable regular file and returns it for the decoder.
    static func file(at path: String) throws(VipsError) -> ImageData {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw VipsError(.io, "cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw VipsError(.io, "cannot stat \(path): \(String(cString: strerror(errno)))") }
        guard (info.st_mode & S_IFMT) == S_IFREG else { throw VipsError(.io, "\(path) is not a regular file") }
        return ImageData(input: .file(path), byteCount: Int(info.st_size))
    }
}
