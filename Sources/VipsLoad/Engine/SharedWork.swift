/// One keyed unit of work shared by everyone who wants its result: a data
/// load, a decode. The one primitive every coalesced stage of the engine is
/// built from (the idea of Nuke's `AsyncTask`, written for this engine).
///
/// - Subscribers join with a priority; the unit's priority is the highest of
///   theirs, recomputed in `recomputePriority` only, and pushed to its queued
///   work and to the unit it subscribes to itself (`upstream`).
/// - When the last subscriber leaves before the result, the unit is disposed
///   of: it leaves its table and its upstream unit, and its queued or running
///   work is cancelled. A unit whose work cannot be interrupted once begun
///   (`finishesWithoutSubscribers`, a decode) instead runs to the end, so its
///   result can still be cached, and a new subscriber meanwhile joins it.
/// - The result reaches every subscriber once. A unit that `retainsValue` (a
///   data load) keeps a successful value while subscribers hold it, and hands
///   it at once to subscribers who join later; any other unit leaves its table
///   as it completes. Failures are never kept.
///
/// Every stored property is guarded by its owner's `WorkLock`: every method
/// is called with it held (inside `WorkLock.perform`), and none runs outside
/// code; what must happen after the lock is released goes into `Effects`.
final class SharedWork<Value: Sendable>: WorkSubscribable, @unchecked Sendable {
    /// What a subscriber is told.
    enum Event: Sendable {
        /// The result.
        case value(Value)
        /// The work failed (or its source did).
        case failure(VipsError)
        /// Bytes of the source received so far, the total when known, and
        /// the file whose first `completed` bytes they are (nil when the
        /// loader names none): forwarded from a download to every unit and
        /// task waiting for it (a task asking for previews decodes them from it).
        case progress(completed: Int, total: Int?, file: String?)
    }

    typealias Handler = @Sendable (Event) -> Void

    private enum Phase {
        /// Created or queued; its work has not begun.
        case pending
        /// Its work has begun.
        case running
        /// Succeeded; the value is kept for subscribers still holding it.
        case published(Value)
        /// Completed or disposed of: it ignores everything from now on.
        case ended
    }

    private struct Subscriber {
        var priority: ImageRequest.Priority
        let handler: Handler
    }

    private let retainsValue: Bool
    private let finishesWithoutSubscribers: Bool
    private var phase = Phase.pending
    /// In arrival order: the first to join is served (and queued) first.
    private var subscribers: [(id: Int, subscriber: Subscriber)] = []
    private var nextSubscriberID = 0
    /// The highest priority among the subscribers (read under the lock, like everything here).
    private(set) var priority: ImageRequest.Priority
    /// How the unit's work is cancelled and moved in its queue (set by its stage).
    private var work: WorkHandle?
    /// Stops the unit's running work part-way; set by a stage whose work can
    /// be stopped (`beginStoppable`). While set, the last subscriber leaving
    /// running work ends the unit and stops its work, though the unit
    /// `finishesWithoutSubscribers`.
    private var stopRunning: (@Sendable () -> Void)?
    /// The unit this one subscribes to, if any, and its subscription there.
    private var upstream: WorkSubscription?
    /// Whether any subscriber, ever, asked for the result to be stored in the
    /// stage's cache (a decode whose subscribers all left still stores it).
    private(set) var storesResult = false
    /// Takes the unit out of its table; set by `WorkTable`.
    var leaveTable: (() -> Void)?

    init(priority: ImageRequest.Priority, retainsValue: Bool, finishesWithoutSubscribers: Bool) {
        self.priority = priority
        self.retainsValue = retainsValue
        self.finishesWithoutSubscribers = finishesWithoutSubscribers
    }

    // MARK: - Subscribers

    /// Adds a subscriber; a kept value is delivered to it at once (as an effect).
    func subscribe(
        priority: ImageRequest.Priority, storesResult: Bool = false, _ effects: inout Effects,
        handler: @escaping Handler
    ) -> WorkSubscription {
        self.storesResult = self.storesResult || storesResult
        nextSubscriberID += 1
        let id = nextSubscriberID
        subscribers.append((id, Subscriber(priority: priority, handler: handler)))
        if case .published(let value) = phase {
            effects.add { handler(.value(value)) }
        } else if priority > self.priority {
            recomputePriority(&effects)
        }
        return WorkSubscription(unit: self, id: id)
    }

    /// Removes a subscriber; the last one leaving disposes of the unit.
    func unsubscribe(_ id: Int, _ effects: inout Effects) {
        guard let index = subscribers.firstIndex(where: { $0.id == id }) else { return }
        subscribers.remove(at: index)
        guard subscribers.isEmpty else {
            recomputePriority(&effects)
            return
        }
        switch phase {
        case .running where finishesWithoutSubscribers:
            guard let stop = stopRunning else { break }
            dispose(&effects, cancellingWork: false)
            effects.add(stop)
        case .pending, .running, .published:
            dispose(&effects, cancellingWork: true)
        case .ended:
            break
        }
    }

    /// Changes a subscriber's priority.
    func setPriority(_ priority: ImageRequest.Priority, of id: Int, _ effects: inout Effects) {
        guard let index = subscribers.firstIndex(where: { $0.id == id }),
            subscribers[index].subscriber.priority != priority
        else { return }
        subscribers[index].subscriber.priority = priority
        recomputePriority(&effects)
    }

    /// The one place the unit's priority is derived: the highest of its
    /// subscribers'; a change moves its queued work and its upstream subscription.
    private func recomputePriority(_ effects: inout Effects) {
        guard let highest = subscribers.lazy.map(\.subscriber.priority).max(), highest != priority else { return }
        priority = highest
        if let work { effects.add { work.setPriority(highest) } }
        upstream?.setPriority(highest, &effects)
    }

