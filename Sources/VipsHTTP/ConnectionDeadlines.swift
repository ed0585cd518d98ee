import Dispatch
import VipsSync

#if canImport(Glibc)
    import Glibc
#endif

/// What keeps clients that send slowly (slowloris) from holding the
/// connection table: a deadline for each request's header section, and
/// eviction of connections waiting for a header when the table is nearly full.
///
/// libmicrohttpd's `CONNECTION_TIMEOUT` is an idle timer that every byte
/// restarts: a client sending one byte every few seconds keeps its
/// connection for as long as its header fits the connection's memory, and
/// a thousand such clients hold every slot. So, as production servers do:
///
/// - **Header deadline** (nginx's `client_header_timeout`, Apache's
///   `RequestReadTimeout header=`): a new connection's first request must
///   have its whole header section within `headerTimeout` of the accept,
///   however slowly its bytes come. A keep-alive connection's next request
///   must have it within `connectionTimeout + headerTimeout` of the end of
///   the previous response: the wait for its first byte is the idle
///   timer's (as nginx's `keepalive_timeout` is), and since libmicrohttpd
///   does not say when that byte came, the deadline allows the longest wait
///   the idle timer lets pass, then `headerTimeout` more. (With no idle
///   timeout, `connectionTimeout` 0, a keep-alive connection has no header
///   deadline: only eviction bounds it.) Past the deadline the connection is
///   closed without an answer, as nginx does.
/// - **Eviction**: a connection that takes a network thread's open
///   connections past 90 % of its share of `maxConnections` closes the one
///   of that thread's connections that has waited longest for a header (a
///   new connection whose header is not complete, or a keep-alive one
///   between requests; never the newcomer, never one whose request is being
///   handled), as nginx reuses idle connections when it runs out of them.
///   So a crowd of slow clients cannot keep new ones out until its
///   deadlines pass: a newcomer sends its header at once and is served, the
///   slow ones at the back of the line go.
///
/// A connection is closed with `shutdown(SHUT_RDWR)` on its socket, from the
/// thread that decides (the deadline sweep's, or libmicrohttpd's at an
/// accept): libmicrohttpd's thread then reads the end of the stream, closes
/// the connection and calls the completion and close notifications, as for a
/// client that left. The socket is shut down only under this table's lock and
/// only while its connection is in the table; libmicrohttpd's close
/// notification, which takes the same lock to remove it, comes before
/// libmicrohttpd closes the descriptor. So a descriptor number the kernel has
/// since given to another connection is never touched.
package final class ConnectionDeadlines: Sendable {
    /// Why the server closed a connection.
    enum Closing: Sendable {
        case headerDeadline
        case eviction
    }

    /// Connections closed so far, by reason.
    package struct Counts: Sendable, Equatable {
        /// Closed at their header deadline.
        package var headerTimeouts = 0
        /// Closed to make room for a new connection.
        package var evictions = 0

        /// No connection closed yet.
        package init(headerTimeouts: Int = 0, evictions: Int = 0) {
            self.headerTimeouts = headerTimeouts
            self.evictions = evictions
        }
    }

    /// Where a connection waits for a header: new (deadline `headerTimeout`
    /// from the accept) or kept alive (`connectionTimeout + headerTimeout`
    /// from the previous response). Each line is in the order connections
    /// began to wait, which is also their deadlines' order.
    fileprivate enum LineKind {
        case fresh
        case kept
    }

    fileprivate struct Waiting {
        /// When it began to wait (`DispatchTime` nanoseconds).
        var since: UInt64
        /// When it is closed; `UInt64.max` for never.
        var deadline: UInt64
        /// Its place in its line (an item of a line whose ticket differs is stale).
        var ticket: UInt64
        var line: LineKind
    }

    fileprivate struct Entry {
        let fd: Int32
        /// The libmicrohttpd daemon (network thread) that owns the connection.
        let worker: UInt
        /// Set while the connection waits for a request's header.
        var waiting: Waiting?
        /// Set once the server has shut the connection down.
        var closing: Closing?
    }

    /// A first-in, first-out line of connections, stale items skipped:
    /// appending is O(1), so is taking the front (amortized).
    fileprivate struct Line {
        private(set) var items: [(ticket: UInt64, key: UInt)] = []
        private var head = 0
        /// Items that are not stale.
        var live = 0

        var front: (ticket: UInt64, key: UInt)? { head < items.count ? items[head] : nil }

        mutating func append(ticket: UInt64, key: UInt) {
            items.append((ticket, key))
            live += 1
        }

        /// Drops the stale items at the front, and every stale item once
        /// they outnumber the live ones (so a connection that waits for ever
        /// at the front does not make the line grow without bound).
        mutating func trim(isLive: (UInt64, UInt) -> Bool) {
            while head < items.count, !isLive(items[head].ticket, items[head].key) { head += 1 }
            if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            } else if items.count - head > 2 * live + 64 {
                items = items[head...].filter { isLive($0.ticket, $0.key) }
                head = 0
            } else if head > 64, head * 2 > items.count {
                items.removeFirst(head)
                head = 0
            }
        }
    }

    fileprivate struct Worker {
        /// Open connections not being closed by the server.
        var open = 0
        var fresh = Line()
        var kept = Line()
    }

    fileprivate struct Table {
        var entries: [UInt: Entry] = [:]
        var workers: [UInt: Worker] = [:]
        var nextTicket: UInt64 = 0
        /// When the one live deadline sweep is due, if one is scheduled.
        var armed: UInt64?
        var counts = Counts()
        var stopped = false
    }

    /// Nanoseconds a new connection has for its first header; nil for no deadline.
    private let headerNanoseconds: UInt64?
    /// Nanoseconds a keep-alive connection has for its next header; nil for no deadline.
    private let keptNanoseconds: UInt64?
    /// Open connections per network thread beyond which the oldest waiting one is closed.
    private let evictionThreshold: Int
    private let table = LockedState(Table())

    /// Deadlines of `headerTimeout` (nil or zero for none) on a server whose
    /// idle timer is `connectionTimeoutSeconds` (0 for none), whose
    /// `threads` network threads share `maxConnections`.
    init(headerTimeout: Duration?, connectionTimeoutSeconds: Int, maxConnections: Int, threads: Int) {
        let header = headerTimeout.flatMap(Self.nanoseconds)
        headerNanoseconds = header
        keptNanoseconds = header.flatMap { header in
            guard connectionTimeoutSeconds > 0 else { return nil }
            let (total, overflow) = UInt64(connectionTimeoutSeconds).multipliedReportingOverflow(by: 1_000_000_000)
            return overflow ? nil : total.addingReportingOverflow(header).partialValue
        }
        // libmicrohttpd splits its connection limit evenly between its threads.
        let share = max(1, maxConnections / max(1, threads))
        evictionThreshold = max(1, share - share / 10)
    }

    /// Positive durations in nanoseconds (saturating), else nil.
    private static func nanoseconds(_ duration: Duration) -> UInt64? {
        let (seconds, attoseconds) = duration.components
        guard seconds > 0 || (seconds == 0 && attoseconds > 0) else { return nil }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return UInt64.max / 2 }
        return whole + UInt64(attoseconds / 1_000_000_000)
    }

    /// Connections closed so far.
    package var counts: Counts { table.withLock { $0.counts } }

    /// Open connections the server is not closing, on every network thread.
    var openConnections: Int { table.withLock { $0.workers.values.reduce(0) { $0 + $1.open } } }

    /// Why the server closed the connection `key`, if it did (asked before
    /// its close notification, by the completion of its request).
    func closing(_ key: UInt) -> Closing? {
        table.withLock { $0.entries[key]?.closing }
    }

    // MARK: - libmicrohttpd's notifications (its threads)

    /// A connection was accepted (`key` its handle, `fd` its socket, `worker`
    /// its daemon): it waits for its first header, and when its thread's
    /// table is nearly full the longest-waiting connection there is closed.
    func opened(_ key: UInt, fd: Int32, worker: UInt) {
        let due = table.withLock { table -> UInt64? in
            guard !table.stopped else { return nil }
            var state = table.workers[worker] ?? Worker()
            state.open += 1
            table.workers[worker] = state
            // Before the newcomer joins a line, so it is never the one evicted.
            while table.workers[worker, default: Worker()].open > evictionThreshold,
                let victim = table.oldestWaiting(in: worker)
            {
                table.close(victim, because: .eviction)
            }
            table.entries[key] = Entry(fd: fd, worker: worker)
            return table.wait(key, line: .fresh, for: headerNanoseconds)
        }
        if let due { schedule(due) }
    }

    /// The header section of the connection's request is complete: no deadline
    /// while the request is handled.
    func headersArrived(_ key: UInt) {
        table.withLock { $0.stopWaiting(key) }
    }

    /// The connection's request is done: on a kept-alive connection it waits
    /// for the next header.
    func requestEnded(_ key: UInt) {
        let due = table.withLock { table -> UInt64? in
            guard !table.stopped, let entry = table.entries[key], entry.closing == nil else { return nil }
            table.stopWaiting(key)
            return table.wait(key, line: .kept, for: keptNanoseconds)
        }
        if let due { schedule(due) }
    }

    /// libmicrohttpd is closing the connection (before it closes its socket).
    func closed(_ key: UInt) {
        table.withLock { table in
            guard let entry = table.entries[key] else { return }
            table.stopWaiting(key)
            if entry.closing == nil { table.workers[entry.worker]?.open -= 1 }
            table.entries[key] = nil
        }
    }

    /// Forgets every connection; later calls and sweeps do nothing (the
    /// daemon has stopped and its descriptors are closed).
    func stop() {
        table.withLock { table in
            table.stopped = true
            table.entries = [:]
            table.workers = [:]
        }
    }

    // MARK: - The deadline sweep

    /// Makes sure a sweep runs at `due` (the table's `armed` was set to it).
    private func schedule(_ due: UInt64) {
        DispatchQueue.global().asyncAfter(deadline: DispatchTime(uptimeNanoseconds: due)) { [self] in
            sweep(scheduledFor: due)
        }
    }

    /// Closes the connections whose deadline has passed and schedules the
    /// next sweep; a sweep that is no longer the table's armed one does nothing.
    private func sweep(scheduledFor due: UInt64) {
        let next = table.withLock { table -> UInt64? in
            guard table.armed == due, !table.stopped else { return nil }
            table.armed = nil
            let now = DispatchTime.now().uptimeNanoseconds
            for worker in Array(table.workers.keys) {
                for line in [LineKind.fresh, .kept] {
                    while let key = table.front(of: line, in: worker),
                        let waiting = table.entries[key]?.waiting, waiting.deadline <= now
                    {
                        table.close(key, because: .headerDeadline)
                    }
                }
            }
            return table.arm(at: table.earliestDeadline())
        }
        if let next { schedule(next) }
    }
}

