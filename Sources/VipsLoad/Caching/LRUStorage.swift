/// A least-recently-used list bounded by total cost and by count, with O(1)
/// lookup, insert, touch and removal.
///
/// Not thread-safe: `MemoryCache` owns one behind its lock (and VipsServe's
/// response cache another, hence `package`). Nodes live in one
/// array linked by indices (freed slots are reused), so the list costs no
/// allocation per entry once warm and no reference counting per link.
package struct LRUStorage<Key: Hashable, Value> {
    fileprivate struct Node {
        var key: Key?
        var value: Value?
        var cost = 0
        var expiry: ContinuousClock.Instant?
        var newer = -1
        var older = -1
    }

    private var nodes: [Node] = []
    private var freeSlots: [Int] = []
    private var index: [Key: Int] = [:]
    /// Most recently used.
    private var newest = -1
    /// Least recently used: evicted first.
    private var oldest = -1

    package private(set) var totalCost = 0

    /// An empty list.
    package init() {}
    package var count: Int { index.count }

    /// The value for `key`, moved to the most recently used end; nil (and the
    /// entry removed) when it has expired at `now`.
    package mutating func value(for key: Key, now: ContinuousClock.Instant?, removed: inout [(Key, Value)]) -> Value? {
        guard let slot = index[key] else { return nil }
        if let expiry = nodes[slot].expiry, let now, now >= expiry {
            if let entry = remove(slot: slot) { removed.append(entry) }
            return nil
        }
        touch(slot)
        return nodes[slot].value
    }

    /// The value for `key` without changing its recency.
    package func peek(_ key: Key, now: ContinuousClock.Instant?) -> Value? {
        guard let slot = index[key] else { return nil }
        if let expiry = nodes[slot].expiry, let now, now >= expiry { return nil }
        return nodes[slot].value
    }

    /// Inserts or replaces `key`, then evicts least recently used entries until
    /// both limits hold. Evicted (and replaced) entries are appended to `removed`.
    /// The caller guarantees `cost <= costLimit`.
    package mutating func set(
        _ value: Value, for key: Key, cost: Int, expiry: ContinuousClock.Instant?,
        costLimit: Int, countLimit: Int, removed: inout [(Key, Value)]
    ) {
        if let slot = index[key], let entry = remove(slot: slot) { removed.append(entry) }
        // Evict first so the total never exceeds the limits, not even between two steps.
        while oldest >= 0, totalCost + cost > costLimit || count + 1 > countLimit {
            if let entry = remove(slot: oldest) { removed.append(entry) }
        }
        let node = Node(key: key, value: value, cost: cost, expiry: expiry)
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            nodes[slot] = node
        } else {
            slot = nodes.count
            nodes.append(node)
        }
        index[key] = slot
        totalCost += cost
        linkAsNewest(slot)
    }

    /// Removes `key`; returns what was stored.
    @discardableResult
    package mutating func removeValue(for key: Key) -> Value? {
        guard let slot = index[key] else { return nil }
        return remove(slot: slot)?.1
    }

    /// Evicts least recently used entries until the total cost is at most
    /// `cost` and the count at most `count`.
    package mutating func trim(toCost cost: Int, count: Int = .max, removed: inout [(Key, Value)]) {
        while oldest >= 0, totalCost > cost || self.count > count {
            if let entry = remove(slot: oldest) { removed.append(entry) }
        }
    }

    package mutating func removeAll() {
        nodes.removeAll()
        freeSlots.removeAll()
        index.removeAll()
        newest = -1
        oldest = -1
        totalCost = 0
    }

    /// Keys from most to least recently used (for tests and diagnostics).
    var keysByRecency: [Key] {
        var keys: [Key] = []
        var slot = newest
        while slot >= 0 {
            if let key = nodes[slot].key { keys.append(key) }
            slot = nodes[slot].older
        }
        return keys
    }

    /// Walks the list both ways and checks links, index and cost total (for tests).
    var isConsistent: Bool {
        var forward = 0, cost = 0, slot = newest, newer = -1
        while slot >= 0 {
            guard forward <= nodes.count, nodes[slot].newer == newer, let key = nodes[slot].key, index[key] == slot
            else { return false }
            cost += nodes[slot].cost
            forward += 1
            newer = slot
            slot = nodes[slot].older
        }
        return newer == oldest && forward == index.count && cost == totalCost
    }

    // MARK: - Links

    private mutating func remove(slot: Int) -> (Key, Value)? {
        unlink(slot)
        let node = nodes[slot]
        nodes[slot] = Node()
        freeSlots.append(slot)
        totalCost -= node.cost
        guard let key = node.key, let value = node.value else { return nil }
        index[key] = nil
        return (key, value)
    }

    private mutating func touch(_ slot: Int) {
        guard slot != newest else { return }
        unlink(slot)
        linkAsNewest(slot)
    }

    private mutating func linkAsNewest(_ slot: Int) {
        nodes[slot].older = newest
        nodes[slot].newer = -1
        if newest >= 0 { nodes[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }

    private mutating func unlink(_ slot: Int) {
        let newer = nodes[slot].newer, older = nodes[slot].older
        if newer >= 0 { nodes[newer].older = older } else { newest = older }
        if older >= 0 { nodes[older].newer = newer } else { oldest = newer }
        nodes[slot].newer = -1
        nodes[slot].older = -1
    }
}

extension LRUStorage: Sendable where Key: Sendable, Value: Sendable {}
extension LRUStorage.Node: Sendable where Key: Sendable, Value: Sendable {}