    /// How many subscribers the result will reach if it completes now.
    var subscriberCount: Int { subscribers.count }

    /// Whether the unit is still live: not completed, failed or disposed of.
    var isLive: Bool {
        if case .ended = phase { return false }
        return true
    }

    // MARK: - Work

    /// Records how the unit's work is cancelled or moved; if the unit was
    /// disposed of meanwhile, the work is cancelled at once.
    func attach(_ handle: WorkHandle, _ effects: inout Effects) {
        guard isLive else {
            effects.add { handle.cancel() }
            return
        }
        work = handle
    }

    /// Records the unit's own subscription to another unit, left on disposal.
    func attach(upstream subscription: WorkSubscription, _ effects: inout Effects) {
        guard isLive else {
            subscription.cancel(&effects)
            return
        }
        upstream = subscription
    }

    /// Leaves the upstream unit (when the unit no longer needs its result).
    func releaseUpstream(_ effects: inout Effects) {
        upstream?.cancel(&effects)
        upstream = nil
    }

    /// Marks the work as begun; false when the unit is gone (the work must
    /// then return without doing anything). The one staleness check.
    func begin() -> Bool {
        guard case .pending = phase else { return false }
        phase = .running
        return true
    }

    /// `begin()` for work that `stop` can stop part-way: when `stop` is
    /// non-nil, the last subscriber leaving the running work ends the unit and
    /// calls `stop` (after the lock).
    func beginStoppable(_ stop: (@Sendable () -> Void)?) -> Bool {
        guard begin() else { return false }
        stopRunning = stop
        return true
    }

    /// Tells every subscriber (as effects) how far the unit's download has
    /// come; ignored once the unit has a result or has ended.
    func reportProgress(completed: Int, total: Int?, file: String?, _ effects: inout Effects) {
        switch phase {
        case .pending, .running: break
        case .published, .ended: return
        }
        for handler in subscribers.map(\.subscriber.handler) {
            effects.add { handler(.progress(completed: completed, total: total, file: file)) }
        }
    }

    /// Delivers the result to every subscriber (as effects) and ends or keeps the unit.
    func complete(with result: Result<Value, VipsError>, _ effects: inout Effects) {
        switch phase {
        case .pending, .running: break
        case .published, .ended: return
        }
        let handlers = subscribers.map(\.subscriber.handler)
        switch result {
        case .success(let value):
            for handler in handlers { effects.add { handler(.value(value)) } }
            if retainsValue, !subscribers.isEmpty {
                phase = .published(value)
                work = nil
            } else {
                dispose(&effects, cancellingWork: false)
            }
        case .failure(let error):
            for handler in handlers { effects.add { handler(.failure(error)) } }
            dispose(&effects, cancellingWork: false)
        }
    }

    /// Ends the unit: out of its table, out of its upstream unit, its work cancelled.
    private func dispose(_ effects: inout Effects, cancellingWork: Bool) {
        phase = .ended
        stopRunning = nil
        subscribers = []
        leaveTable?()
        leaveTable = nil
        releaseUpstream(&effects)
        if cancellingWork, let work { effects.add { work.cancel() } }
        work = nil
    }
}

/// What a unit's subscription needs of the unit, whatever its value type.
protocol WorkSubscribable: AnyObject, Sendable {
    func unsubscribe(_ id: Int, _ effects: inout Effects)
    func setPriority(_ priority: ImageRequest.Priority, of id: Int, _ effects: inout Effects)
}

/// One subscriber's place in a unit. Used with the engine lock held.
struct WorkSubscription: Sendable {
    let unit: any WorkSubscribable
    let id: Int

    /// Leaves the unit.
    func cancel(_ effects: inout Effects) {
        unit.unsubscribe(id, &effects)
    }

    /// Changes this subscriber's priority in the unit.
    func setPriority(_ priority: ImageRequest.Priority, _ effects: inout Effects) {
        unit.setPriority(priority, of: id, &effects)
    }
}

/// How a unit's work is cancelled and moved in its queue (`SharedWork.enqueue`);
/// called after the lock is released (as effects), from any thread.
struct WorkHandle: Sendable {
    let cancel: @Sendable () -> Void
    let setPriority: @Sendable (ImageRequest.Priority) -> Void
}

/// The live units of one stage, by key: where identical work is found and
/// joined (the idea of Nuke's `TaskPool`).
///
/// Guarded by its owner's `WorkLock`, like the units.
final class WorkTable<Key: Hashable & Sendable, Value: Sendable>: @unchecked Sendable {
    private var units: [Key: SharedWork<Value>] = [:]

    /// Live units.
    var count: Int { units.count }

    /// The live unit for `key`, if any.
    subscript(key: Key) -> SharedWork<Value>? { units[key] }

    /// The live unit for `key` (`joined` true), or the unit `make` creates and
    /// starts, added under `key` until it ends (`joined` false). The one way a
    /// stage joins identical work or starts it.
    func join(_ key: Key, make: () -> SharedWork<Value>) -> (unit: SharedWork<Value>, joined: Bool) {
        if let existing = units[key] { return (existing, true) }
        let unit = make()
        // A unit that ended while it was being started has nothing to share.
        guard unit.isLive else { return (unit, false) }
        units[key] = unit
        unit.leaveTable = { [unowned self, unowned unit] in
            if self.units[key] === unit { self.units[key] = nil }
        }
        return (unit, false)
    }
}
