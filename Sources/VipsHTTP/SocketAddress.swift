import Foundation
import VipsSync

#if canImport(Glibc)
    import Glibc
#endif

/// An IPv4 or IPv6 socket address made from an address literal, for the
/// daemon to bind, and the text of a client's address for logs.
struct SocketAddress: CustomStringConvertible {
    private var storage = sockaddr_storage()
    /// Whether it is an IPv6 address.
    let isIPv6: Bool
    /// "address:port", as a URL writes it ("[::1]:8080").
    let description: String

    /// `literal` ("127.0.0.1", "0.0.0.0", "::", "::1") at `port`.
    ///
    /// - Throws: `.invalidArgument` when `literal` is not an IP address.
    init(_ literal: String, port: UInt16) throws(HTTPServerError) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, literal, &v4) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = v4
            Self.copy(address, into: &storage)
            isIPv6 = false
            description = "\(literal):\(port)"
        } else if inet_pton(AF_INET6, literal, &v6) == 1 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = v6
            Self.copy(address, into: &storage)
            isIPv6 = true
            description = "[\(literal)]:\(port)"
        } else {
            throw HTTPServerError(.invalidAddress, "'\(literal)' is not an IPv4 or IPv6 address")
        }
    }

    /// Copies a `sockaddr_in` or `sockaddr_in6` into the start of `storage`.
    private static func copy<Address>(_ address: Address, into storage: inout sockaddr_storage) {
        withUnsafeMutableBytes(of: &storage) { target in
            withUnsafeBytes(of: address) { target.copyMemory(from: $0) }
        }
    }

    /// Calls `body` with the address as a `sockaddr` pointer.
    mutating func withSockaddr<R>(_ body: (UnsafeMutablePointer<sockaddr>) -> R) -> R {
        withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0) }
        }
    }

    /// The numeric text of the address at `pointer` ("-" when there is none).
    static func text(of pointer: UnsafePointer<sockaddr>?) -> String {
        guard let pointer else { return "-" }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch Int32(pointer.pointee.sa_family) {
        case AF_INET:
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { address in
                var bytes = address.pointee.sin_addr
                return inet_ntop(AF_INET, &bytes, &buffer, socklen_t(buffer.count)).map { String(cString: $0) } ?? "-"
            }
        case AF_INET6:
            return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { address in
                var bytes = address.pointee.sin6_addr
                return inet_ntop(AF_INET6, &bytes, &buffer, socklen_t(buffer.count)).map { String(cString: $0) } ?? "-"
            }
        default:
            return "-"
        }
    }
}
