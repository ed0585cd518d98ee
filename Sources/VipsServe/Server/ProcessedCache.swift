import Dispatch
import Foundation
import VipsCore
import VipsLoad

/// Encoded responses kept on disk, in a `DiskCache`, under their
/// `RepresentationKey`: a restarted server (or another replica sharing the
/// folder on one node) serves what was made before without decoding.
///
/// A local file's key holds its identity, so its entries never go stale; an
/// entry made from a remote source is stored with an expiry (the response's
/// `max-age`) and is a miss after it. Reads and writes block on file I/O, so
/// they run on a queue of their own, never on Swift's cooperative pool or a
/// network thread. Failures to store cost only the caching.
final class ProcessedCache: Sendable {
    let disk: DiskCache
    private let queue = DispatchQueue(label: "vipsload-serve-cache", qos: .userInitiated, attributes: .concurrent)

    init(disk: DiskCache) {
        self.disk = disk
    }

    /// The stored bytes for `key`, if any and fresh.
    func bytes(for key: String) async -> Data? {
        await withCheckedContinuation { continuation in
            queue.async { [disk] in
                guard let hit = disk.cachedData(for: key), hit.isFresh() else {
                    continuation.resume(returning: nil)
                    return
                }
                // The private link to the entry goes with `hit`.
                continuation.resume(returning: try? hit.data.contents())
            }
        }
    }

    /// Stores `data` under `key` in the background; `lifetime` (seconds) for
    /// entries that expire, nil for entries that stay valid.
    func store(_ data: Data, for key: String, contentType: String, lifetime: Int?) {
        queue.async { [disk] in
            let metadata = lifetime.map {
                HTTPCacheMetadata(expiresAt: Date().addingTimeInterval(TimeInterval($0)), contentType: contentType)
            }
            _ = try? disk.store(data, for: key, http: metadata)
        }
    }

    /// Waits until the stores started so far are done (for shutdown and tests).
    func flush() async {
        await withCheckedContinuation { continuation in
            queue.async(flags: .barrier) { continuation.resume() }
        }
    }
}