extension ConnectionDeadlines.Table {
    /// Puts `key` at the back of its worker's `line`, with a deadline
    /// `nanoseconds` from now (nil for none); returns when a sweep must be
    /// scheduled, when this deadline is the earliest.
    fileprivate mutating func wait(
        _ key: UInt, line: ConnectionDeadlines.LineKind, for nanoseconds: UInt64?
    )
        -> UInt64?
    {
        guard var entry = entries[key] else { return nil }
        let now = DispatchTime.now().uptimeNanoseconds
        nextTicket += 1
        let deadline = nanoseconds.map { now.addingReportingOverflow($0).partialValue } ?? UInt64.max
        entry.waiting = ConnectionDeadlines.Waiting(since: now, deadline: deadline, ticket: nextTicket, line: line)
        entries[key] = entry
        var worker = workers.removeValue(forKey: entry.worker) ?? ConnectionDeadlines.Worker()
        switch line {
        case .fresh:
            worker.fresh.append(ticket: nextTicket, key: key)
            worker.fresh.trim(isLive: isLive)
        case .kept:
            worker.kept.append(ticket: nextTicket, key: key)
            worker.kept.trim(isLive: isLive)
        }
        workers[entry.worker] = worker
        return deadline == UInt64.max ? nil : arm(at: deadline)
    }

