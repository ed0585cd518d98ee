import Foundation

/// Which addresses an `HTTPDataLoader` may connect to: the protection against
/// server-side request forgery (SSRF) for a server that downloads URLs its
/// clients name.
///
/// The loader's transport checks every address at the moment it is about to
/// connect to it (for the first request and for every redirect's target,
/// after libcurl has resolved the host): an address whose scope is not in
/// `allowedScopes` and that no network of `allowedNetworks` holds is never
/// connected to. When a host has several addresses, the disallowed ones are
/// skipped; when no allowed address is left, the request fails with
/// `VipsError.Kind.sourceNotAllowed`, naming the address and its scope, and
/// nothing has been sent. IPv6 forms that carry an IPv4 address are judged
/// by that address (see `IPAddress.scope`).
///
/// Because the check is made on the address of the connection itself, not on
/// a resolution of its own beforehand, a name whose DNS answer changes
/// (DNS rebinding, a very short TTL) cannot pass with a public address and
/// then be connected to a private one. Under any policy other than
/// `.unrestricted` the loader uses no proxy (a proxy would resolve the name
/// itself, out of the check's sight).
///
/// The default, `.unrestricted`, checks nothing and allows every address,
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

    /// Every address allowed, nothing checked: the default.
    public static let unrestricted = SourceAddressPolicy(allowedScopes: Set(IPAddress.Scope.allCases))

    /// Public (global unicast) addresses only, for a server fetching URLs that
    /// clients chose: no loopback, private, link-local, shared, unspecified,
    /// multicast, broadcast or reserved address.
    public static let publicOnly = SourceAddressPolicy(allowedScopes: [.public])

    /// Whether every address is allowed (and so the transport checks nothing).
    public var isUnrestricted: Bool { allowedScopes.isSuperset(of: IPAddress.Scope.allCases) }

    /// Whether a connection to `address` is allowed.
    public func allows(_ address: IPAddress) -> Bool {
        allowedScopes.contains(address.scope) || allowedNetworks.contains { $0.contains(address) }
    }

    /// The error for a connection to `address` that this policy refused:
    /// `host` as the URL names it, `label` the request's redacted URL and,
    /// after a redirect, `target` the redirect target's (the policy's refusal
    /// of the target is then the error's `underlying`).
    func refusal(of address: IPAddress, host: String, label: String, redirectTarget target: String?) -> VipsError {
        let shown = IPAddress(host) == nil ? "\(host) resolves to \(address)" : "\(address)"
        let reason = "\(shown), a \(address.scope) address, which the address policy does not allow"
        guard let target else { return VipsError(.sourceNotAllowed, reason, source: label) }
        let refusal = VipsError(.sourceNotAllowed, reason, source: target)
        return VipsError(.sourceNotAllowed, "redirect refused: " + reason, source: label, underlying: refusal)
    }

    /// The address of an IPv4 or IPv6 socket address `length` bytes long;
    /// nil for another family or a length too short for its family.
    static func address(of socketAddress: UnsafePointer<sockaddr>, length: Int) -> IPAddress? {
        switch Int32(socketAddress.pointee.sa_family) {
        case AF_INET where length >= MemoryLayout<sockaddr_in>.size:
            return socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                withUnsafeBytes(of: v4.pointee.sin_addr) { IPAddress(bytes: $0) }
            }
        case AF_INET6 where length >= MemoryLayout<sockaddr_in6>.size:
            return socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                withUnsafeBytes(of: v6.pointee.sin6_addr) { IPAddress(bytes: $0) }
            }
        default:
            return nil
        }
    }
}
