import Foundation
import VipsCore
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Runs this test binary again as a child process that plays a role
/// (`ChildProcessRoleTests`), and reads the lines it reports.
///
/// The child is the same executable (`/proc/self/exe`) asked to run only
/// `ChildProcessRoleTests/testChildRole`, with the role in its environment.
final class TestChildProcess: Sendable {
    static let roleVariable = "VIPSLOAD_TEST_CHILD_ROLE"
    /// Lines the child reports start with this.
    static let linePrefix = "CHILD "

    private let process: Process
    private struct Output {
        var pending = ""
        var lines: [String] = []
    }

    private let output = LockedState(Output())

    /// - Parameter launcher: a command that runs the child (for example
    ///   `["/usr/bin/taskset", "-c", "0"]`), or none.
    init(role: String, environment: [String: String], launcher: [String] = []) throws {
        let process = Process()
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let arguments = ["VipsLoadTests.ChildProcessRoleTests/testChildRole"]
        if let command = launcher.first {
            process.executableURL = URL(fileURLWithPath: command)
            process.arguments = Array(launcher.dropFirst()) + [executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        var env = ProcessInfo.processInfo.environment
        env[Self.roleVariable] = role
        for (name, value) in environment { env[name] = value }
        process.environment = env
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        self.process = process
        let handle = pipe.fileHandleForReading
        handle.readabilityHandler = { [self] handle in
            let data = handle.availableData
            guard !data.isEmpty else {
                handle.readabilityHandler = nil
                return
            }
            let text = String(decoding: data, as: UTF8.self)
            output.withLock { output in
                output.pending += text
                while let newline = output.pending.firstIndex(of: "\n") {
                    output.lines.append(String(output.pending[..<newline]))
                    output.pending.removeSubrange(...newline)
                }
            }
        }
        try process.run()
    }

    var processIdentifier: Int32 { process.processIdentifier }

    /// The complete lines reported with `TestChildProcess.report`, without the prefix.
    var reports: [String] {
        output.withLock { output in
            output.lines.filter { $0.hasPrefix(Self.linePrefix) }.map { String($0.dropFirst(Self.linePrefix.count)) }
        }
    }

    /// Everything the child printed so far (its own XCTest output included), for failure messages.
    var transcript: String {
        output.withLock { ($0.lines + [$0.pending]).joined(separator: "\n") }
    }

    /// Waits until a report satisfies `condition`; returns it, or nil after `timeout`.
    func waitForReport(timeout: TimeInterval = 120, where condition: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if let line = reports.first(where: condition) { return line }
            if !process.isRunning {
                // Give the reader a moment to drain the pipe after the child ended.
                Thread.sleep(forTimeInterval: 0.2)
                return reports.first(where: condition)
            }
            Thread.sleep(forTimeInterval: 0.005)
        } while Date() < deadline
        return reports.first(where: condition)
    }

    /// Kills the child with SIGKILL and waits for it to end.
    func kill() {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Waits for the child to end by itself (killing it after `timeout`); returns its status.
    @discardableResult
    func waitForExit(timeout: TimeInterval = 300) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning { kill() }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Called in the child: writes one report line straight to stdout (unbuffered).
    static func report(_ line: String) {
        FileHandle.standardOutput.write(Data((linePrefix + line + "\n").utf8))
    }
}
