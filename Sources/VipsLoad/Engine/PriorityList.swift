/// Waiting items in one intrusive doubly linked list per priority: append,
/// remove, move and take-highest are all O(1).
///
/// A plain value, guarded by whoever owns it (`WorkQueue`, `PriorityThreadPool`).
struct PriorityList<Item> {
    typealias ID = Int

    private struct Entry {
        var bucket: Int
        var previous: ID?
        var next: ID?
        let item: Item
    }

    private var entries: [ID: Entry] = [:]
    private var heads = [ID?](repeating: nil, count: ImageRequest.Priority.allCases.count)
    private var tails = [ID?](repeating: nil, count: ImageRequest.Priority.allCases.count)

    /// Items waiting.
    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }

    /// Appends `item` at the back of `priority`'s line.
    mutating func append(_ id: ID, _ item: Item, priority: ImageRequest.Priority) {
        link(id, Entry(bucket: priority.rawValue, previous: nil, next: nil, item: item))
    }

    /// Removes a waiting item; nil when it is not waiting.
    @discardableResult
    mutating func remove(_ id: ID) -> Item? {
        unlink(id)?.item
    }

    /// Moves a waiting item to the back of `priority`'s line (no effect when
    /// it is not waiting or already there).
    mutating func move(_ id: ID, to priority: ImageRequest.Priority) {
        guard let entry = entries[id], entry.bucket != priority.rawValue, var moved = unlink(id) else { return }
        moved.bucket = priority.rawValue
        link(id, moved)
    }

    /// Takes the first item of the highest non-empty priority.
    mutating func popHighest() -> Item? {
        for bucket in heads.indices.reversed() {
            if let id = heads[bucket] { return remove(id) }
        }
        return nil
    }

    private mutating func link(_ id: ID, _ entry: Entry) {
        var entry = entry
        entry.previous = tails[entry.bucket]
        entry.next = nil
        if let tail = tails[entry.bucket] { entries[tail]?.next = id } else { heads[entry.bucket] = id }
        tails[entry.bucket] = id
        entries[id] = entry
    }

    private mutating func unlink(_ id: ID) -> Entry? {
        guard let entry = entries.removeValue(forKey: id) else { return nil }
        if let previous = entry.previous {
            entries[previous]?.next = entry.next
        } else {
            heads[entry.bucket] = entry.next
        }
        if let next = entry.next {
            entries[next]?.previous = entry.previous
        } else {
            tails[entry.bucket] = entry.previous
        }
        return entry
    }
}
