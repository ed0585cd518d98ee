import Foundation

/// What a disk-cache entry keeps of the HTTP response that delivered it:
/// its validators and how long it stays fresh.
public struct HTTPCacheMetadata: Sendable, Hashable, Codable {
    /// The `ETag` validator, sent back as `If-None-Match`.
    public var etag: String?
    /// The `Last-Modified` validator, sent back verbatim as `If-Modified-Since`.
    public var lastModified: String?
    /// When the entry stops being fresh; nil when the response gave no
    /// freshness information (the entry is stale at once).
    public var expiresAt: Date?
    /// `Cache-Control: no-cache` (or `Pragma: no-cache`): revalidate before every use.
    public var requiresRevalidation: Bool
    /// The response's `Content-Type`, for information only (bytes are sniffed).
    public var contentType: String?
    /// `Cache-Control: stale-if-error=N` (RFC 5861): for N seconds after
    /// `expiresAt`, the stale entry may be served when revalidating it fails
    /// with a 5xx status or a network error. Nil when the response gave none.
    public var staleIfError: TimeInterval?

    /// Metadata with the given validators and freshness (normally parsed from a response instead).
    public init(
        etag: String? = nil, lastModified: String? = nil, expiresAt: Date? = nil,
        requiresRevalidation: Bool = false, contentType: String? = nil
    ) {
        self.etag = etag
        self.lastModified = lastModified
        self.expiresAt = expiresAt
        self.requiresRevalidation = requiresRevalidation
        self.contentType = contentType
    }

    /// Whether `stale-if-error` allows serving the stale entry at `date`
    /// because revalidating it failed.
    public func mayServeStaleOnError(at date: Date = Date()) -> Bool {
        guard let staleIfError, let expiresAt else { return false }
        return date < expiresAt.addingTimeInterval(staleIfError)
    }

    /// Whether the entry may be used at `date` without asking the server.
    public func isFresh(at date: Date = Date()) -> Bool {
        guard !requiresRevalidation, let expiresAt else { return false }
        return date < expiresAt
    }

    /// Whether a conditional request can revalidate the entry.
    public var canRevalidate: Bool { etag != nil || lastModified != nil }

    // MARK: - From response headers

    /// The longest heuristic lifetime given to a response with `Last-Modified`
    /// but no explicit freshness (RFC 9111 §4.2.2 suggests 10% of its age).
    static let heuristicLifetimeCap: TimeInterval = 24 * 3600

    /// Reads a response's caching headers; nil when the response must not be
    /// stored (`Cache-Control: no-store`).
    ///
    /// - Parameters:
    ///   - header: looks a header up by name, case-insensitively.
    ///   - receivedAt: when the response arrived; freshness counts from there.
    init?(header: (String) -> String?, receivedAt: Date) {
        let directives = Self.directives(header("Cache-Control"))
        if directives["no-store"] != nil { return nil }
        etag = header("ETag")
        lastModified = header("Last-Modified")
        contentType = header("Content-Type")
        requiresRevalidation =
            directives["no-cache"] != nil
            || (header("Cache-Control") == nil && header("Pragma")?.lowercased().contains("no-cache") == true)
        expiresAt = Self.expiry(directives: directives, header: header, receivedAt: receivedAt)
        staleIfError = Self.staleIfError(directives)
    }

    /// `stale-if-error`'s seconds, when valid.
    private static func staleIfError(_ directives: [String: String]) -> TimeInterval? {
        guard let value = directives["stale-if-error"], let seconds = TimeInterval(value), seconds >= 0,
            seconds.isFinite
        else {
            return nil
        }
        return seconds
    }

    /// The metadata after a `304 Not Modified`: its headers update the stored ones (RFC 9111 §4.3.4).
    func updated(byNotModified header: (String) -> String?, receivedAt: Date) -> HTTPCacheMetadata? {
        let directives = Self.directives(header("Cache-Control"))
        if directives["no-store"] != nil { return nil }
        var merged = self
        if let etag = header("ETag") { merged.etag = etag }
        if let lastModified = header("Last-Modified") { merged.lastModified = lastModified }
        if header("Cache-Control") != nil {
            merged.requiresRevalidation = directives["no-cache"] != nil
            merged.staleIfError = Self.staleIfError(directives)
        }
        // A 304 usually repeats the freshness headers; without any, fall back to the stored Last-Modified heuristic.
        let storedLastModified = merged.lastModified
        merged.expiresAt = Self.expiry(
            directives: directives,
            header: { name in
                header(name) ?? (name == "Last-Modified" ? storedLastModified : nil)
            }, receivedAt: receivedAt)
        return merged
    }

    private static func expiry(directives: [String: String], header: (String) -> String?, receivedAt: Date) -> Date? {
        let age = header("Age").flatMap { TimeInterval($0.trimmingCharacters(in: .whitespaces)) } ?? 0
        let lifetime: TimeInterval
        if let maxAge = directives["max-age"] {
            // An unparsable max-age makes the response stale (RFC 9111 §4.2.1).
            lifetime = TimeInterval(maxAge) ?? 0
        } else if let expires = header("Expires") {
            // An invalid Expires ("0", "-1") means already expired.
            guard let expiresDate = HTTPDate.parse(expires) else { return receivedAt }
            let served = header("Date").flatMap(HTTPDate.parse) ?? receivedAt
            lifetime = expiresDate.timeIntervalSince(served)
        } else if let modified = header("Last-Modified").flatMap(HTTPDate.parse) {
            let served = header("Date").flatMap(HTTPDate.parse) ?? receivedAt
            lifetime = min(heuristicLifetimeCap, max(0, served.timeIntervalSince(modified) / 10))
        } else {
            return nil
        }
        return receivedAt.addingTimeInterval(max(0, lifetime - age))
    }

    /// `Cache-Control` directives, names lowercased, quotes removed from values.
    static func directives(_ value: String?) -> [String: String] {
        var result: [String: String] = [:]
        for part in (value ?? "").split(separator: ",") {
            let pieces = part.split(separator: "=", maxSplits: 1)
            guard let first = pieces.first else { continue }
            let name = first.trimmingCharacters(in: .whitespaces).lowercased()
            guard !name.isEmpty else { continue }
            var argument = pieces.count > 1 ? pieces[1].trimmingCharacters(in: .whitespaces) : ""
            if argument.hasPrefix("\""), argument.hasSuffix("\""), argument.count >= 2 {
                argument = String(argument.dropFirst().dropLast())
            }
            result[name] = argument
        }
        return result
    }
}
