import Foundation

/// An IPv4 or IPv6 address, and the kind of network it belongs to.
///
/// The classification is what an SSRF policy needs (`SourceAddressPolicy`):
/// whether connecting to the address could reach this machine, its local
/// network or a provider's internal services rather than the public
/// Internet. It depends on the address alone, not on how a connection is
/// made, so any transport can use it.
///
/// IPv6 forms that carry an IPv4 address are classified by that address:
/// IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), IPv4-translated
/// (`::ffff:0:a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) and 6to4 (`2002:aabb:ccdd::`).
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// The 4 (IPv4) or 16 (IPv6) bytes of the address, in network order.
    public let bytes: [UInt8]

    /// What an address is for, as far as the question "may a server connect to it
    /// on a client's behalf" goes.
    public enum Scope: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// Global unicast: the public Internet.
        case `public`
        /// This machine: 127.0.0.0/8, ::1.
        case loopback
        /// Private networks: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16; IPv6 unique
        /// local fc00::/7 and the deprecated site-local fec0::/10.
        case privateNetwork = "private"
        /// Link-local: 169.254.0.0/16 (where cloud metadata services answer), fe80::/10.
        case linkLocal = "link-local"
        /// Carrier-grade NAT's shared address space, 100.64.0.0/10.
        case sharedAddressSpace = "shared"
        /// "This host" or "any": 0.0.0.0/8, ::.
        case unspecified
        /// Multicast: 224.0.0.0/4, ff00::/8.
        case multicast
        /// The limited broadcast address 255.255.255.255.
        case broadcast
        /// Special-purpose and unallocated space: protocol assignments, documentation
        /// and benchmarking ranges, 240.0.0.0/4, discard-only and Teredo prefixes,
        /// and every IPv6 address outside the global unicast 2000::/3.
        case reserved

        /// The scope's name as logs and errors print it ("private", "link-local"…).
        public var description: String { rawValue }
    }

    /// The address in `bytes` (4 for IPv4, 16 for IPv6); nil for another length.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = Array(bytes)
    }

    /// Parses a dotted-quad IPv4 address or an IPv6 address (brackets allowed,
    /// as in URLs), strictly: no octal, hex or shortened IPv4 forms. Nil otherwise.
    public init?(_ text: String) {
        var literal = Substring(text)
        if literal.hasPrefix("["), literal.hasSuffix("]") { literal = literal.dropFirst().dropLast() }
        var v4 = in_addr()
        if inet_pton(AF_INET, String(literal), &v4) == 1 {
            self.bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, String(literal), &v6) == 1 {
            self.bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        return nil
    }

    /// Whether this is an IPv4 address (4 bytes).
    public var isIPv4: Bool { bytes.count == 4 }

    /// The IPv4 address an IPv6 address carries (mapped, compatible, translated,
    /// NAT64 or 6to4 form); nil for IPv4 addresses and other IPv6 addresses.
    public var embeddedIPv4: IPAddress? {
        guard bytes.count == 16 else { return nil }
        let b = bytes
        let zeros = { (range: Range<Int>) in range.allSatisfy { b[$0] == 0 } }
        let last4 = IPAddress(bytes: b[12..<16])
        // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (translated, RFC 2765).
        if zeros(0..<10), b[10] == 0xFF, b[11] == 0xFF { return last4 }
        if zeros(0..<8), b[8] == 0xFF, b[9] == 0xFF, zeros(10..<12) { return last4 }
        // ::a.b.c.d (compatible, deprecated); not :: and ::1, which are their own.
        if zeros(0..<12), !zeros(12..<15) || b[15] > 1 { return last4 }
        // 64:ff9b::a.b.c.d, the NAT64 well-known prefix (RFC 6052).
        if b[0] == 0x00, b[1] == 0x64, b[2] == 0xFF, b[3] == 0x9B, zeros(4..<12) { return last4 }
        // 2002:aabb:ccdd::/48, 6to4 (RFC 3056).
        if b[0] == 0x20, b[1] == 0x02 { return IPAddress(bytes: b[2..<6]) }
        return nil
    }

    /// The kind of network the address belongs to (an IPv6 form carrying an IPv4
    /// address: that address's).
    public var scope: Scope {
        if let embedded = embeddedIPv4 { return embedded.scope }
        return isIPv4 ? Self.scopeOfIPv4(bytes) : Self.scopeOfIPv6(bytes)
    }

    private static func scopeOfIPv4(_ b: [UInt8]) -> Scope {
        let (a, second, third) = (b[0], b[1], b[2])
        switch a {
        case 0: return .unspecified
        case 10: return .privateNetwork
        case 100 where second & 0xC0 == 64: return .sharedAddressSpace
        case 127: return .loopback
        case 169 where second == 254: return .linkLocal
        case 172 where second & 0xF0 == 16: return .privateNetwork
        // 192.0.0.0/24 protocol assignments, 192.0.2.0/24 documentation, 192.88.99.0/24 6to4 relays.
        case 192 where second == 0 && (third == 0 || third == 2), 192 where second == 88 && third == 99:
            return .reserved
        case 192 where second == 168: return .privateNetwork
        // 198.18.0.0/15 benchmarking, 198.51.100.0/24 documentation.
        case 198 where second & 0xFE == 18, 198 where second == 51 && third == 100: return .reserved
        case 203 where second == 0 && third == 113: return .reserved
        case 224...239: return .multicast
        case 255 where b == [255, 255, 255, 255]: return .broadcast
        case 240...255: return .reserved
        default: return .public
        }
    }

    private static func scopeOfIPv6(_ b: [UInt8]) -> Scope {
        if b.allSatisfy({ $0 == 0 }) { return .unspecified }
        if b[0..<15].allSatisfy({ $0 == 0 }), b[15] == 1 { return .loopback }
        if b[0] == 0xFF { return .multicast }
        if b[0] & 0xFE == 0xFC { return .privateNetwork }
        if b[0] == 0xFE, b[1] & 0xC0 == 0x80 { return .linkLocal }
        if b[0] == 0xFE, b[1] & 0xC0 == 0xC0 { return .privateNetwork }
        // Outside 2000::/3 nothing is global unicast (64:ff9b:1::/48 local NAT64, 100::/64 discard…).
        guard b[0] & 0xE0 == 0x20 else { return .reserved }
        if b[0] == 0x20, b[1] == 0x01 {
            // 2001:db8::/32 documentation; 2001::/23, the IETF protocol assignments, which
            // hold Teredo 2001::/32 (its IPv4 is obfuscated) and ORCHID 2001:10::/28, 2001:20::/28.
            if b[2] == 0x0D, b[3] == 0xB8 { return .reserved }
            if b[2] < 0x02 { return .reserved }
        }
        return .public
    }

    /// The address in its usual text form (dotted quad, or RFC 5952 IPv6).
    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = isIPv4 ? AF_INET : AF_INET6
        let text = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count))
        }
        guard text != nil else { return bytes.map(String.init).joined(separator: ".") }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
