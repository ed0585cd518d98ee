import Synchronization

/// The state of one progressive load: which step was shown last, and the
/// tasks of the steps still pending.
///
/// Steps are yielded under the lock, so two steps completing at once on two
/// threads cannot reach the consumer in the wrong order.
final class ProgressiveLoad: Sendable {
    private struct State {
        var tasks: [Int: ImageTask] = [:]
        var delivered = -1
        var isFinished = false
    }

    private let ladder: [ImageRequest]
    private let continuation: AsyncThrowingStream<ProgressiveImage, any Error>.Continuation
    private let state = Mutex(State())

    init(ladder: [ImageRequest], continuation: AsyncThrowingStream<ProgressiveImage, any Error>.Continuation) {
        self.ladder = ladder
        self.continuation = continuation
    }

    var isFinished: Bool { state.withLock { $0.isFinished } }

    func add(_ task: ImageTask, step: Int) {
        let finished = state.withLock { state -> Bool in
            if !state.isFinished, step > state.delivered { state.tasks[step] = task; return false }
            return true
        }
        if finished { task.cancel() }
    }

    func receive(_ result: Result<Bitmap, any Error>, step: Int) {
        let last = ladder.count - 1
        // Finishing runs the stream's termination handler, which takes the
        // lock: so the verdict is reached (and the step yielded) under the
        // lock, and the stream finished after it.
        let (obsolete, ending) = state.withLock { state -> ([ImageTask], Result<Void, any Error>?) in
            guard !state.isFinished, step > state.delivered else { return ([], nil) }
            state.tasks[step] = nil
            switch result {
            case .success(let bitmap):
                state.delivered = step
                continuation.yield(ProgressiveImage(bitmap: bitmap, step: step, request: ladder[step], isFinal: step == last))
                if step == last { state.isFinished = true }
                // Smaller steps still pending can no longer be shown.
                let smaller = state.tasks.filter { $0.key < step }
                for key in smaller.keys { state.tasks[key] = nil }
                return (Array(smaller.values), step == last ? .success(()) : nil)
            case .failure(let error):
                guard step == last else { return ([], nil) }
                state.isFinished = true
                defer { state.tasks = [:] }
                return (Array(state.tasks.values), .failure(error))
            }
        }
        for task in obsolete { task.cancel() }
        switch ending {
        case .success?: continuation.finish()
        case .failure(let error)?: continuation.finish(throwing: error)
        case nil: break
        }
    }

    /// The consumer went away: cancel everything still pending.
    func terminate() {
        let tasks = state.withLock { state -> [ImageTask] in
            state.isFinished = true
            defer { state.tasks = [:] }
            return Array(state.tasks.values)
        }
        for task in tasks { task.cancel() }
    }
}
