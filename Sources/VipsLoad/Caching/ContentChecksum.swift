import Foundation

/// The streaming 64-bit checksum of a cache entry's bytes (XXH3-64, through
/// libxxhash: `XXH3Stream`), to detect a body truncated or overwritten on disk
/// before it is served. Not cryptographic: it guards against accidents, not
/// attackers.
final class ContentChecksum {
    private let stream: XXH3Stream?

    /// Bytes read from each of the three windows (start, middle, end) of a sampled checksum.
    static let sampleWindow = 64 * 1024

    init() {
        stream = XXH3Stream()
    }

    func update(_ bytes: UnsafeRawBufferPointer) {
        stream?.update(bytes)
    }

    /// The checksum of everything passed to `update`, as 16 hex digits; nil
    /// when the hash state could not be allocated (then nothing verifies).
    func finalize() -> String? {
        stream.map { XXH3.hex($0.digest) }
    }

    // MARK: - Files

    /// The checksum of the whole open file `fd` (read from offset 0), or nil on a read error.
    static func ofFile(_ fd: Int32, size: Int) -> String? {
        let checksum = ContentChecksum()
        guard checksum.add(fd, from: 0, count: size) else { return nil }
        return checksum.finalize()
    }

    /// The checksum of three windows of the file (start, middle, end): a cheap
    /// check for large entries, where hashing every byte on each read would cost
    /// as much as the read itself.
    static func sampledOfFile(_ fd: Int32, size: Int) -> String? {
        let checksum = ContentChecksum()
        let window = min(sampleWindow, size)
        let middle = max(0, size / 2 - window / 2)
        for offset in [0, middle, size - window] {
            guard checksum.add(fd, from: offset, count: window) else { return nil }
        }
        return checksum.finalize()
    }

    /// Adds `count` bytes of `fd` from `offset`; false when the file is shorter or unreadable.
    private func add(_ fd: Int32, from offset: Int, count: Int) -> Bool {
        let bufferSize = 256 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var done = 0
        while done < count {
            let want = min(bufferSize, count - done)
            let n = pread(fd, buffer.baseAddress, want, off_t(offset + done))
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { return false }
            update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            done += n
        }
        return true
    }
}
