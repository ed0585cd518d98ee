import Foundation
import VipsCore
import VipsSynthesis
import XCTest

/// `thumb --shard K/N` and the shards job engines assign through the
/// environment: run concurrently on real files, the shards' union is exactly
/// the input set, with no input in two shards.
final class ThumbShardTests: XCTestCase {
    private static let inputCount = 40

    /// A folder of `inputCount` small JPEGs (some in a sub-folder).
    private func corpus() throws -> URL {
        let dir = try CLIHarness.temporaryFolder(for: self)
        let input = dir.appendingPathComponent("in")
        for index in 0..<Self.inputCount {
            let url = input.appendingPathComponent(index % 5 == 0 ? "sub/i\(index).jpg" : "i\(index).jpg")
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try ImageSynthesizer.data(width: 64, height: 48, seed: index, format: .jpeg()).write(to: url)
        }
        return input
    }

    private func allInputs(_ input: URL) throws -> Set<String> {
        let found = try FileManager.default.subpathsOfDirectory(atPath: input.path).filter { $0.hasSuffix(".jpg") }
        return Set(found.map { input.appendingPathComponent($0).path })
    }

    /// The inputs a run's `--json` report says were written.
    private func written(_ lines: [String]) throws -> [String] {
        try lines.compactMap { line in
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], line)
            return object["status"] as? String == "written" ? object["input"] as? String : nil
        }
    }

    /// The path of GNU parallel, when installed.
    private var gnuParallel: String? {
        for folder in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":") {
            let path = "\(folder)/parallel"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    func testFourConcurrentShardsCoverEveryInputExactlyOnce() throws {
        let input = try corpus()
        let out = input.deletingLastPathComponent().appendingPathComponent("out")
        var lines: [String] = []
        if let parallel = gnuParallel {
            // As docs/scale-out.md runs it: four shards at once, one process each.
            let process = Process()
            process.executableURL = URL(fileURLWithPath: parallel)
            process.arguments = [
                "--will-cite", "-j", "4", CLIHarness.binary.path, "thumb", "--json", "-q", "-j", "1",
                "-s", "32", "-o", out.path, "--shard", "{}/4", input.path, ":::", "1", "2", "3", "4"
            ]
            process.environment = CLIHarness.environment()
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            try process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0, "every shard succeeded")
            lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        } else {
            // No GNU parallel: four background processes at once.
            let group = DispatchGroup()
            let results = LockedResults()
            for shard in 1...4 {
                group.enter()
                DispatchQueue.global().async {
                    defer { group.leave() }
                    let result = try? CLIHarness.run([
                        "thumb", "--json", "-q", "-j", "1", "-s", "32", "-o", out.path,
                        "--shard", "\(shard)/4", input.path
                    ])
                    results.add(result)
                }
            }
            group.wait()
            for result in results.all {
                XCTAssertEqual(result?.status, 0, result?.stderr ?? "did not run")
                lines += result?.stdoutLines ?? []
            }
        }
        let summaries = lines.filter { $0.contains("\"summary\"") }
        XCTAssertEqual(summaries.count, 4, "four shards reported")
        let inputs = try written(lines)
        XCTAssertEqual(inputs.count, Set(inputs).count, "no input in two shards")
        XCTAssertEqual(Set(inputs), try allInputs(input), "the union is exactly the input set")
        for summary in summaries {
            XCTAssertFalse(summary.contains("\"written\": 0,"), "each shard has a share: \(summary)")
        }
        let thumbnails = try FileManager.default.subpathsOfDirectory(atPath: out.path).filter { $0.hasSuffix(".jpg") }
        XCTAssertEqual(thumbnails.count, Self.inputCount)
    }

    func testShardMembershipIsPerInputSoAddingInputsMovesNoOther() throws {
        let input = try corpus()
        let out = input.deletingLastPathComponent().appendingPathComponent("out")
        let before = try written(
            try CLIHarness.run(["thumb", "--json", "-F", "-s", "32", "-o", out.path, "--shard", "2/3", input.path])
                .stdoutLines)
        for index in 100..<110 {
            try ImageSynthesizer.data(width: 40, height: 40, seed: index, format: .jpeg())
                .write(to: input.appendingPathComponent("new\(index).jpg"))
        }
        let after = try written(
            try CLIHarness.run(["thumb", "--json", "-F", "-s", "32", "-o", out.path, "--shard", "2/3", input.path])
                .stdoutLines)
        XCTAssertFalse(before.isEmpty)
        XCTAssertEqual(Set(after.filter { !$0.contains("/new1") }), Set(before), "the old inputs stay in their shard")
    }

    func testShardsFromKubernetesSlurmAndAWSBatchEnvironments() throws {
        let input = try corpus()
        let out = input.deletingLastPathComponent().appendingPathComponent("out")
        func shard(_ arguments: [String], _ environment: [String: String]) throws -> Set<String> {
            let result = try CLIHarness.run(
                ["thumb", "--json", "-F", "-s", "32", "-o", out.path] + arguments + [input.path],
                environment: environment)
            XCTAssertEqual(result.status, 0, result.stderr)
            return Set(try written(result.stdoutLines))
        }
        var union: Set<String> = []
        for index in 1...4 {
            let explicit = try shard(["--shard", "\(index)/4"], [:])
            union.formUnion(explicit)
            XCTAssertEqual(
                try shard(["--shard-count", "4"], ["JOB_COMPLETION_INDEX": "\(index - 1)"]), explicit,
                "Kubernetes index \(index - 1)")
            XCTAssertEqual(
                try shard(
                    [], ["SLURM_ARRAY_TASK_ID": "\(index)", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_COUNT": "4"]),
                explicit, "Slurm task \(index) of an array 1-4")
            XCTAssertEqual(
                try shard([], ["AWS_BATCH_JOB_ARRAY_INDEX": "\(index - 1)", "AWS_BATCH_JOB_ARRAY_SIZE": "4"]), explicit,
                "AWS Batch child \(index - 1)")
        }
        XCTAssertEqual(union, try allInputs(input))
        XCTAssertEqual(
            try shard(["--shard", "1/4"], ["JOB_COMPLETION_INDEX": "3"]), try shard(["--shard", "1/4"], [:]),
            "--shard overrides the environment")

        let noCount = try CLIHarness.run(
            ["thumb", "-o", out.path, input.path], environment: ["JOB_COMPLETION_INDEX": "1"])
        XCTAssertEqual(noCount.status, 2)
        XCTAssertTrue(noCount.stderr.contains("pass --shard-count N"), noCount.stderr)
        let outOfRange = try CLIHarness.run(
            ["thumb", "--shard-count", "2", "-o", out.path, input.path],
            environment: ["JOB_COMPLETION_INDEX": "2"])
        XCTAssertEqual(outOfRange.status, 2, outOfRange.stderr)
        for bad in ["0/4", "5/4", "2", "a/b"] {
            XCTAssertEqual(try CLIHarness.run(["thumb", "--shard", bad, "-o", out.path, input.path]).status, 2, bad)
        }
    }
}

/// Results collected from several threads.
private final class LockedResults: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [CLIHarness.Result?] = []

    func add(_ result: CLIHarness.Result?) {
        lock.lock()
        results.append(result)
        lock.unlock()
    }

    var all: [CLIHarness.Result?] {
        lock.lock()
        defer { lock.unlock() }
        return results
    }
}
