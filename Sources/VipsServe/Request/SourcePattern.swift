import VipsLoad

/// One `--allow-source` pattern: which `http(s)` hosts sources may come from.
///
///     example.com                 example.com, http or https, default port only
///     *.example.com               any subdomain (a.example.com, a.b.example.com), not example.com itself
///     https://images.example.com  https only
///     example.com:8080            that port only (http or https)
///     http://*.example.com:*      http, any subdomain, any port
///     10.1.2.3, [fd00::1]:8443    IP literals match themselves only
///
/// Hosts compare case-insensitively, a trailing dot ignored; internationalised
/// names match in their ASCII (punycode) form. Without a port the pattern
/// admits the scheme's default port only (80 for http, 443 for https), so an
/// allowed host's other services stay out of reach.
public struct SourcePattern: Sendable, Hashable, CustomStringConvertible {
    /// The scheme admitted ("http" or "https"); nil admits both.
    public let scheme: String?
    /// The host in lower case, without a leading `*.`.
    public let host: String
    /// Whether subdomains of `host` match (and `host` itself does not).
    public let matchesSubdomains: Bool
    /// How the port is matched.
    public let port: Port

    /// Which ports a pattern admits.
    public enum Port: Sendable, Hashable {
        /// The scheme's default port: 80 for http, 443 for https.
        case schemeDefault
        /// This port.
        case exactly(Int)
        /// Any port (`:*`).
        case any
    }

    /// Parses a pattern of the form `[scheme://][*.]host[:port|:*]`.
    ///
    /// - Throws: `.invalidArgument` naming the pattern for anything else (a path,
    ///   credentials, a wildcard elsewhere, an unknown scheme, a bad port).
    public init(_ text: String) throws(VipsError) {
        func bad(_ why: String) -> VipsError {
            VipsError(.invalidArgument, "--allow-source \(text): \(why)")
        }
        var rest = Substring(text.lowercased())
        var scheme: String?
        if let range = rest.range(of: "://") {
            let given = String(rest[..<range.lowerBound])
            guard given == "http" || given == "https" else { throw bad("only http and https sources can be allowed") }
            scheme = given
            rest = rest[range.upperBound...]
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("@"), !rest.contains("?"), !rest.contains("#") else {
            throw bad("a pattern is [scheme://][*.]host[:port], with no path or credentials")
        }
        var port = Port.schemeDefault
        var host: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw bad("an unclosed [") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw bad("text after the ]") }
                port = try Self.port(after.dropFirst(), bad)
            }
            guard IPAddress(String(host))?.isIPv4 == false else { throw bad("[…] must hold an IPv6 address") }
        } else {
            host = rest
            guard rest.filter({ $0 == ":" }).count <= 1 else { throw bad("an IPv6 address goes in brackets") }
            if let colon = rest.lastIndex(of: ":") {
                host = rest[..<colon]
                port = try Self.port(rest[rest.index(after: colon)...], bad)
            }
        }
        var subdomains = false
        if host.hasPrefix("*.") {
            subdomains = true
            host = host.dropFirst(2)
        }
        if host.hasSuffix(".") { host = host.dropLast() }
        guard !host.isEmpty, !host.contains("*") else { throw bad("a wildcard is only allowed as a leading *.") }
        let isLiteral = IPAddress(String(host)) != nil
        guard isLiteral || Self.isHostName(host) else { throw bad("\(host) is not a host name") }
        guard !(subdomains && isLiteral) else { throw bad("an IP address has no subdomains") }
        self.scheme = scheme
        self.host = String(host)
        self.matchesSubdomains = subdomains
        self.port = port
    }

    private static func port(_ text: Substring, _ bad: (String) -> VipsError) throws(VipsError) -> Port {
        if text == "*" { return .any }
        guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let value = Int(text),
            (1...65_535).contains(value)
        else { throw bad("\(text) is not a port (1–65535 or *)") }
        return .exactly(value)
    }

    /// Letters, digits, `-` and `.` in labels of 1–63 characters.
    static func isHostName(_ host: Substring) -> Bool {
        guard host.utf8.count <= 253 else { return false }
        return host.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            (1...63).contains(label.utf8.count)
                && label.utf8.allSatisfy {
                    $0.isASCIILetter || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
                }
        }
    }

    /// Whether a URL with `scheme` (lower case), `host` (lower case, no brackets,
    /// no trailing dot) and `port` (nil: the default) matches.
    public func matches(scheme: String, host: String, port: Int?) -> Bool {
        if let required = self.scheme, required != scheme { return false }
        let defaultPort = scheme == "https" ? 443 : 80
        switch self.port {
        case .schemeDefault: if (port ?? defaultPort) != defaultPort { return false }
        case .exactly(let required): if (port ?? defaultPort) != required { return false }
        case .any: break
        }
        if matchesSubdomains { return host.hasSuffix("." + self.host) }
        if let literal = IPAddress(self.host), let candidate = IPAddress(host) { return literal == candidate }
        return host == self.host
    }

    /// The pattern as it parses back.
    public var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let portText: String
        switch port {
        case .schemeDefault: portText = ""
        case .exactly(let value): portText = ":\(value)"
        case .any: portText = ":*"
        }
        return (scheme.map { $0 + "://" } ?? "") + (matchesSubdomains ? "*." : "") + shownHost + portText
    }
}
