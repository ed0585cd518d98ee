/// The state of one progressive load: which step was shown last, and the
/// tasks of the steps still pending.
///
/// Which step may be shown is decided under the lock; the stream is fed
/// outside it, by one thread at a time draining an outbox in decision order,
/// so two steps completing at once on two threads cannot reach the consumer
/// in the wrong order, and no continuation is resumed under the lock.
final class ProgressiveLoad: Sendable {
    private enum Delivery {
        case step(ProgressiveImage)
        case finish(VipsError?)
    }

    private struct State {
        var tasks: [Int: ImageTask] = [:]
        var delivered = -1
        var isFinished = false
        var outbox: [Delivery] = []
        var isDraining = false
    }

    private let ladder: [ImageRequest]
    private let continuation: AsyncThrowingStream<ProgressiveImage, any Error>.Continuation
    private let state = LockedState(State(), rank: .task)

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

    func receive(_ result: Result<Bitmap, VipsError>, step: Int) {
        let last = ladder.count - 1
        let (obsolete, drain) = state.withLock { state -> ([ImageTask], [Delivery]?) in
            guard !state.isFinished, step > state.delivered else { return ([], nil) }
            state.tasks[step] = nil
            var obsolete: [ImageTask] = []
            switch result {
            case .success(let bitmap):
                state.delivered = step
                state.outbox.append(
                    .step(ProgressiveImage(bitmap: bitmap, step: step, request: ladder[step], isFinal: step == last)))
                if step == last {
                    state.isFinished = true
                    state.outbox.append(.finish(nil))
                }
                // Smaller steps still pending can no longer be shown.
                let smaller = state.tasks.filter { $0.key < step }
                for key in smaller.keys { state.tasks[key] = nil }
                obsolete = Array(smaller.values)
            case .failure(let error):
                guard step == last else { return ([], nil) }
                state.isFinished = true
                state.outbox.append(.finish(error))
                obsolete = Array(state.tasks.values)
                state.tasks = [:]
            }
            return (obsolete, Self.takeOutbox(&state))
        }
        for task in obsolete { task.cancel() }
        if let drain { deliver(drain) }
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

    /// The outbox, when no other thread is draining it (this one then does).
    private static func takeOutbox(_ state: inout State) -> [Delivery]? {
        guard !state.isDraining, !state.outbox.isEmpty else { return nil }
        state.isDraining = true
        defer { state.outbox = [] }
        return state.outbox
    }

    private func deliver(_ first: [Delivery]) {
        var batch = first
        while true {
            for delivery in batch {
                switch delivery {
                case .step(let image): continuation.yield(image)
                case .finish(nil): continuation.finish()
                case .finish(let error?): continuation.finish(throwing: error)
                }
            }
            let more = state.withLock { state -> [Delivery]? in
                guard !state.outbox.isEmpty else {
                    state.isDraining = false
                    return nil
                }
                defer { state.outbox = [] }
                return state.outbox
            }
            guard let more else { return }
            batch = more
        }
    }
}
