import Foundation

/// Decoded bitmaps kept in memory, least recently used evicted first.
///
/// Bounded by total cost (the bitmaps' pixel bytes) and by count; the total
/// never exceeds the cost limit, not even for an instant, and a bitmap costing
/// more than `entryCostLimitFraction` of the limit is not kept at all (one huge
/// image would otherwise flush everything else). Every operation is O(1) and
/// thread-safe; one cache can be shared by several pipelines.
public final class MemoryCache: Sendable {
    /// The default cost limit: 20% of the memory limit, at most 512 MiB
    /// (`defaultCostLimit(for: .current)`). The limit is the container's
    /// (cgroup) where there is one, else physical memory.
    public static var defaultCostLimit: Int { defaultCostLimit(for: .current) }

    /// 20% of `resources.memoryLimit`, at most 512 MiB: a pod limited to 256 MiB gets 51 MiB.
    public static func defaultCostLimit(for resources: SystemResources) -> Int {
        min(resources.memoryLimit / 5, 512 << 20)
    }

    /// Entries costing more than this fraction of `costLimit` are not cached.
    public let entryCostLimitFraction: Double
    /// How long an entry stays valid after it is stored; nil for no limit.
    /// Expired entries are dropped when next looked up or evicted.
    public let entryLifetime: Duration?

    private struct State {
        var storage = LRUStorage<ImageCacheKey, Bitmap>()
        /// Keys held per source, to find a larger size of the same image.
        var keysBySource: [String: Set<ImageCacheKey>] = [:]
        var costLimit: Int
        var countLimit: Int
        var hits = 0
        var misses = 0

        mutating func forget(_ removed: [(ImageCacheKey, Bitmap)]) {
            for (key, _) in removed {
                keysBySource[key.sourceKey]?.remove(key)
                if keysBySource[key.sourceKey]?.isEmpty == true { keysBySource[key.sourceKey] = nil }
            }
        }
    }

    private let state: LockedState<State>
    /// Whether this is `ImagePipeline.Configuration`'s default cache, which
    /// stands for "a cache of these limits for each pipeline": every pipeline
    /// made from that configuration gets its own (`forOnePipeline`).
    let isConfigurationDefault: Bool

    /// - Parameters:
    ///   - costLimit: most bytes of pixels kept. Default `defaultCostLimit`.
    ///   - countLimit: most bitmaps kept. Default `Int.max` (cost alone bounds the cache).
    ///   - entryCostLimitFraction: largest share of `costLimit` one bitmap may take. Default 0.1.
    ///   - entryLifetime: time an entry stays valid; default nil (until evicted).
    public convenience init(
        costLimit: Int = MemoryCache.defaultCostLimit, countLimit: Int = .max,
        entryCostLimitFraction: Double = 0.1, entryLifetime: Duration? = nil
    ) {
        self.init(
            costLimit: costLimit, countLimit: countLimit, entryCostLimitFraction: entryCostLimitFraction,
            entryLifetime: entryLifetime, isConfigurationDefault: false)
    }

    private init(
        costLimit: Int, countLimit: Int, entryCostLimitFraction: Double, entryLifetime: Duration?,
        isConfigurationDefault: Bool
    ) {
        self.entryCostLimitFraction = min(1, max(0, entryCostLimitFraction))
        self.entryLifetime = entryLifetime
        self.isConfigurationDefault = isConfigurationDefault
        state = LockedState(State(costLimit: max(0, costLimit), countLimit: max(0, countLimit)), rank: .cache)
    }

    /// `ImagePipeline.Configuration`'s default: a cache with the default limits
    /// that each pipeline made from the configuration replaces with its own.
    @usableFromInline
    static func configurationDefault() -> MemoryCache {
        MemoryCache(
            costLimit: defaultCostLimit, countLimit: .max, entryCostLimitFraction: 0.1, entryLifetime: nil,
            isConfigurationDefault: true)
    }

