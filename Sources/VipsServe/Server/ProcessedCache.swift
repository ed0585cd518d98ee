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
/// network thread. Failures to store cost only the caching, but are never
/// silent: each is counted (`writeFailures`, `/metrics`'
/// `vipsload_cache_write_failures_total`) and the first is logged, then at
/// most one a minute (a folder that cannot be written fails every store).
final class ProcessedCache: Sendable {
    let disk: DiskCache
    private let log: (any ImageServerLogging)?
    private let queue = DispatchQueue(label: "vipsload-serve-cache", qos: .userInitiated, attributes: .concurrent)
    /// Failed stores so far, and when one was last logged.
    private let failures = LockedState<(count: Int, lastLogged: ContinuousClock.Instant?)>((0, nil))
    /// The least time between two log lines about failed stores.
    static let logInterval: Duration = .seconds(60)

    init(disk: DiskCache, log: (any ImageServerLogging)? = nil) {
        self.disk = disk
        self.log = log
    }

    /// Stores that failed so far.
    var writeFailures: Int { failures.withLock { $0.count } }

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
        queue.async { [self] in
            let metadata = lifetime.map {
                HTTPCacheMetadata(expiresAt: Date().addingTimeInterval(TimeInterval($0)), contentType: contentType)
            }
            do throws(VipsError) {
                _ = try disk.store(data, for: key, http: metadata)
            } catch {
                self.noteFailure(error)
            }
        }
    }

    /// Counts a failed store; logs it when it is the first, or the first for `logInterval`.
    private func noteFailure(_ error: VipsError) {
        let now = ContinuousClock.now
        let count = failures.withLock { state -> Int? in
            state.count += 1
            if let last = state.lastLogged, now - last < Self.logInterval { return nil }
            state.lastLogged = now
            return state.count
        }
        guard let count, let log else { return }
        log.event(
            "disk cache: cannot store responses in \(disk.configuration.directory.path) (\(error.message)); "
                + "serving without caching them (\(count) failed so far; logged at most once a minute)")
    }

    /// Waits until the stores started so far are done (for shutdown and tests).
    func flush() async {
        await withCheckedContinuation { continuation in
            queue.async(flags: .barrier) { continuation.resume() }
        }
    }
}
