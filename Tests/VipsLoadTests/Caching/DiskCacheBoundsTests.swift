import Foundation
import TestSupport
import XCTest

@testable import VipsLoad

/// What a disk cache may put on disk: writes in progress are bounded by the
/// size limit, and what a killed process left is swept at start-up.
final class DiskCacheBoundsTests: NetworkTestCase {
    /// Bytes of the files under `directory` (its private folders included).
    private static func bytes(under directory: URL) -> Int {
        guard let walker = FileManager.default.enumerator(atPath: directory.path) else { return 0 }
        var total = 0
        for case let name as String in walker {
            let attributes = try? FileManager.default.attributesOfItem(
                atPath: directory.appendingPathComponent(name).path)
            if attributes?[.type] as? FileAttributeType == .typeRegular { total += (attributes?[.size] as? Int) ?? 0 }
        }
        return total
    }

    func testWritesInProgressNeverPassTheSizeLimitAndEveryImageStillArrives() async throws {
        let limit = 1 << 20
        // Four bodies of 700 KB with no Content-Length, trickling: all four stream at once.
        var bodies: [Data] = []
        for index in 0..<4 {
            var body = try NetworkFixtures.jpeg(width: 64, height: 48, seed: 60 + index)
            body.append(Data(repeating: 0, count: 700_000 - body.count))
            bodies.append(body)
            server.route(
                "/big-\(index).jpg",
                TestHTTPServer.Response(
                    status: 200, headers: [("Content-Type", "image/jpeg"), ("Cache-Control", "max-age=3600")],
                    body: .data(body), declaredLength: .some(nil), chunkSize: 50_000, chunkDelay: 0.03))
        }
        let cache = try makeCache(sizeLimit: limit)
        let loader = makeLoader(cache: cache)
        let peak = LockedState(0)
        let watching = LockedState(true)
        let temporary = cacheDirectory.appendingPathComponent("tmp")
        let watcher = Thread {
            while watching.withLock({ $0 }) {
                let now = Self.bytes(under: temporary)
                peak.withLock { $0 = max($0, now) }
                Thread.sleep(forTimeInterval: 0.005)
            }
        }
        watcher.start()
        let urls = (0..<4).map { server.url("/big-\($0).jpg") }
        let loaded = try await withThrowingTaskGroup(of: (Int, Data?).self) { group in
            for index in 0..<4 {
                group.addTask {
                    let data = try await loader.loadData(for: .url(urls[index]))
                    return (index, NetworkFixtures.contents(of: data))
                }
            }
            var results: [Int: Data?] = [:]
            for try await (index, data) in group { results[index] = data }
            return results
        }
        watching.withLock { $0 = false }
        for index in 0..<4 { XCTAssertEqual(loaded[index] ?? nil, bodies[index], "body \(index) arrived whole") }
        XCTAssertLessThanOrEqual(peak.withLock { $0 }, limit, "writes in progress stayed within the limit")
        XCTAssertGreaterThan(peak.withLock { $0 }, 0, "some bodies did stream into the cache")
        XCTAssertEqual(cache.inFlight.inUse, 0, "every writer gave its bytes back")
        XCTAssertGreaterThanOrEqual(cache.metrics.writeFailures, 1, "a body past the budget moved out of the cache")
    }

    func testWhatAKilledWriterLeftIsSweptAtStartUp() throws {
        let directory = cacheDirectory!
        let child = try TestChildProcess(role: "cache-writer", environment: ["VIPSLOAD_TEST_DIR": directory.path])
        XCTAssertNotNil(child.waitForReport { $0 == "MIDWRITE 2" })
        child.kill()
        let temporary = directory.appendingPathComponent("tmp")
        XCTAssertEqual(
            NetworkFixtures.files(in: temporary).filter { $0.split(separator: "/").last?.hasPrefix("w-") == true }
                .count, 1)
        // The default configuration (abandoned files live an hour): the writer's
        // process is gone, so its folder goes at once.
        let cache = try DiskCache(directory: directory)
        cache.waitForBackgroundSweeps()
        XCTAssertEqual(NetworkFixtures.files(in: temporary).filter { !$0.hasPrefix("\(getpid())-") }, [])
        XCTAssertNotNil(cache.lookup("key-1"))
    }
}
