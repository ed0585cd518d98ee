import Foundation
import XCTest

/// A `vipsload serve` child process: started with its arguments, its stderr
/// read line by line as it comes, so a test can wait for a line (the
/// "listening on" line, a drain event, an access-log line) instead of sleeping.
final class ServeChild: @unchecked Sendable {
    let process = Process()
    private let errors = Pipe()
    private let lock = NSLock()
    private var lines: [String] = []
    private var partial = Data()
    private var waiters: [(String, DispatchSemaphore)] = []
    private let finishedReading = DispatchSemaphore(value: 0)
    /// The port from the "listening on" line.
    private(set) var port: UInt16 = 0

    /// Starts `vipsload serve ARGUMENTS` (with `--port 0 --bind 127.0.0.1` unless
    /// given, or unless `addsAddress` is false: the environment's `IMGPROXY_BIND`
    /// must then say 127.0.0.1) and waits for its "listening on" line.
    init(_ arguments: [String], environment: [String: String] = [:], addsAddress: Bool = true) throws {
        process.executableURL = CLIHarness.binary
        var all = ["serve"]
        if addsAddress, !arguments.contains("--port") { all += ["--port", "0"] }
        if addsAddress, !arguments.contains("--bind") { all += ["--bind", "127.0.0.1"] }
        process.arguments = all + arguments
        process.environment = CLIHarness.environment(environment)
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        let handle = errors.fileHandleForReading
        Thread.detachNewThread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                take(data)
            }
            finishedReading.signal()
        }
        guard let line = waitForLine(containing: "listening on http://127.0.0.1:") else {
            process.terminate()
            throw NSError(
                domain: "ServeChild", code: 1, userInfo: [NSLocalizedDescriptionKey: "never listened: \(stderr)"])
        }
        port = UInt16(line.split(separator: ":").last.map(String.init) ?? "") ?? 0
    }

    /// The URL of `path` on the server.
    func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)\(path)")!
    }

    /// Waits (at most `timeout` seconds) for a stderr line containing `text`, also one already written.
    func waitForLine(containing text: String, timeout: TimeInterval = 60) -> String? {
        let semaphore = DispatchSemaphore(value: 0)
        let found = lock.withLock { () -> String? in
            if let line = lines.first(where: { $0.contains(text) }) { return line }
            waiters.append((text, semaphore))
            return nil
        }
        if let found { return found }
        guard semaphore.wait(timeout: .now() + timeout) == .success else { return nil }
        return lock.withLock { lines.first { $0.contains(text) } }
    }

    /// Every stderr line so far.
    var stderr: String { lock.withLock { lines.joined(separator: "\n") } }

    /// Sends `signal` to the process.
    func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the exit: how it ended and its status.
    func wait() -> (reason: Process.TerminationReason, status: Int32) {
        process.waitUntilExit()
        finishedReading.wait()
        return (process.terminationReason, process.terminationStatus)
    }

    /// Ends the process if it still runs (a test that failed half-way).
    func stop() {
        if process.isRunning { process.terminate() }
    }

    private func take(_ data: Data) {
        let matched = lock.withLock { () -> [DispatchSemaphore] in
            partial.append(data)
            var complete: [String] = []
            while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
                complete.append(String(decoding: partial[partial.startIndex..<newline], as: UTF8.self))
                partial = Data(partial[partial.index(after: newline)...])
            }
            lines += complete
            var signalled: [DispatchSemaphore] = []
            waiters.removeAll { waiter in
                guard complete.contains(where: { $0.contains(waiter.0) }) else { return false }
                signalled.append(waiter.1)
                return true
            }
            return signalled
        }
        for semaphore in matched { semaphore.signal() }
    }
}
