import Dispatch
import Foundation
import VipsCore
import VipsLoad

/// SIGINT and SIGTERM stop a command cleanly instead of killing it.
///
/// On the first signal the command's task is cancelled (the pipeline cancels
/// its downloads and decodes; the command stops starting new work), the
/// process's temporary downloads are removed, and once the command has wound
/// down (at most `gracePeriod` later) the process exits with 128 + the
/// signal's number: 130 for SIGINT, 143 for SIGTERM. Outputs already written
/// stay (they are written atomically). A second signal exits at once.
///
/// The signals are received by `DispatchSourceSignal`s on a queue of their
/// own, so all of this runs on an ordinary thread: the process-level
/// disposition is only set to "ignore", and no code runs in a signal handler.
enum SignalHandling {
    /// How long a cancelled command may take to wind down before the process exits anyway.
    static let gracePeriod: DispatchTimeInterval = .seconds(5)

    private static let queue = DispatchQueue(label: "vipsload.signals")

    private struct State {
        /// The first signal received, if any.
        var received: Int32?
        /// Kept so the sources stay installed for the whole run.
        var sources: [any DispatchSourceSignal] = []
        /// Cancels the command's task, once it exists.
        var cancel: (@Sendable () -> Void)?
    }

    private static let state = LockedState(State())

    /// Whether a SIGINT or SIGTERM asked the process to stop: work that the
    /// task's cancellation does not reach (threads of its own) checks this
    /// before starting the next item.
    static var stopRequested: Bool { state.withLock { $0.received != nil } }

    /// Runs `command` on `arguments` as a cancellable task with SIGINT and
    /// SIGTERM handled as described above; returns its exit status when no
    /// signal came.
    static func run(
        _ command: sending @escaping ([String]) async throws(ArgumentParser.UsageError) -> Int32,
        _ arguments: [String]
    ) async throws(ArgumentParser.UsageError) -> Int32 {
        install()
        let task = Task { () async -> Result<Int32, ArgumentParser.UsageError> in
            do throws(ArgumentParser.UsageError) {
                return .success(try await command(arguments))
            } catch {
                return .failure(error)
            }
        }
        let signalledAlready = state.withLock { state -> Bool in
            state.cancel = { task.cancel() }
            return state.received != nil
        }
        if signalledAlready { task.cancel() }
        let result = await task.value
        if let signal = state.withLock({ $0.received }) {
            // On the signal queue, so the exit never races the grace timer's.
            queue.sync { () -> Void in finish(signal) }
        }
        return try result.get()
    }

    /// Starts receiving both signals.
    private static func install() {
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            // Ignored by the process, so only the dispatch source sees it.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { received(number) }
            source.resume()
            sources.append(source)
        }
        state.withLock { $0.sources = sources }
    }

    /// On the signal queue: the first signal stops the run, a second one ends the process.
    private static func received(_ number: Int32) {
        let (first, cancel) = state.withLock { state -> (Bool, (@Sendable () -> Void)?) in
            guard state.received == nil else { return (false, nil) }
            state.received = number
            return (true, state.cancel)
        }
        guard first else { finish(number) }
        Terminal.endProgress()
        Terminal.err("vipsload: \(number == SIGINT ? "interrupted" : "terminated"); stopping")
        cancel?()
        // Decode workers hold no output; a hung one would only delay the exit.
        WorkerPool.endAll()
        // Partial downloads and half-written outputs go now: the cancelled
        // work no longer needs them (finished outputs are kept).
        TemporaryDownloads.removeAll()
        OutputWriter.removeAllTemporaryFiles()
        queue.asyncAfter(deadline: .now() + gracePeriod) { finish(number) }
    }

    /// Removes the temporary downloads and exits with 128 + `signal`.
    private static func finish(_ signal: Int32) -> Never {
        WorkerPool.endAll()
        TemporaryDownloads.removeAll()
        OutputWriter.removeAllTemporaryFiles()
        exit(128 + signal)
    }
}
