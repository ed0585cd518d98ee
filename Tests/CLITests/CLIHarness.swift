import Foundation
import VipsCore
import XCTest

/// Runs the built `vipsload` binary and captures its exit status and output.
struct CLIHarness {
    struct Result {
        let status: Int32
        let stdout: String
        let stderr: String
        /// Standard output as bytes (a thumbnail written with `--out -`).
        let stdoutData: Data
        var stdoutLines: [String] { stdout.split(separator: "\n").map(String.init) }

        /// `thumb --json`'s output: the JSON object of each input, by input path, and the summary.
        func jsonReport() throws -> (inputs: [String: [String: Any]], summary: [String: Any]) {
            var inputs: [String: [String: Any]] = [:]
            var summary: [String: Any] = [:]
            for line in stdoutLines {
                let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], line)
                if let input = object["input"] as? String {
                    XCTAssertNil(inputs[input], "\(input) reported once")
                    inputs[input] = object
                } else {
                    summary = try XCTUnwrap(object["summary"] as? [String: Any], line)
                }
            }
            return (inputs, summary)
        }
    }

    /// The `vipsload` binary next to the test executable in the build folder.
    static var binary: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("vipsload")
    }

    /// Variables of job engines that assign shards; removed from a child's
    /// environment unless a test sets them, so a test run inside a Slurm or
    /// Kubernetes job is not sharded by its host.
    static let shardVariables = [
        "JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_STEP", "AWS_BATCH_JOB_ARRAY_INDEX", "AWS_BATCH_JOB_ARRAY_SIZE"
    ]

    /// The environment for a child: this process's, without shard variables, plus `extra`.
    static func environment(_ extra: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for name in shardVariables { environment[name] = nil }
        environment.merge(extra) { _, new in new }
        return environment
    }

    /// Starts `vipsload` with `arguments`, its output discarded, and returns the running process.
    static func start(_ arguments: [String], environment extra: [String: String] = [:]) throws -> Process {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = environment(extra)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Runs `vipsload` with `arguments`, feeding it `stdin` (default: nothing),
    /// in `currentDirectory` (default: this process's working folder).
    static func run(
        _ arguments: [String], stdin: Data = Data(), environment extra: [String: String] = [:],
        currentDirectory: URL? = nil
    ) throws -> Result {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = environment(extra)
        if let currentDirectory { process.currentDirectoryURL = currentDirectory }
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        // A child that exits without reading its input must not kill the tests with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        try process.run()
        DispatchQueue.global().async {
            try? input.fileHandleForWriting.write(contentsOf: stdin)
            try? input.fileHandleForWriting.close()
        }
        // Read both pipes before waiting, so a large output cannot block the child.
        let group = DispatchGroup()
        nonisolated(unsafe) var outData = Data(), errData = Data()
        group.enter()
        DispatchQueue.global().async {
            outData = out.fileHandleForReading.readDataToEndOfFile(); group.leave()
        }
        errData = err.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self), stdoutData: outData)
    }

    /// A fresh temporary folder, removed when the test ends.
    static func temporaryFolder(for test: XCTestCase) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("vipsload-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        test.addTeardownBlock { try? FileManager.default.removeItem(at: url) }
        return url
    }
}
