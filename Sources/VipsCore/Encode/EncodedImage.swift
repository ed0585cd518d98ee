import Foundation

/// Encoded image bytes with their format and pixel size.
public struct EncodedImage: Sendable {
    /// The encoded file.
    public let data: Data
    /// The format of `data`.
    public let format: OutputFormat
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int

    /// Encoded bytes of `format`, `width`×`height` pixels.
    public init(data: Data, format: OutputFormat, width: Int, height: Int) {
        self.data = data
        self.format = format
        self.width = width
        self.height = height
    }

    /// Writes the bytes to `url` atomically: to a temporary file in the same
    /// folder, then renamed over `url`, so a reader never sees half a file
    /// and a failure leaves no temporary file behind.
    ///
    /// - Throws: `.invalidArgument` for a non-file URL; `.fileNotFound`,
    ///   `.permissionDenied` or `.io` when writing fails.
    public func write(to url: URL) throws(VipsError) {
        guard url.isFileURL else { throw VipsError(.invalidArgument, "\(url): can only write to a file URL") }
        let folder = url.deletingLastPathComponent()
        let temporary = folder.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
        do {
            try data.write(to: temporary, options: [.withoutOverwriting])
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw Self.fileError(error, url)
        }
        guard rename(temporary.path, url.path) == 0 else {
            let code = errno
            try? FileManager.default.removeItem(at: temporary)
            let kind: VipsError.Kind =
                code == EACCES || code == EPERM ? .permissionDenied : code == ENOENT ? .fileNotFound : .io
            throw VipsError(
                kind, "\(url.path): cannot move the written file into place: \(String(cString: strerror(code)))")
        }
    }

    private static func fileError(_ error: any Error, _ url: URL) -> VipsError {
        let code = (error as NSError).code
        let kind: VipsError.Kind
        switch code {
        case NSFileWriteNoPermissionError, NSFileReadNoPermissionError: kind = .permissionDenied
        case NSFileNoSuchFileError, NSFileReadNoSuchFileError: kind = .fileNotFound
        default: kind = .io
        }
        return VipsError(kind, "\(url.path): cannot write: \(error.localizedDescription)")
    }
}