    /// The cache a new pipeline uses for this one: a new, empty cache with
    /// this one's limits when this is a configuration's default, else itself
    /// (a cache set explicitly is shared by every pipeline it is given to).
    var forOnePipeline: MemoryCache {
        guard isConfigurationDefault else { return self }
        return MemoryCache(
            costLimit: costLimit, countLimit: countLimit, entryCostLimitFraction: entryCostLimitFraction,
            entryLifetime: entryLifetime, isConfigurationDefault: false)
    }

    /// Most bytes of pixels kept. Lowering it evicts at once.
    public var costLimit: Int {
        get { state.withLock { $0.costLimit } }
        set { setLimits { $0.costLimit = max(0, newValue) } }
    }

    /// Most bitmaps kept. Lowering it evicts at once.
    public var countLimit: Int {
        get { state.withLock { $0.countLimit } }
        set { setLimits { $0.countLimit = max(0, newValue) } }
    }

    /// Bytes of pixels held now.
    public var totalCost: Int { state.withLock { $0.storage.totalCost } }
    /// Bitmaps held now.
    public var count: Int { state.withLock { $0.storage.count } }
    /// Lookups that found a bitmap.
    public var hitCount: Int { state.withLock { $0.hits } }
    /// Lookups that found nothing.
    public var missCount: Int { state.withLock { $0.misses } }

    /// The bitmap stored for `key`, now the most recently used; nil when absent or expired.
    public func bitmap(for key: ImageCacheKey) -> Bitmap? {
        let now = entryLifetime == nil ? nil : ContinuousClock.now
        var removed: [(ImageCacheKey, Bitmap)] = []
        let bitmap = state.withLock { state -> Bitmap? in
            let bitmap = state.storage.value(for: key, now: now, removed: &removed)
            if bitmap == nil { state.misses += 1 } else { state.hits += 1 }
            if !removed.isEmpty { state.forget(removed) }
            return bitmap
        }
        return bitmap
    }

    /// Stores `bitmap` for `key`, evicting least recently used entries to make
    /// room. Returns false (and drops any older entry for `key`) when the
    /// bitmap costs more than `entryCostLimitFraction` of the limit.
    @discardableResult
    public func store(_ bitmap: Bitmap, for key: ImageCacheKey) -> Bool {
        let expiry = entryLifetime.map { ContinuousClock.now + $0 }
        var removed: [(ImageCacheKey, Bitmap)] = []
        let stored = state.withLock { state -> Bool in
            let cost = bitmap.cost
            let entryLimit = Int(Double(state.costLimit) * entryCostLimitFraction)
            guard cost <= entryLimit, state.countLimit > 0 else {
                if let old = state.storage.removeValue(for: key) { removed.append((key, old)) }
                state.forget(removed)
                return false
            }
            state.storage.set(
                bitmap, for: key, cost: cost, expiry: expiry, costLimit: state.costLimit,
                countLimit: state.countLimit, removed: &removed)
            state.forget(removed)
            state.keysBySource[key.sourceKey, default: []].insert(key)
            return true
        }
        return stored
    }

    /// Removes the bitmap stored for `key`.
    public func removeBitmap(for key: ImageCacheKey) {
        let removed: Bitmap? = state.withLock { state in
            let old = state.storage.removeValue(for: key)
            if let old { state.forget([(key, old)]) }
            return old
        }
        _ = removed
    }

    /// Removes every bitmap (hit and miss counts are kept).
    public func removeAll() {
        var dropped = state.withLock { state in
            let old = state.storage
            state.storage = LRUStorage()
            state.keysBySource.removeAll()
            return old
        }
        // The pixels are freed here, outside the lock.
        dropped.removeAll()
    }

    /// Evicts least recently used bitmaps until the total cost is at most
    /// `cost`: what an app does when memory runs low.
    public func trim(toCost cost: Int) {
        var removed: [(ImageCacheKey, Bitmap)] = []
        state.withLock { state in
            state.storage.trim(toCost: max(0, cost), removed: &removed)
            state.forget(removed)
        }
    }

