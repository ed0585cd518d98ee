import Foundation

/// A subscription to a data unit alone, with no decode: how a prefetch to the
/// data cache loads a source. Guarded by the engine lock.
final class DataLoadTicket: @unchecked Sendable {
    /// The ticket's place in its data unit; nil once completed or cancelled.
    var subscription: WorkSubscription?
}

extension PipelineEngine {
    /// Loads `request`'s data (joining a load in flight, or starting one that
    /// reads the data cache first and streams a download into it) without
    /// decoding it; `completion` is called once, after the engine lock, unless
    /// the ticket is cancelled first. A decode of the same source that starts
    /// meanwhile joins the load and raises its priority.
    func loadDataOnly(
        _ request: ValidatedRequest,
        completion: @escaping @Sendable (Result<ImageData, VipsError>) -> Void
    ) -> DataLoadTicket {
        let ticket = DataLoadTicket()
        lock.perform { effects in
            let (unit, joined) = loads.join(request.loadKey) {
                startLoad(
                    request.request.source, key: request.loadKey, policy: request.dataPolicy,
                    priority: request.priority, &effects)
            }
            if joined { metrics.dataLoadsShared.add(1, ordering: .relaxed) }
            ticket.subscription = unit.subscribe(priority: request.priority, &effects) { [weak self] event in
                let result: Result<ImageData, VipsError>
                switch event {
                case .progress: return
                case .value(let data): result = .success(data)
                case .failure(let error): result = .failure(error)
                }
                let current =
                    self?.lock.perform { effects -> Bool in
                        guard let subscription = ticket.subscription else { return false }
                        ticket.subscription = nil
                        subscription.cancel(&effects)
                        return true
                    } ?? false
                if current { completion(result) }
            }
        }
        return ticket
    }

    /// Leaves the ticket's data unit (cancelling its load when no one else waits for it).
    func cancel(_ ticket: DataLoadTicket) {
        lock.perform { effects in
            ticket.subscription?.cancel(&effects)
            ticket.subscription = nil
        }
    }
}
