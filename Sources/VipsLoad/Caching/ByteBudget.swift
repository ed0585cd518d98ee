/// A bound on bytes being written at once: a disk cache's writes in progress
/// (downloads streaming into it) may together take at most `limit` bytes.
///
/// A writer reserves each chunk before writing it; a refused reservation
/// makes the write fail, so a download moves out of the cache to a temporary
/// file of its own (the caching is lost, not the image). A writer gives its
/// bytes back when it finishes or is discarded.
final class ByteBudget: Sendable {
    /// The most bytes in flight at once.
    let limit: Int
    private let used = LockedState(0)

    init(limit: Int) {
        self.limit = max(0, limit)
    }

    /// Takes `count` bytes; false (and nothing taken) when that would pass the limit.
    func reserve(_ count: Int) -> Bool {
        used.withLock { used in
            guard used + count <= limit else { return false }
            used += count
            return true
        }
    }

    /// Gives `count` bytes back.
    func release(_ count: Int) {
        used.withLock { $0 = max(0, $0 - count) }
    }

    /// Bytes taken now.
    var inUse: Int { used.withLock { $0 } }
}
