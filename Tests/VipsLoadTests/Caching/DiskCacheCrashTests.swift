import Foundation
import XCTest

@testable import VipsLoad

/// A writer process killed with SIGKILL never leaves an entry that serves
/// wrong bytes: the cache stays valid for the next process.
final class DiskCacheCrashTests: XCTestCase {
    private var directory: URL!
    private var child: TestChildProcess?

    override func setUp() {
        directory = NetworkFixtures.makeDirectory("crash")
    }

    override func tearDown() {
        child?.kill()
        try? FileManager.default.removeItem(at: directory)
    }

    func testWriterKilledMidWriteLeavesTheCacheValid() throws {
        let child = try TestChildProcess(role: "cache-writer", environment: ["VIPSLOAD_TEST_DIR": directory.path])
        self.child = child
        XCTAssertNotNil(child.waitForReport { $0 == "MIDWRITE 2" }, "the writer reports half of entry 2 written")
        child.kill()
        XCTAssertEqual(child.reports.filter { $0.hasPrefix("COMMITTED") }, ["COMMITTED 0", "COMMITTED 1"])

        // The half-written file is there (so the kill did land mid-write), but invisible.
        let temporary = NetworkFixtures.files(in: directory.appendingPathComponent("tmp")).filter {
            $0.split(separator: "/").last?.hasPrefix("w-") == true
        }
        XCTAssertEqual(temporary.count, 1)
        let cache = try DiskCache(directory: directory)
        for version in 0..<2 {
            let hit = try XCTUnwrap(cache.lookup("key-\(version)"))
            XCTAssertEqual(
                NetworkFixtures.contents(of: hit.data),
                NetworkFixtures.versionedBody(version: version, size: 2 * 1024 * 1024))
        }
        XCTAssertNil(cache.lookup("key-2"))
        XCTAssertEqual(cache.metrics.corruptEntriesRemoved, 0)

        // The leftover goes once it is old enough to be abandoned for sure.
        let sweeper = try DiskCache(configuration: .init(directory: directory, abandonedFileLifetime: 0))
        sweeper.waitForBackgroundSweeps()
        XCTAssertFalse(NetworkFixtures.files(in: directory.appendingPathComponent("tmp")).contains(temporary[0]))
        XCTAssertNotNil(sweeper.lookup("key-1"))
    }

    func testWritersKilledAtRandomMomentsNeverLeaveGarbage() throws {
        var served = 0
        for round in 0..<4 {
            let child = try TestChildProcess(role: "cache-churn", environment: ["VIPSLOAD_TEST_DIR": directory.path])
            self.child = child
            XCTAssertNotNil(child.waitForReport { $0 == "READY" })
            Thread.sleep(forTimeInterval: Double.random(in: 0.05...0.4))
            child.kill()

            let cache = try DiskCache(directory: directory)
            for key in 0..<5 {
                guard let hit = cache.lookup("churn-\(key)") else { continue }
                served += 1
                let data = try XCTUnwrap(NetworkFixtures.contents(of: hit.data))
                let version = try XCTUnwrap(NetworkFixtures.version(of: data), "round \(round) key \(key)")
                XCTAssertEqual(version % 5, key)
                XCTAssertEqual(
                    data, NetworkFixtures.versionedBody(version: version, size: 50_000 + (version * 7919) % 400_000),
                    "round \(round) key \(key): the bytes of one complete version")
            }
            XCTAssertEqual(cache.metrics.corruptEntriesRemoved, 0, "round \(round)")
        }
        XCTAssertGreaterThan(served, 0, "the writers committed entries before they were killed")
    }
}
