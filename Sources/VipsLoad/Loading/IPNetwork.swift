/// A block of addresses in CIDR notation (`10.1.0.0/16`, `fd00::/8`, or one
/// address), for the exceptions of a `SourceAddressPolicy`.
public struct IPNetwork: Sendable, Hashable, CustomStringConvertible {
    /// The block's first address (host bits cleared).
    public let address: IPAddress
    /// How many leading bits are fixed: 0–32 for IPv4, 0–128 for IPv6.
    public let prefixLength: Int

    /// The block of `address` with its first `prefixLength` bits; nil when the
    /// length does not fit the family.
    public init?(address: IPAddress, prefixLength: Int) {
        let bits = address.bytes.count * 8
        guard (0...bits).contains(prefixLength) else { return nil }
        var bytes = address.bytes
        for index in bytes.indices {
            let kept = max(0, min(8, prefixLength - index * 8))
            bytes[index] &= kept == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - kept))
        }
        guard let first = IPAddress(bytes: bytes) else { return nil }
        self.address = first
        self.prefixLength = prefixLength
    }

    /// Parses `a.b.c.d/n`, `x:y::/n` or a single address (a /32 or /128); nil otherwise.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(String(parts[0])) else { return nil }
        var length = address.bytes.count * 8
        if parts.count == 2 {
            guard let given = Int(parts[1]), parts[1].allSatisfy(\.isASCII) else { return nil }
            length = given
        }
        self.init(address: address, prefixLength: length)
    }

    /// Whether `candidate` lies in the block. An IPv4 block also holds the IPv6
    /// forms that carry one of its addresses (`::ffff:10.1.2.3` is in `10.0.0.0/8`).
    public func contains(_ candidate: IPAddress) -> Bool {
        var bytes = candidate.bytes
        if bytes.count != address.bytes.count {
            guard address.isIPv4, let embedded = candidate.embeddedIPv4 else { return false }
            bytes = embedded.bytes
        }
        for index in bytes.indices {
            let kept = max(0, min(8, prefixLength - index * 8))
            if kept == 0 { break }
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - kept))
            if bytes[index] & mask != address.bytes[index] { return false }
        }
        return true
    }

    /// `address/prefixLength`.
    public var description: String { "\(address)/\(prefixLength)" }
}
