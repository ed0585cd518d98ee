import Foundation
import VipsCore
import VipsHTTP
import VipsLoad

/// Encoded responses kept in memory, least recently used evicted first,
/// bounded by their body bytes: a hit is a dictionary lookup on the network
/// thread, with no copy (the same libmicrohttpd response object is queued
/// again) and no trip through the pipeline.
///
/// An entry may carry a lifetime (responses made from remote sources, whose
/// bytes can change under the same URL, live no longer than they may be
/// cached by clients); an expired entry is a miss. Responses are released
/// after the lock, never under it.
final class ResponseCache: Sendable {
    /// Body bytes kept at most.
    let byteLimit: Int
    /// Responses larger than this share of `byteLimit` are not kept.
    static let entryFraction = 0.1

    private struct State {
        var storage = LRUStorage<String, HTTPResponse>()
        var hits = 0
        var misses = 0
    }

    private let state: LockedState<State>

    init(byteLimit: Int) {
        self.byteLimit = max(0, byteLimit)
        state = LockedState(State(), rank: .cache)
    }

    /// The response stored for `key`, if any and not expired.
    func response(for key: String) -> HTTPResponse? {
        // Expired entries removed by the lookup are released with `removed`, after the lock.
        var removed: [(String, HTTPResponse)] = []
        let now = ContinuousClock.now
        let found = state.withLock { state -> HTTPResponse? in
            let found = state.storage.value(for: key, now: now, removed: &removed)
            if found == nil { state.misses += 1 } else { state.hits += 1 }
            return found
        }
        return found
    }

    /// Keeps `response` under `key` (replacing any), for at most `lifetime`.
    func store(_ response: HTTPResponse, for key: String, lifetime: Duration?) {
        let cost = response.bodyCount
        guard byteLimit > 0, Double(cost) <= Double(byteLimit) * Self.entryFraction else { return }
        let expiry = lifetime.map { ContinuousClock.now + $0 }
        // Evicted and replaced responses are released with `removed`, after the lock.
        var removed: [(String, HTTPResponse)] = []
        state.withLock { state in
            state.storage.set(
                response, for: key, cost: cost, expiry: expiry, costLimit: byteLimit, countLimit: .max,
                removed: &removed)
        }
    }

    /// Body bytes held now.
    var totalBytes: Int { state.withLock { $0.storage.totalCost } }
    /// Responses held now.
    var count: Int { state.withLock { $0.storage.count } }
    /// Lookups that found a response, and lookups that did not.
    var lookups: (hits: Int, misses: Int) { state.withLock { ($0.hits, $0.misses) } }
}
