import Foundation

/// A fast streaming 64-bit checksum of a cache entry's bytes, to detect a body
/// truncated or overwritten on disk before it is served.
///
/// Mixes 8-byte words with a multiply and an xor-shift (each step is a
/// bijection of the state, so any single changed word always changes the
/// result) and finishes with the MurmurHash3 avalanche. Not cryptographic:
/// it guards against accidents, not attackers.
struct ContentChecksum: Sendable {
    private var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    private var pending: UInt64 = 0
    private var pendingCount = 0
    private var length: UInt64 = 0

    /// Bytes read from each of the three windows (start, middle, end) of a sampled checksum.
    static let sampleWindow = 64 * 1024

    init() {}

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        let count = bytes.count
        var index = 0
        while pendingCount != 0, index < count {
            takeByte(bytes[index])
            index += 1
        }
        while index + 8 <= count {
            mix(UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)))
            index += 8
        }
        while index < count {
            takeByte(bytes[index])
            index += 1
        }
        length &+= UInt64(count)
    }

    /// The checksum of everything passed to `update`, as 16 hex digits.
    func finalize() -> String {
        var copy = self
        if copy.pendingCount > 0 { copy.mix(copy.pending) }
        copy.mix(copy.length)
        var h = copy.state
        h ^= h >> 33
        h = h &* 0xFF51_AFD7_ED55_8CCD
        h ^= h >> 33
        h = h &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 33
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    private mutating func takeByte(_ byte: UInt8) {
        pending |= UInt64(byte) << UInt64(8 * pendingCount)
        pendingCount += 1
        if pendingCount == 8 {
            mix(pending)
            pending = 0
            pendingCount = 0
        }
    }

    private mutating func mix(_ word: UInt64) {
        state = (state ^ word) &* 0x9FB2_1C65_1E98_DF25
        state ^= state >> 29
    }

    // MARK: - Files

    /// The checksum of the whole open file `fd` (read from offset 0), or nil on a read error.
    static func ofFile(_ fd: Int32, size: Int) -> String? {
        var checksum = ContentChecksum()
        guard checksum.add(fd, from: 0, count: size) else { return nil }
        return checksum.finalize()
    }

    /// The checksum of three windows of the file (start, middle, end): a cheap
    /// check for large entries, where hashing every byte on each read would cost
    /// as much as the read itself.
    static func sampledOfFile(_ fd: Int32, size: Int) -> String? {
        var checksum = ContentChecksum()
        let window = min(sampleWindow, size)
        let middle = max(0, size / 2 - window / 2)
        for offset in [0, middle, size - window] {
            guard checksum.add(fd, from: offset, count: window) else { return nil }
        }
        return checksum.finalize()
    }

    /// Adds `count` bytes of `fd` from `offset`; false when the file is shorter or unreadable.
    private mutating func add(_ fd: Int32, from offset: Int, count: Int) -> Bool {
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
