import CXXHash

/// xxHash's XXH3 (libxxhash), the maintained non-cryptographic hash behind the
/// disk cache's content checksums and file names: the one place Swift calls it.
///
/// XXH3 was chosen over GLib's `GChecksum` (MD5, SHA-1, SHA-2) because the
/// cache checks entries' bytes on every read. Measured on the project's
/// (shared, loaded) build machine, streaming 64 MiB in 256 KiB pieces, in
/// two runs: XXH3-64 was 12–17× as fast as `GChecksum` MD5 and 37–46× as
/// fast as SHA-256, and 1.6–1.8× the project's former hand-written checksum;
/// a 100-byte key hashed with XXH3-128 in 57–90 ns, with SHA-256 in 2.8–6 µs.
/// Neither guards against an attacker; the cache needs only to catch
/// accidents (a truncated or overwritten body), and it stores every entry's
/// full key beside the key's hash.
package enum XXH3 {
    /// The 128-bit XXH3 hash of `bytes` (seed 0), as 32 lowercase hex digits, high half first.
    package static func hex128<Bytes: Collection<UInt8>>(of bytes: Bytes) -> String {
        let hash =
            bytes.withContiguousStorageIfAvailable { XXH3_128bits($0.baseAddress, $0.count) }
            ?? Array(bytes).withUnsafeBufferPointer { XXH3_128bits($0.baseAddress, $0.count) }
        return hex(hash.high64) + hex(hash.low64)
    }

    /// `value` as 16 lowercase hex digits.
    package static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}

/// A streaming XXH3-64 hash (seed 0): bytes are added in any number of
/// pieces and the digest is the hash of them all, read at any point.
///
/// Not thread-safe: its owner guards it (the disk cache's writers hold it
/// under their lock).
package final class XXH3Stream {
    private let state: OpaquePointer

    /// A hash of no bytes yet; nil when its state cannot be allocated.
    package init?() {
        guard let state = XXH3_createState() else { return nil }
        self.state = state
        XXH3_64bits_reset(state)
    }

    deinit {
        XXH3_freeState(state)
    }

    /// Adds `bytes`.
    package func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        XXH3_64bits_update(state, base, bytes.count)
    }

    /// The hash of every byte added so far (more can still be added).
    package var digest: UInt64 { XXH3_64bits_digest(state) }
}
