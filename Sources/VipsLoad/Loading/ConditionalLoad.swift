import Foundation

/// The validators of an HTTP response, its `ETag` and `Last-Modified`
/// fields exactly as the origin sent them: what a cache or a proxy sends
/// back (`If-None-Match`, `If-Modified-Since`) to ask whether its copy is
/// still current.
public struct HTTPValidators: Sendable, Hashable {
    /// The `ETag` field, quotes and any `W/` included; nil when the response had none.
    public var entityTag: String?
    /// The `Last-Modified` field, an HTTP date as sent; nil when the response had none.
    public var lastModified: String?

    /// Validators with the given fields.
    public init(entityTag: String? = nil, lastModified: String? = nil) {
        self.entityTag = entityTag
        self.lastModified = lastModified
    }

    /// Whether neither field is set.
    public var isEmpty: Bool { entityTag == nil && lastModified == nil }

    /// The validators of a response whose header fields `header` looks up.
    init(header: (String) -> String?) {
        self.init(entityTag: header("ETag"), lastModified: header("Last-Modified"))
    }

    /// The validators a data-cache entry was stored with.
    init?(_ metadata: HTTPCacheMetadata?) {
        guard let metadata, metadata.etag != nil || metadata.lastModified != nil else { return nil }
        self.init(entityTag: metadata.etag, lastModified: metadata.lastModified)
    }
}

/// The preconditions of a conditional load: the `If-None-Match` and
/// `If-Modified-Since` fields a client sent, forwarded to the origin as
/// they are (as imgproxy forwards them).
public struct HTTPConditions: Sendable, Hashable {
    /// The `If-None-Match` field value: one or more entity tags, or `*`.
    public var ifNoneMatch: String?
    /// The `If-Modified-Since` field value: an HTTP date.
    public var ifModifiedSince: String?

    /// Conditions with the given fields; both nil makes an unconditional load.
    public init(ifNoneMatch: String? = nil, ifModifiedSince: String? = nil) {
        self.ifNoneMatch = ifNoneMatch
        self.ifModifiedSince = ifModifiedSince
    }

    /// Whether neither field is set.
    public var isEmpty: Bool { ifNoneMatch == nil && ifModifiedSince == nil }

    /// Whether a stored copy with `validators` meets the conditions, so the
    /// answer is "not modified" (RFC 9110 §13.2.2): `If-None-Match` names
    /// its entity tag (compared weakly) or is `*`; without `If-None-Match`,
    /// its `Last-Modified` is at or before `If-Modified-Since`.
    public func areMet(by validators: HTTPValidators) -> Bool {
        if let ifNoneMatch {
            guard let tag = validators.entityTag else { return false }
            let stored = Self.opaque(tag)
            return ifNoneMatch.split(separator: ",").contains { candidate in
                let text = candidate.trimmingCharacters(in: .whitespaces)
                return text == "*" || Self.opaque(text) == stored
            }
        }
        guard let ifModifiedSince, let since = HTTPDate.parse(ifModifiedSince),
            let modified = validators.lastModified.flatMap(HTTPDate.parse)
        else { return false }
        return modified <= since
    }

    /// An entity tag without its weakness marker, for the weak comparison.
    private static func opaque(_ tag: String) -> Substring {
        tag.hasPrefix("W/") ? tag.dropFirst(2) : tag[...]
    }
}

/// The outcome of `ImagePipeline.data(for:conditions:)`: the source's bytes,
/// or the origin's word that the copy the conditions describe is current.
///
/// A "not modified" answer is an outcome, not an error: it is never stored
/// in any cache, and it says nothing about other requests for the source.
public enum ConditionalLoad: Sendable {
    /// The origin answered `304 Not Modified` (or a fresh data-cache entry
    /// meets the conditions): the caller's copy is current. Carries the
    /// validators of that answer (the stored entry's, for a cache hit).
    case notModified(HTTPValidators)
    /// The bytes, loaded as `ImagePipeline.data(for:)` loads them; their
    /// `ImageData.validators` are the origin's.
    case loaded(ImageData)
}
