import Synchronization

/// One request in flight: await its `image`, `cancel()` it, or change its
/// `priority` while it waits.
///
/// A task completes exactly once — with a bitmap, an error, or
/// `CancellationError` — and every caller awaiting it is resumed exactly once
/// with that outcome. Cancelling a task cancels the underlying work only when
/// no other task shares it.
public final class ImageTask: Sendable, Hashable, CustomStringConvertible {
    /// What the task loads.
    public let request: ImageRequest
    /// Unique within the process; also orders tasks by creation.
    let id: Int

    /// Where the task stands.
    public enum State: Sendable, Hashable {
        /// Waiting or working.
        case running
        /// Cancelled before it completed.
        case cancelled
        /// Completed with a bitmap or an error.
        case completed
    }

    private struct Shared {
        var priority: ImageRequest.Priority
        var outcome: Result<Bitmap, any Error>?
        var waiters: [CheckedContinuation<Bitmap, any Error>] = []
        var observers: [@Sendable (Result<Bitmap, any Error>) -> Void] = []
    }

    private static let ids = Atomic<Int>(0)
    private let graph: JobGraph?
    private let shared: Mutex<Shared>

    init(request: ImageRequest, graph: JobGraph?) {
        self.request = request
        self.graph = graph
        id = Self.ids.add(1, ordering: .relaxed).newValue
        shared = Mutex(Shared(priority: request.priority))
    }

    /// A task that has already completed (a memory-cache hit).
    convenience init(request: ImageRequest, completedWith bitmap: Bitmap) {
        self.init(request: request, graph: nil)
        shared.withLock { $0.outcome = .success(bitmap) }
    }

    /// The task's priority. Raising it while the task waits moves it ahead of
    /// waiting work of lower priority; work shared by several tasks runs at the
    /// highest of their priorities. No effect once the task has completed.
    public var priority: ImageRequest.Priority {
        get { shared.withLock { $0.priority } }
        set {
            let changed = shared.withLock { shared -> Bool in
                guard shared.outcome == nil, shared.priority != newValue else { return false }
                shared.priority = newValue
                return true
            }
            if changed { graph?.priorityChanged(of: self) }
        }
    }

    /// Running, cancelled or completed.
    public var state: State {
        shared.withLock { shared in
            switch shared.outcome {
            case nil: return .running
            case .failure(let error) where error is CancellationError: return .cancelled
            default: return .completed
            }
        }
    }

    /// Cancels the task and resumes every awaiting caller with
    /// `CancellationError`. Work no other task shares is cancelled: a waiting
    /// load or decode never starts, a running load is cancelled, and a running
    /// decode (which cannot be interrupted) delivers to no one but still fills
    /// the memory cache. No effect once the task has completed.
    public func cancel() {
        guard let taken = settle(.failure(CancellationError())) else { return }
        graph?.detach(self)
        graph?.metrics.cancelled.add(1, ordering: .relaxed)
        Self.deliver(.failure(CancellationError()), to: taken)
    }

    /// The decoded bitmap. Cancelling the awaiting Swift task cancels this task.
    ///
    /// - Throws: `VipsError` when loading or decoding fails, `CancellationError` when cancelled.
    public nonisolated(nonsending) var image: Bitmap {
        get async throws {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let outcome = shared.withLock { shared -> Result<Bitmap, any Error>? in
                        if let outcome = shared.outcome { return outcome }
                        shared.waiters.append(continuation)
                        return nil
                    }
                    if let outcome { continuation.resume(with: outcome) }
                }
            } onCancel: {
                cancel()
            }
        }
    }

    public var description: String { "ImageTask #\(id) \(request)" }

    public static func == (lhs: ImageTask, rhs: ImageTask) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    // MARK: - Pipeline side

    /// Completes the task; false when it had already completed or been cancelled.
    @discardableResult
    func complete(with result: Result<Bitmap, any Error>) -> Bool {
        guard let taken = settle(result) else { return false }
        if case .failure(let error) = result {
            if error is CancellationError {
                graph?.metrics.cancelled.add(1, ordering: .relaxed)
            } else {
                graph?.metrics.failed.add(1, ordering: .relaxed)
            }
        }
        Self.deliver(result, to: taken)
        return true
    }

    /// Calls `body` once with the outcome: at once if the task has completed,
    /// otherwise on the thread that completes it.
    func onCompletion(_ body: @escaping @Sendable (Result<Bitmap, any Error>) -> Void) {
        let outcome = shared.withLock { shared -> Result<Bitmap, any Error>? in
            if let outcome = shared.outcome { return outcome }
            shared.observers.append(body)
            return nil
        }
        if let outcome { body(outcome) }
    }

    private typealias Taken = (waiters: [CheckedContinuation<Bitmap, any Error>],
                               observers: [@Sendable (Result<Bitmap, any Error>) -> Void])

    /// Records the outcome once and takes whoever waits for it.
    private func settle(_ result: Result<Bitmap, any Error>) -> Taken? {
        shared.withLock { shared -> Taken? in
            guard shared.outcome == nil else { return nil }
            shared.outcome = result
            defer { shared.waiters = []; shared.observers = [] }
            return (shared.waiters, shared.observers)
        }
    }

    /// Resumes outside every lock: a resumed caller may at once call back into the pipeline.
    private static func deliver(_ result: Result<Bitmap, any Error>, to taken: Taken) {
        for waiter in taken.waiters { waiter.resume(with: result) }
        for observer in taken.observers { observer(result) }
    }
}
