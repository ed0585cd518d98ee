/// Turns a source key into a file name: 32 hex digits of FNV-1a 128.
///
/// The key (a URL or a path) never becomes part of a path itself, so no key
/// can escape the cache folder or hit file-name limits. FNV is not a
/// cryptographic hash: a collision is possible in principle, so every entry
/// also stores its full key and a lookup whose key differs is a miss.
enum DiskCacheKeyHash {
    private static let offsetBasis: UInt128 = 0x6c62272e_07bb0142_62b82175_6295c58d
    private static let prime: UInt128 = 0x00000000_01000000_00000000_0000013B

    /// The file-name stem for `key`.
    static func fileStem(for key: String) -> String {
        var hash = offsetBasis
        for byte in key.utf8 {
            hash ^= UInt128(byte)
            hash = hash &* prime
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 32 - hex.count) + hex
    }
}
