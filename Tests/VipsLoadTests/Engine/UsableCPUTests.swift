import Foundation
import XCTest

@testable import VipsLoad

/// Real affinity: a child process started under `taskset` on one CPU sees
/// one usable CPU, and its default pipeline runs one decode at a time; an
/// unpinned child, the contrast, runs as many at once as it has usable CPUs.
final class UsableCPUTests: XCTestCase {
    private static var taskset: String? {
        ["/usr/bin/taskset", "/bin/taskset"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The child's report as numbers: `usable`, `affinity`, `decodeConcurrency`, `peak`, `threads`, `decodes`.
    private func runChild(launcher: [String], overlapTarget: Int, hold: TimeInterval) throws -> [String: Int] {
        let child = try TestChildProcess(
            role: "usable-cpu-decodes",
            environment: [
                "VIPSLOAD_TEST_OVERLAP_TARGET": String(overlapTarget),
                "VIPSLOAD_TEST_HOLD": String(hold)
            ], launcher: launcher)
        let line = child.waitForReport(timeout: 180) { $0.hasPrefix("DECODES ") }
        let status = child.waitForExit()
        let report = try XCTUnwrap(line, "the child reported (transcript: \(child.transcript))")
        XCTAssertEqual(status, 0, child.transcript)
        var values: [String: Int] = [:]
        for field in report.dropFirst("DECODES ".count).split(separator: " ") {
            let pair = field.split(separator: "=")
            if pair.count == 2, let value = Int(pair[1]) { values[String(pair[0])] = value }
        }
        return values
    }

    func testAChildPinnedToOneCPUSeesOneAndDecodesOneAtATime() throws {
        guard let taskset = Self.taskset else { throw XCTSkip("taskset (util-linux) is not installed") }
        let cpu = try XCTUnwrap(SystemResources.affinity()?.first, "this process's affinity")
        // Each decode waits (up to 1 s) for a second one to start beside it: with one CPU none may.
        let report = try runChild(launcher: [taskset, "-c", String(cpu)], overlapTarget: 2, hold: 1)
        XCTAssertEqual(report["affinity"], 1, "\(report)")
        XCTAssertEqual(report["usable"], 1, "\(report)")
        XCTAssertEqual(report["decodeConcurrency"], 1, "the default follows the usable CPUs: \(report)")
        XCTAssertEqual(report["decodes"], 3, "\(report)")
        XCTAssertEqual(report["peak"], 1, "never two decodes at once: \(report)")
        XCTAssertEqual(report["threads"], 1, "one decode thread: \(report)")
    }

    func testAnUnpinnedChildDecodesOnEveryUsableCPU() throws {
        let usable = SystemResources.current.usableCPUs
        guard usable >= 2 else {
            throw XCTSkip("this process can use \(usable) CPU: the contrast needs at least two")
        }
        let expected = min(usable, 3)
        // Each decode waits (up to 20 s) until `expected` run at once, which the default concurrency allows.
        let report = try runChild(launcher: [], overlapTarget: expected, hold: 20)
        XCTAssertEqual(report["usable"], usable, "\(report)")
        XCTAssertEqual(report["decodeConcurrency"], usable, "\(report)")
        XCTAssertEqual(report["peak"], expected, "the measurement sees decodes side by side: \(report)")
        XCTAssertEqual(report["threads"], expected, "\(report)")
    }
}

extension ChildProcessRoleTests {
    /// Decodes three JPEGs through a default `ImagePipeline()` and reports the
    /// usable CPUs it saw, its decode concurrency, and the most decodes that
    /// ran at once. Each decode, as it starts, waits up to
    /// `VIPSLOAD_TEST_HOLD` seconds for `VIPSLOAD_TEST_OVERLAP_TARGET`
    /// decodes to be running together, so any overlap the pipeline allows
    /// does happen (once it has, no decode waits any more).
    static func decodesOnUsableCPUs(_ environment: [String: String]) async throws {
        try VipsRuntime.start()
        let target = Int(environment["VIPSLOAD_TEST_OVERLAP_TARGET"] ?? "") ?? 2
        let hold = Double(environment["VIPSLOAD_TEST_HOLD"] ?? "") ?? 1
        let folder = try ImageFolder()
        let paths = try (0..<3).map { try folder.jpeg("photo-\($0)", width: 320, height: 240, seed: $0 + 1) }
        let pipeline = ImagePipeline()

        struct Tracker {
            var running = 0
            var peak = 0
            var decodes = 0
            var threads: Set<Int32> = []
        }
        let tracker = LockedState(Tracker())
        pipeline.engine.decodeObserver.withLock {
            $0 = { _ in
                let thread = MemoryPressureTrigger.currentThreadID
                tracker.withLock { tracker in
                    tracker.running += 1
                    tracker.decodes += 1
                    tracker.peak = max(tracker.peak, tracker.running)
                    tracker.threads.insert(thread)
                }
                let deadline = Date().addingTimeInterval(hold)
                while Date() < deadline, tracker.withLock({ $0.peak < target }) { Thread.sleep(forTimeInterval: 0.002) }
                tracker.withLock { $0.running -= 1 }
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for path in paths {
                group.addTask { _ = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(64))) }
            }
            try await group.waitForAll()
        }
        let resources = SystemResources.current
        let result = tracker.withLock { $0 }
        TestChildProcess.report(
            "DECODES usable=\(resources.usableCPUs) affinity=\(resources.affinityCPUs?.count ?? -1) "
                + "decodeConcurrency=\(pipeline.configuration.decodeConcurrency) peak=\(result.peak) "
                + "threads=\(result.threads.count) decodes=\(result.decodes)")
    }
}