    /// Whether a line's item is current (its connection still waits under that ticket).
    private func isLive(_ ticket: UInt64, _ key: UInt) -> Bool {
        entries[key]?.waiting?.ticket == ticket
    }

    /// Takes `key` out of its line (the item goes stale).
    fileprivate mutating func stopWaiting(_ key: UInt) {
        guard var entry = entries[key], let waiting = entry.waiting else { return }
        entry.waiting = nil
        entries[key] = entry
        switch waiting.line {
        case .fresh: workers[entry.worker]?.fresh.live -= 1
        case .kept: workers[entry.worker]?.kept.live -= 1
        }
    }

    /// The live front of `worker`'s `line`, stale items dropped on the way.
    fileprivate mutating func front(of line: ConnectionDeadlines.LineKind, in worker: UInt) -> UInt? {
        guard var state = workers.removeValue(forKey: worker) else { return nil }
        defer { workers[worker] = state }
        switch line {
        case .fresh:
            state.fresh.trim(isLive: isLive)
            return state.fresh.front?.key
        case .kept:
            state.kept.trim(isLive: isLive)
            return state.kept.front?.key
        }
    }

    /// The connection of `worker` that has waited longest for a header.
    fileprivate mutating func oldestWaiting(in worker: UInt) -> UInt? {
        let fresh = front(of: .fresh, in: worker)
        let kept = front(of: .kept, in: worker)
        guard let fresh, let freshSince = entries[fresh]?.waiting?.since else { return kept }
        guard let kept, let keptSince = entries[kept]?.waiting?.since else { return fresh }
        return freshSince <= keptSince ? fresh : kept
    }

