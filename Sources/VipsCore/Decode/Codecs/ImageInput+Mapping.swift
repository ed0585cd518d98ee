import Foundation

extension ImageInput {
    /// The input's bytes for a direct codec: in-memory data as it is, a file
    /// mapped (not read: pages are faulted in as the codec reads them). Nil
    /// when the file cannot be mapped; libvips' path then reads and reports it.
    func mappedBytes() -> Data? {
        switch self {
        case .data(let bytes):
            return bytes
        case .file(let path):
            return try? Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped)
        }
    }

    /// The size of a file input from `stat`, nil for data or when it cannot be read.
    var fileByteCount: Int? {
        guard case .file(let path) = self else { return nil }
        var status = stat()
        return stat(path, &status) == 0 ? Int(status.st_size) : nil
    }

    /// Runs `body` over the input's bytes (a file mapped), for the decoders
    /// that are their format's only decoder: a file that cannot be mapped is
    /// an `.io` error here, since no libvips loader would read it instead.
    func withMappedBytes<R>(
        label: String, _ body: (UnsafeRawBufferPointer) throws(VipsError) -> R
    ) throws(VipsError) -> R {
        guard let data = mappedBytes() else { throw VipsError(.io, "\(label): cannot read the file") }
        return try data.withBytes(body)
    }
}

extension Data {
    /// Runs `body` over the bytes, keeping its typed error (`withUnsafeBytes` only rethrows `any Error`).
    func withBytes<R>(_ body: (UnsafeRawBufferPointer) throws(VipsError) -> R) throws(VipsError) -> R {
        let result: Result<R, VipsError> = withUnsafeBytes { raw in
            do throws(VipsError) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}
