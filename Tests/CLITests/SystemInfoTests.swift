import Foundation
import VipsCore
import XCTest

/// `vipsload info --system`: what was detected and where it came from, as
/// text and JSON, and that a CPU affinity set from outside is what it reports.
final class SystemInfoTests: XCTestCase {
    func testSystemReportNamesItsSourcesAndDefaults() throws {
        let text = try CLIHarness.run(["info", "--system"])
        XCTAssertEqual(text.status, 0, text.stderr)
        let resources = SystemResources.current
        XCTAssertTrue(text.stdout.hasPrefix("usable CPUs: \(resources.usableCPUs) (affinity "), text.stdout)
        XCTAssertTrue(text.stdout.contains("memory limit: "), text.stdout)
        XCTAssertTrue(text.stdout.contains(resources.memoryLimitFile ?? "MemTotal of /proc/meminfo"), text.stdout)
        XCTAssertTrue(text.stdout.contains("defaults: decode concurrency \(resources.usableCPUs) "), text.stdout)
        XCTAssertTrue(text.stdout.contains("memory pressure monitor: "), text.stdout)

        let json = try CLIHarness.run(["info", "--system", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let object = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], json.stdout)
        XCTAssertEqual(object["usableCPUs"] as? Int, resources.usableCPUs)
        XCTAssertEqual(object["decodeConcurrency"] as? Int, resources.usableCPUs)
        XCTAssertEqual(object["memoryLimit"] as? Int, resources.memoryLimit)
        XCTAssertEqual(object["memoryLimitSource"] as? String, resources.memoryLimitSource.rawValue)
        XCTAssertEqual(object["memoryCacheLimit"] as? Int, min(resources.memoryLimit / 5, 512 << 20))
        XCTAssertEqual(object["memoryPressureFile"] as? String, resources.memoryPressureFile)
        XCTAssertNotNil(object["notes"] as? [String])
    }

    func testUnderTasksetItReportsOneUsableCPU() throws {
        guard
            let taskset = ["/usr/bin/taskset", "/bin/taskset"].first(where: {
                FileManager.default.isExecutableFile(atPath: $0)
            })
        else {
            throw XCTSkip("taskset (util-linux) is not installed")
        }
        let cpu = try XCTUnwrap(SystemResources.current.affinityCPUs?.last)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: taskset)
        process.arguments = ["-c", String(cpu), CLIHarness.binary.path, "info", "--system", "--json"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        let object = try XCTUnwrap(
            JSONSerialization.jsonObject(with: data) as? [String: Any], String(decoding: data, as: UTF8.self))
        XCTAssertEqual(object["usableCPUs"] as? Int, 1)
        XCTAssertEqual(object["affinityCPUs"] as? [Int], [cpu])
        XCTAssertEqual(
            object["decodeConcurrency"] as? Int, 1, "thumb --jobs and bench --concurrency default to the same")
    }
}