    /// Shuts `key`'s socket down (libmicrohttpd then closes the connection)
    /// and counts it.
    ///
    /// Under the lock on purpose: the connection is still in the table, so
    /// libmicrohttpd has not closed the descriptor (its close notification
    /// waits for this lock). `shutdown` is a system call that calls nothing
    /// back.
    fileprivate mutating func close(_ key: UInt, because reason: ConnectionDeadlines.Closing) {
        guard var entry = entries[key], entry.closing == nil else { return }
        stopWaiting(key)
        entry.waiting = nil
        entry.closing = reason
        entries[key] = entry
        workers[entry.worker]?.open -= 1
        switch reason {
        case .headerDeadline: counts.headerTimeouts += 1
        case .eviction: counts.evictions += 1
        }
        if entry.fd >= 0 { shutdown(entry.fd, Int32(SHUT_RDWR)) }
    }

    /// The earliest deadline of any line's front (each line is in deadline order).
    fileprivate mutating func earliestDeadline() -> UInt64? {
        var earliest: UInt64?
        for worker in Array(workers.keys) {
            for line in [ConnectionDeadlines.LineKind.fresh, .kept] {
                guard let key = front(of: line, in: worker), let deadline = entries[key]?.waiting?.deadline,
                    deadline != UInt64.max
                else { continue }
                earliest = min(earliest ?? deadline, deadline)
            }
        }
        return earliest
    }

    /// Makes `deadline` the armed sweep when none is armed or it is earlier;
    /// returns it when a sweep must be scheduled for it.
    fileprivate mutating func arm(at deadline: UInt64?) -> UInt64? {
        guard let deadline, armed.map({ deadline < $0 }) ?? true else { return nil }
        armed = deadline
        return deadline
    }
}
