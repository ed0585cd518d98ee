/// How an HTTP loader uses entries already in its disk cache.
public enum HTTPCachePolicy: Sendable, Hashable {
    /// HTTP semantics: serve fresh entries without a request, revalidate stale
    /// ones with `If-None-Match` / `If-Modified-Since`, download again when
    /// they cannot be revalidated. The default.
    case respectExpiry
    /// Serve any valid stored entry, however old, and load only on a miss
    /// (URLCache's "return cache data else load").
    case ignoreExpiry
}
