import Foundation

/// The delegate queue of an `HTTPDataLoader`'s session, with back-pressure.
///
/// FoundationNetworking hands every received body chunk to the delegate queue
/// as an operation and never waits for it; when the delegate (writing chunks
/// to a file) falls behind the network, the chunks pile up in memory, as much
/// as the whole body on a fast link and a busy machine. Here adding an
/// operation waits while `pendingLimit` operations are queued, which stalls
/// the session's network thread, so the socket is read only as fast as the
/// chunks are written. The wait is bounded (`maximumWait` per operation), so
/// the queue can never deadlock the session, only slow it.
final class HTTPDelegateQueue: OperationQueue, @unchecked Sendable {
    private let slots: DispatchSemaphore
    private let maximumWait: DispatchTimeInterval

    /// - Parameters:
    ///   - pendingLimit: operations queued before adding waits (a body chunk is
    ///     at most 16 KiB, so 64 keep about 1 MiB in flight).
    ///   - maximumWait: the longest one addition waits.
    init(pendingLimit: Int = 64, maximumWait: DispatchTimeInterval = .milliseconds(100)) {
        slots = DispatchSemaphore(value: pendingLimit)
        self.maximumWait = maximumWait
        super.init()
        // Serial: a task's events must reach the delegate in order.
        maxConcurrentOperationCount = 1
        name = "VipsLoad.HTTPDataLoader.delegate"
    }

    override func addOperation(_ block: @escaping @Sendable () -> Void) {
        let acquired = slots.wait(timeout: .now() + maximumWait) == .success
        let slots = self.slots
        super.addOperation {
            block()
            if acquired { slots.signal() }
        }
    }
}