    /// Removes every size (and every file version) of the source with `sourceKey`.
    public func removeBitmaps(forSourceKey sourceKey: String) {
        var removed: [(ImageCacheKey, Bitmap)] = []
        state.withLock { state in
            for key in state.keysBySource[sourceKey] ?? [] {
                if let bitmap = state.storage.removeValue(for: key) { removed.append((key, bitmap)) }
            }
            state.forget(removed)
        }
    }

    // MARK: - Pipeline support

    /// The bitmap for `key` without counting a hit or miss or changing recency:
    /// the pipeline's second look before it starts a decode.
    func peek(_ key: ImageCacheKey) -> Bitmap? {
        let now = entryLifetime == nil ? nil : ContinuousClock.now
        return state.withLock { $0.storage.peek(key, now: now) }
    }

    /// The cheapest cached bitmap of the same source from which `key`'s pixels
    /// can be made by downscaling alone, or nil.
    ///
    /// A cached bitmap qualifies when it is the original size (stored as the
    /// original, or smaller than its own box on both sides, so never shrunk),
    /// or when it reaches or exceeds the target box on some side: then it is at
    /// least as large as the decode would be, with the same aspect ratio.
    /// Upscaled entries never qualify, and `key` must not ask for upscaling.
    /// Nor does a bitmap of a source that stores several sizes (ICO, CUR):
    /// its decode picks the stored entry that fits, which a downscale of a
    /// larger entry would replace.
    func largerBitmap(for key: ImageCacheKey) -> Bitmap? {
        guard !key.isOriginal, !key.allowUpscale, key.isPlainFit else { return nil }
        let now = entryLifetime == nil ? nil : ContinuousClock.now
        var removed: [(ImageCacheKey, Bitmap)] = []
        let found = state.withLock { state -> Bitmap? in
            guard let keys = state.keysBySource[key.sourceKey] else { return nil }
            var best: (key: ImageCacheKey, bitmap: Bitmap)?
            for candidate in keys
            where candidate != key && !candidate.allowUpscale && candidate.isPlainFit
                && candidate.version == key.version
            {
                guard let bitmap = state.storage.peek(candidate, now: now),
                    bitmap.source?.info.format.storesSeveralSizes != true
                else { continue }
                let isOriginalSize =
                    candidate.isOriginal
                    || (bitmap.width < candidate.width && bitmap.height < candidate.height)
                let coversTarget = bitmap.width >= key.width || bitmap.height >= key.height
                guard isOriginalSize || coversTarget else { continue }
                if let current = best, current.bitmap.cost <= bitmap.cost { continue }
                best = (candidate, bitmap)
            }
            guard let best else { return nil }
            // Using it is a use: keep it away from eviction.
            let touched = state.storage.value(for: best.key, now: now, removed: &removed)
            state.forget(removed)
            return touched
        }
        return found
    }

    /// Keys from most to least recently used (for tests and diagnostics).
    var keysByRecency: [ImageCacheKey] { state.withLock { $0.storage.keysByRecency } }

    /// Whether the list, its index, the cost total, the limits and the
    /// per-source index all agree (for tests).
    var isConsistent: Bool {
        state.withLock { state in
            let indexed = state.keysBySource.values.reduce(0) { $0 + $1.count }
            return state.storage.isConsistent && state.storage.totalCost <= state.costLimit
                && state.storage.count <= state.countLimit && indexed == state.storage.count
        }
    }

    private func setLimits(_ change: (inout State) -> Void) {
        var removed: [(ImageCacheKey, Bitmap)] = []
        state.withLock { state in
            change(&state)
            state.storage.trim(toCost: state.costLimit, count: state.countLimit, removed: &removed)
            state.forget(removed)
        }
    }
}
