import Foundation

/// A new file that bytes are appended to as they arrive, counted on the way,
/// with its first bytes kept for format sniffing.
///
/// Writing does little else: a download's bytes are written on its loader's
/// one transport thread (`HTTPTransport`), so any work here delays every
/// transfer of that loader. The only extra is the cache entry's checksum
/// (XXH3, gigabytes per second), so a body is checksummed once, as it
/// streams, and never read back whole.
///
/// Deletes its file when released, unless `finish()` handed the file over.
final class StreamingFileWriter: Sendable {
    /// The file's path.
    let path: String

    /// What was written, once the file is complete.
    struct Summary: Sendable {
        let byteCount: Int
        /// Up to 32 leading bytes.
        let prefix: [UInt8]
        /// `ContentChecksum` of every byte written (nil when none could be kept).
        let checksum: String?
    }

    private struct State {
        var fd: Int32
        var byteCount = 0
        var prefix: [UInt8] = []
        var checksum = ContentChecksum()
        var handedOver = false
        /// Bytes reserved from `budget` and not yet given back.
        var reserved = 0
    }

    private let state: LockedState<State>
    /// Bounds the bytes this and other writers have in flight; nil for no bound.
    private let budget: ByteBudget?

    /// Creates a new file named `<namePrefix><random>` in `directory` (which
    /// must exist); with a `budget`, every write first reserves its bytes there.
    init(directory: String, namePrefix: String, budget: ByteBudget? = nil) throws(VipsError) {
        self.budget = budget
        var fd: Int32 = -1
        var candidate = ""
        for _ in 0..<8 {
            candidate = directory + "/" + namePrefix + Self.randomName()
            // Readable too, so the bytes can be copied elsewhere through this
            // descriptor even after the file's name has been deleted.
            fd = open(candidate, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else {
            throw VipsError(
                .io, "cannot create the temporary file: \(String(cString: strerror(errno)))", source: candidate)
        }
        path = candidate
        state = LockedState(State(fd: fd))
    }

    deinit {
        let reserved = state.withLock { state -> Int in
            if state.fd >= 0 { close(state.fd) }
            if !state.handedOver { unlink(path) }
            return state.reserved
        }
        budget?.release(reserved)
    }

    /// Bytes written so far.
    var byteCount: Int { state.withLock { $0.byteCount } }

    /// The first (up to 32) bytes written, for format sniffing.
    var leadingBytes: [UInt8] { state.withLock { $0.prefix } }

    /// Appends `bytes`.
    func write(_ bytes: UnsafeRawBufferPointer) throws(VipsError) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        if let budget {
            guard budget.reserve(bytes.count) else {
                throw VipsError(.tooLarge, "writes in progress would pass the cache's limit of \(budget.limit) bytes")
            }
            state.withLock { $0.reserved += bytes.count }
        }
        try state.withLock { (state: inout State) throws(VipsError) in
            guard state.fd >= 0 else { throw VipsError(.io, "write after close", source: path) }
            var offset = 0
            while offset < bytes.count {
                let n = Foundation.write(state.fd, base + offset, bytes.count - offset)
                if n < 0, errno == EINTR { continue }
                guard n > 0 else {
                    throw VipsError(
                        .io, "cannot write the temporary file: \(String(cString: strerror(errno)))", source: path)
                }
                offset += n
            }
            if state.prefix.count < 32 {
                state.prefix.append(contentsOf: bytes.prefix(32 - state.prefix.count))
            }
            state.checksum.update(bytes)
            state.byteCount += bytes.count
        }
    }

    /// Appends `data`.
    func write(_ data: Data) throws(VipsError) {
        let result: Result<Void, VipsError> = data.withUnsafeBytes { bytes in
            do throws(VipsError) { try write(bytes); return .success(()) } catch { return .failure(error) }
        }
        try result.get()
    }

    /// Appends the bytes written to this file so far to `other` (after a
    /// failed write, only the bytes counted as written). Reads through the
    /// open descriptor, so it works after the file's name was deleted; not
    /// after `finish()`.
    func copyWritten(to other: StreamingFileWriter) throws(VipsError) {
        let (fd, count) = state.withLock { ($0.fd, $0.byteCount) }
        guard fd >= 0 else { throw VipsError(.io, "copy after close", source: path) }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var offset = 0
        while offset < count {
            let want = min(buffer.count, count - offset)
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(offset)) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else {
                throw VipsError(
                    .io,
                    "cannot read back the temporary file: "
                        + (n < 0 ? String(cString: strerror(errno)) : "shorter than written"), source: path)
            }
            let written: Result<Void, VipsError> = buffer.withUnsafeBytes { bytes in
                do throws(VipsError) {
                    try other.write(UnsafeRawBufferPointer(rebasing: bytes[0..<n]))
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            try written.get()
            offset += n
        }
    }

    /// Whether the file's name has been deleted while it was open (its
    /// folder removed): its bytes are then reachable only through this writer.
    var isUnlinked: Bool {
        state.withLock { state in
            guard state.fd >= 0 else { return false }
            var info = stat()
            return fstat(state.fd, &info) == 0 && info.st_nlink == 0
        }
    }

    /// Closes the file and hands it over to the caller, who now owns (and deletes) it.
    ///
    /// Bytes reserved from a budget stay reserved until this writer is
    /// released (or `discard()`ed): the file is still in its temporary
    /// folder while the caller moves it, so it still counts against the
    /// writes in progress, and another writer cannot fill that room first.
    func finish() throws(VipsError) -> Summary {
        try state.withLock { (state: inout State) throws(VipsError) -> Summary in
            if state.fd >= 0 {
                let status = close(state.fd)
                state.fd = -1
                guard status == 0 else {
                    throw VipsError(
                        .io, "cannot close the temporary file: \(String(cString: strerror(errno)))", source: path)
                }
            }
            state.handedOver = true
            return Summary(byteCount: state.byteCount, prefix: state.prefix, checksum: state.checksum.finalize())
        }
    }

    /// Returns the reserved bytes: the file is gone.
    private func giveBackBudget() {
        guard let budget else { return }
        let reserved = state.withLock { state -> Int in
            defer { state.reserved = 0 }
            return state.reserved
        }
        budget.release(reserved)
    }

    /// Closes and deletes the file now.
    func discard() {
        state.withLock { state in
            if state.fd >= 0 { close(state.fd) }
            state.fd = -1
            if !state.handedOver { unlink(path) }
            state.handedOver = true
        }
        giveBackBudget()
    }

    /// 16 random hex digits.
    static func randomName() -> String {
        let hex = String(UInt64.random(in: .min ... .max), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
