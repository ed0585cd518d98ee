import Dispatch
import Foundation

/// Which addresses an `HTTPDataLoader` may connect to: the protection against
/// server-side request forgery (SSRF) for a server that downloads URLs its
/// clients name.
///
/// Before each request, and again before following each redirect, the loader
/// resolves the URL's host (`getaddrinfo`, every address it returns) and
/// refuses the request with `VipsError.Kind.sourceNotAllowed` when any of them
/// is not allowed: its scope is not in `allowedScopes` and no network of
/// `allowedNetworks` holds it. IPv6 forms that carry an IPv4 address are judged
/// by that address (see `IPAddress.scope`).
///
/// The check happens before the connection, which the transport then makes
/// with a resolution of its own: a name whose DNS answer changes between the
/// two (DNS rebinding, a short TTL) can pass the check with a public address
/// and be connected to a private one. Closing that gap needs the check at
/// connect time, inside the transport; the classification (`IPAddress`,
/// `IPNetwork`, `allows(_:)`) is independent of the transport for that reason.
///
/// The default, `.unrestricted`, resolves nothing and allows every address,
/// as a library loading URLs its own program chose should.
public struct SourceAddressPolicy: Sendable, Hashable {
    /// The scopes connected to without further question.
    public var allowedScopes: Set<IPAddress.Scope>
    /// Blocks allowed whatever their scope (an intranet origin, a test server).
    public var allowedNetworks: [IPNetwork]

    /// A policy allowing the addresses of `allowedScopes` and those in `allowedNetworks`.
    public init(allowedScopes: Set<IPAddress.Scope>, allowedNetworks: [IPNetwork] = []) {
        self.allowedScopes = allowedScopes
        self.allowedNetworks = allowedNetworks
    }

    /// Every address allowed, nothing resolved: the default.
    public static let unrestricted = SourceAddressPolicy(allowedScopes: Set(IPAddress.Scope.allCases))

    /// Public (global unicast) addresses only, for a server fetching URLs that
    /// clients chose: no loopback, private, link-local, shared, unspecified,
    /// multicast, broadcast or reserved address.
    public static let publicOnly = SourceAddressPolicy(allowedScopes: [.public])

    /// Whether every address is allowed (and so nothing needs resolving).
    public var isUnrestricted: Bool { allowedScopes.isSuperset(of: IPAddress.Scope.allCases) }

    /// Whether a connection to `address` is allowed.
    public func allows(_ address: IPAddress) -> Bool {
        allowedScopes.contains(address.scope) || allowedNetworks.contains { $0.contains(address) }
    }

    /// Resolves `url`'s host and throws unless every address it resolves to is allowed.
    ///
    /// - Throws: `.sourceNotAllowed` naming the refused address and its scope;
    ///   `.network` when the host does not resolve; `.invalidArgument` for a URL without a host.
    public func check(_ url: URL) async throws(VipsError) {
        if isUnrestricted { return }
        let label = URLRedaction.redacted(url)
        guard var host = url.host, !host.isEmpty else {
            throw VipsError(.invalidArgument, "\(label): no host to connect to")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        try verdict(on: await Self.resolve(host), host: host, label: label)
    }

    /// The decision on a resolution of `host`: nothing when every address is allowed.
    func verdict(on resolution: Result<[IPAddress], VipsError>, host: String, label: String) throws(VipsError) {
        let addresses: [IPAddress]
        switch resolution {
        case .success(let resolved): addresses = resolved
        case .failure(let error): throw VipsError(error.kind, "\(label): \(error.message)")
        }
        if let refused = addresses.first(where: { !allows($0) }) {
            let shown = IPAddress(host) == nil ? "\(host) resolves to \(refused)" : "\(refused)"
            throw VipsError(
                .sourceNotAllowed,
                "\(label): \(shown), a \(refused.scope) address, which the address policy does not allow")
        }
    }

    /// Every address `host` resolves to, from `getaddrinfo` run off the caller's
    /// thread (it blocks for as long as DNS takes and cannot be interrupted).
    static func resolve(_ host: String) async -> Result<[IPAddress], VipsError> {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: resolveNow(host)) }
        }
    }

    /// `getaddrinfo` for TCP, both families; IP literals come back as themselves.
    static func resolveNow(_ host: String) -> Result<[IPAddress], VipsError> {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0 else {
            let reason = gai_strerror(status).map { String(cString: $0) } ?? "error \(status)"
            return .failure(VipsError(.network, "cannot resolve \(host): \(reason)"))
        }
        defer { freeaddrinfo(list) }
        var addresses: [IPAddress] = []
        var entry = list
        while let current = entry {
            if let socketAddress = current.pointee.ai_addr, let address = Self.address(of: socketAddress) {
                if !addresses.contains(address) { addresses.append(address) }
            }
            entry = current.pointee.ai_next
        }
        guard !addresses.isEmpty else { return .failure(VipsError(.network, "\(host) resolves to no address")) }
        return .success(addresses)
    }

    private static func address(of socketAddress: UnsafeMutablePointer<sockaddr>) -> IPAddress? {
        switch Int32(socketAddress.pointee.sa_family) {
        case AF_INET:
            return socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                withUnsafeBytes(of: v4.pointee.sin_addr) { IPAddress(bytes: $0) }
            }
        case AF_INET6:
            return socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                withUnsafeBytes(of: v6.pointee.sin6_addr) { IPAddress(bytes: $0) }
            }
        default:
            return nil
        }
    }
}
