/// A hash of text that is the same on every machine, process and run (Swift's
/// `Hasher` is seeded per process): FNV-1a over the UTF-8 bytes, finished with
/// SplitMix64's mixer so that every bit, and so `value % n`, is well spread.
///
/// Used for `--shard` membership and the `%h` name placeholder; changing it
/// would move inputs between shards and rename outputs, so it is fixed.
enum StableHash {
    static func value(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        hash ^= hash >> 30
        hash &*= 0xbf58_476d_1ce4_e5b9
        hash ^= hash >> 27
        hash &*= 0x94d0_49bb_1331_11eb
        hash ^= hash >> 31
        return hash
    }

    /// The first `digits` (at most 16) lowercase hex digits of `value(text)`.
    static func hex(_ text: String, digits: Int) -> String {
        let full = String(value(text), radix: 16)
        let padded = String(repeating: "0", count: 16 - full.count) + full
        return String(padded.prefix(max(1, min(16, digits))))
    }
}
