/// Counters of one `DiskCache` instance since it was created (other instances
/// on the same folder count their own).
public struct DiskCacheMetrics: Sendable, Hashable {
    /// Lookups that returned a verified entry.
    public var hits = 0
    /// Lookups that found no usable entry (absent, another key's, corrupt).
    public var misses = 0
    /// Entries committed.
    public var writes = 0
    /// Writes the file system refused (disk full, read-only or deleted
    /// folder); nothing partial became visible, and a download's bytes were
    /// still delivered uncached.
    public var writeFailures = 0
    /// Entries found corrupt or truncated on read, and deleted.
    public var corruptEntriesRemoved = 0
    /// Entries deleted by the LRU sweep.
    public var evictions = 0
    /// Sweeps run (background and explicit).
    public var sweeps = 0

    /// All counters at zero.
    public init() {}
}
