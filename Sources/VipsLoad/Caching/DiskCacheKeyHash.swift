/// Turns a source key into a file name: 32 hex digits of its 128-bit XXH3
/// hash (`XXH3`, libxxhash).
///
/// The key (a URL or a path) never becomes part of a path itself, so no key
/// can escape the cache folder or hit file-name limits. XXH3 is not a
/// cryptographic hash: a collision is possible in principle, so every entry
/// also stores its full key and a lookup whose key differs is a miss.
enum DiskCacheKeyHash {
    /// The file-name stem for `key`.
    static func fileStem(for key: String) -> String {
        XXH3.hex128(of: key.utf8)
    }
}
