import Dispatch
import Foundation
import VipsCore
import VipsLoad

/// SIGINT and SIGTERM for `vipsload serve`: the first is handed to the
/// command (which drains the server), a second ends the process at once
/// (128 + its number). Received by dispatch sources on a queue of their own:
/// no code runs in a signal handler.
final class ServeSignals: Sendable {
    private struct State {
        var sources: [any DispatchSourceSignal] = []
        var received: Int32?
        var waiter: CheckedContinuation<Int32, Never>?
    }

    private let state = LockedState(State())
    private let queue = DispatchQueue(label: "vipsload-serve-signals")

    /// Starts receiving both signals (the process no longer dies of them).
    init() {
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [state] in
                let (first, waiter) = state.withLock { state -> (Bool, CheckedContinuation<Int32, Never>?) in
                    guard state.received == nil else { return (false, nil) }
                    state.received = number
                    defer { state.waiter = nil }
                    return (true, state.waiter)
                }
                guard first else {
                    WorkerPool.endAll()
                    TemporaryDownloads.removeAll()
                    exit(128 + number)
                }
                waiter?.resume(returning: number)
            }
            source.resume()
            sources.append(source)
        }
        state.withLock { $0.sources = sources }
    }

    /// Returns the first signal's number once it has come.
    func next() async -> Int32 {
        await withCheckedContinuation { continuation in
            let received = state.withLock { state -> Int32? in
                if let received = state.received { return received }
                state.waiter = continuation
                return nil
            }
            if let received { continuation.resume(returning: received) }
        }
    }
}
