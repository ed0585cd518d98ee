import CVipsShim
import Foundation

/// Where encoded image bytes come from: memory or a file on disk.
public enum ImageInput: Sendable, Hashable {
    /// Encoded bytes in memory.
    case data(Data)
    /// A file path; libvips reads it incrementally, so large files never sit whole in memory.
    case file(String)

    /// A short description for messages: the path, or the byte count.
    public var label: String {
        switch self {
        case .data(let data): return "<\(data.count) bytes>"
        case .file(let path): return path
        }
    }

    /// The input's size in bytes and its first bytes (for format sniffing).
    func sizeAndPrefix(_ prefixLength: Int = 32) throws(VipsError) -> (size: Int, prefix: [UInt8]) {
        switch self {
        case .data(let data):
            return (data.count, Array(data.prefix(prefixLength)))
        case .file(let path):
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            // Errors about the file carry its path as their `source`, so a caller
            // that handed over a stand-in (a downloaded file) can address them
            // to what the file stands for.
            guard fd >= 0 else {
                throw VipsError(.io, "cannot open: \(String(cString: strerror(errno)))", source: path)
            }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0 else {
                throw VipsError(.io, "cannot stat: \(String(cString: strerror(errno)))", source: path)
            }
            if (info.st_mode & S_IFMT) == S_IFDIR { throw VipsError(.io, "is a directory", source: path) }
            var buffer = [UInt8](repeating: 0, count: prefixLength)
            let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, prefixLength, 0) }
            guard count >= 0 else {
                throw VipsError(.io, "cannot read: \(String(cString: strerror(errno)))", source: path)
            }
            return (Int(info.st_size), Array(buffer.prefix(count)))
        }
    }

    /// Runs `body` with a libvips source over the input. For `.data` the source
    /// points at the bytes without copying; it must not escape `body`.
    func withSource<R>(_ body: (UnsafeMutablePointer<VipsSource>) throws(VipsError) -> R) throws(VipsError) -> R {
        switch self {
        case .file(let path):
            guard let source = libvips.vips_source_new_from_file(path) else {
                throw VipsError(
                    .io, "cannot open: \(VipsRuntime.takeErrorMessage(default: "unknown error"))", source: path)
            }
            defer { g_object_unref(source) }
            return try body(source)
        case .data(let data):
            let result: Result<R, VipsError> = data.withUnsafeBytes { raw in
                guard let base = raw.baseAddress, let source = libvips.vips_source_new_from_memory(base, raw.count)
                else {
                    return .failure(VipsError(.internal, "cannot wrap \(raw.count) bytes as a libvips source"))
                }
                defer { g_object_unref(source) }
                do throws(VipsError) { return .success(try body(source)) } catch { return .failure(error) }
            }
            return try result.get()
        }
    }
}
