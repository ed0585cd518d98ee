import CTIFF

/// A TIFF opened by libtiff over bytes in memory (`TIFFClientOpenExt`), with
/// error and warning handlers of its own (`TIFFOpenOptions`): libtiff's
/// global handlers are process-wide and not thread-safe (libvips installs
/// its own), so each open file collects its own messages instead.
final class TIFFMemoryFile {
    /// libtiff's handle.
    let tiff: OpaquePointer
    /// What libtiff reads from and reports to.
    private let context: Context

    /// The first error libtiff reported since `clearError()`.
    var firstError: String? { context.firstError }
    /// Warnings libtiff reported.
    var warnings: Int { context.warnings }

    /// The bytes libtiff reads, its read position and its messages.
    private final class Context {
        let bytes: UnsafeRawBufferPointer
        var position = 0
        var firstError: String?
        var warnings = 0
        init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }
    }

    /// Opens `bytes` (which must outlive the file) with libtiff; libtiff's reason when it refuses them.
    static func open(
        _ bytes: UnsafeRawBufferPointer, maxSingleAllocation: Int
    ) -> Result<TIFFMemoryFile, VipsError> {
        let file = Context(bytes: bytes)
        guard let options = TIFFOpenOptionsAlloc() else {
            return .failure(VipsError(.tooLarge, "libtiff: out of memory"))
        }
        defer { TIFFOpenOptionsFree(options) }
        let context = Unmanaged.passUnretained(file).toOpaque()
        TIFFOpenOptionsSetErrorHandlerExtR(options, Self.errorHandler, context)
        TIFFOpenOptionsSetWarningHandlerExtR(options, Self.warningHandler, context)
        TIFFOpenOptionsSetMaxSingleMemAlloc(options, tmsize_t(maxSingleAllocation))
        // "rm": read only, no memory mapping (reads go through `read`, bounded by the bytes).
        guard
            let handle = TIFFClientOpenExt(
                "memory", "rm", context, Self.read, Self.write, Self.seek, Self.close, Self.size, nil, nil, options)
        else {
            return .failure(VipsError(.corruptData, file.firstError ?? "libtiff cannot open the file"))
        }
        return .success(TIFFMemoryFile(tiff: handle, context: file))
    }

    private init(tiff: OpaquePointer, context: Context) {
        self.tiff = tiff
        self.context = context
    }

    deinit {
        TIFFClose(tiff)
    }

    /// Clears the collected error before a call whose own errors are wanted.
    func clearError() { context.firstError = nil }

    private static func file(_ context: UnsafeMutableRawPointer?) -> Context? {
        context.map { Unmanaged<Context>.fromOpaque($0).takeUnretainedValue() }
    }

    private static func message(_ format: UnsafePointer<CChar>?, _ arguments: CVaListPointer?) -> String {
        guard let format, let arguments else { return "libtiff gave no reason" }
        var buffer = [CChar](repeating: 0, count: 512)
        let written = vsnprintf(&buffer, buffer.count, format, arguments)
        let length = min(max(0, Int(written)), buffer.count - 1)
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static let errorHandler: TIFFErrorHandlerExtR = { _, context, module, format, arguments in
        guard let file = file(context) else { return 1 }
        if file.firstError == nil {
            let text = message(format, arguments)
            file.firstError = module.map { "\(String(cString: $0)): \(text)" } ?? text
        }
        return 1 // handled: libtiff's global handler (libvips') is not called
    }

    private static let warningHandler: TIFFErrorHandlerExtR = { _, context, _, _, _ in
        file(context)?.warnings += 1
        return 1
    }

    private static let read: TIFFReadWriteProc = { context, buffer, count in
        guard let file = file(context), let buffer, count > 0 else { return 0 }
        let available = max(0, file.bytes.count - file.position)
        let length = min(Int(count), available)
        if length > 0, let base = file.bytes.baseAddress {
            buffer.copyMemory(from: base + file.position, byteCount: length)
        }
        file.position += length
        return tmsize_t(length)
    }

    private static let write: TIFFReadWriteProc = { _, _, _ in 0 }

    private static let seek: TIFFSeekProc = { context, offset, whence in
        guard let file = file(context) else { return toff_t.max }
        let base: Int
        switch whence {
        case SEEK_SET: base = 0
        case SEEK_CUR: base = file.position
        case SEEK_END: base = file.bytes.count
        default: return toff_t.max
        }
        // A seek past the end is allowed (reads there return nothing); a negative or overflowing one is not.
        let (target, overflow) = base.addingReportingOverflow(Int(truncatingIfNeeded: offset))
        guard !overflow, target >= 0 else { return toff_t.max }
        file.position = target
        return toff_t(target)
    }

    private static let close: TIFFCloseProc = { _ in 0 }

    private static let size: TIFFSizeProc = { context in
        toff_t(file(context)?.bytes.count ?? 0)
    }
}
