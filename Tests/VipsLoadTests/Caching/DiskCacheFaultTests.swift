import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsLoad

/// A disk cache on a full disk, on a read-only file system, and with its
/// folder deleted while running: the pipeline keeps delivering images (from
/// the network), and the cache is consistent afterwards.
///
/// The full and read-only file systems are real: a small tmpfs the test
/// mounts (`ScratchFileSystem`), which gives ENOSPC and EROFS like a disk does.
final class DiskCacheFaultTests: NetworkTestCase {
    private var scratch: ScratchFileSystem?

    override func tearDown() {
        scratch?.unmount()
        scratch = nil
        super.tearDown()
    }

    /// Puts this test's cache folder on a new tmpfs of `size` bytes.
    private func mountCacheFileSystem(size: Int) throws -> ScratchFileSystem {
        let fileSystem = try ScratchFileSystem(size: size)
        scratch = fileSystem
        try? FileManager.default.removeItem(at: cacheDirectory)
        cacheDirectory = fileSystem.root.appendingPathComponent("cache", isDirectory: true)
        return fileSystem
    }

    private func makePipeline(cache: DiskCache) -> ImagePipeline {
        ImagePipeline(
            configuration: .init(
                decodeConcurrency: 2, memoryCache: nil, dataCache: cache,
                http: HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)))
    }

    /// Serves `data` at `path` as a cacheable JPEG and returns the request for a 64 px thumbnail.
    private func serve(_ path: String, _ data: Data, cacheControl: String = "public, max-age=3600") -> ImageRequest {
        server.route(path, .ok(data, headers: [("Cache-Control", cacheControl)]))
        return ImageRequest(url: server.url(path), size: .maxPixelSize(64))
    }

    /// Loads every request, checking each thumbnail's size.
    private func loadAll(
        _ requests: [ImageRequest], with pipeline: ImagePipeline,
        file: StaticString = #filePath, line: UInt = #line
    ) async throws {
        for request in requests {
            let bitmap = try await pipeline.image(for: request)
            XCTAssertEqual(max(bitmap.width, bitmap.height), 64, "\(request)", file: file, line: line)
        }
    }

    /// Checks the cache folder is consistent — no file of an unfinished write,
    /// every metadata file with its one body and every body with its metadata,
    /// and each entry a new cache finds holding exactly the bytes served —
    /// and returns the keys stored.
    @discardableResult
    private func assertCacheConsistent(
        _ bodies: [String: Data], file: StaticString = #filePath,
        line: UInt = #line
    ) async throws -> Set<String> {
        let temporary = cacheDirectory.appendingPathComponent("tmp")
        await waitUntil("the cache's temporary files are gone", file: file, line: line) {
            NetworkFixtures.files(in: temporary).isEmpty
        }
        let names = NetworkFixtures.files(in: cacheDirectory.appendingPathComponent("entries"))
        let stem = { (name: String) in String(name.prefix { $0 != "." }) }
        let metadataStems = names.filter { $0.hasSuffix(".meta") }.map(stem)
        let bodyStems = names.filter { $0.hasSuffix(".body") }.map(stem)
        XCTAssertEqual(
            metadataStems.count + bodyStems.count, names.count, "only entry files: \(names)", file: file, line: line)
        XCTAssertEqual(
            metadataStems.sorted(), bodyStems.sorted(), "one body per metadata file: \(names)", file: file, line: line)

        let cache = try DiskCache(directory: cacheDirectory, sizeLimit: 64 << 20)
        var stored: Set<String> = []
        for (key, expected) in bodies where cache.entry(for: key) != nil {
            let hit = try XCTUnwrap(
                cache.lookup(key), "\(key) has metadata but does not verify", file: file, line: line)
            XCTAssertEqual(NetworkFixtures.contents(of: hit.data), expected, "\(key)", file: file, line: line)
            stored.insert(key)
        }
        XCTAssertEqual(cache.metrics.corruptEntriesRemoved, 0, file: file, line: line)
        XCTAssertEqual(stored.count, metadataStems.count, "every entry belongs to a served URL", file: file, line: line)
        return stored
    }

    func testAFullDiskStillDeliversEveryImageAndLeavesTheCacheConsistent() async throws {
        let fileSystemSize = 2 << 20
        _ = try mountCacheFileSystem(size: fileSystemSize)
        // The cache's own limit is far above what the disk holds: the disk fills first.
        let cache = try DiskCache(directory: cacheDirectory, sizeLimit: 64 << 20)
        let pipeline = makePipeline(cache: cache)

        let big = try ImageSynthesizer.data(width: 2400, height: 1800, seed: 40, format: .jpeg(quality: 95))
        XCTAssertGreaterThan(big.count, fileSystemSize, "the first body cannot fit even on the empty disk")
        var bodies = [serve("/big.jpg", big).source.key: big]
        var requests = [serve("/big.jpg", big)]
        for index in 0..<6 {
            let medium = try ImageSynthesizer.data(
                width: 1200, height: 900, seed: 41 + index, format: .jpeg(quality: 90))
            let request = serve("/medium-\(index).jpg", medium)
            requests.append(request)
            bodies[request.source.key] = medium
        }
        XCTAssertGreaterThan(
            bodies.values.reduce(0) { $0 + $1.count } - big.count, fileSystemSize,
            "the medium bodies overfill the disk")

        try await loadAll(requests, with: pipeline)
        XCTAssertEqual(pipeline.metrics.failed, 0)
        XCTAssertEqual(pipeline.metrics.downloads, requests.count)
        XCTAssertEqual(server.totalRequestCount, requests.count, "a refused cache write never costs a second download")
        XCTAssertGreaterThanOrEqual(
            cache.metrics.writeFailures, 2, "the big body and at least one medium body hit ENOSPC")
        XCTAssertGreaterThanOrEqual(cache.metrics.writes, 1, "what fitted was stored")

        let stored = try await assertCacheConsistent(bodies)
        XCTAssertFalse(stored.contains(requests[0].source.key))
        XCTAssertFalse(stored.isEmpty)
        XCTAssertLessThan(stored.count, requests.count - 1)
        await waitUntil("uncached downloads are deleted") { self.leftoverFiles().isEmpty }

        // Still working: what was stored comes from disk, the rest from the network again.
        let again = makePipeline(cache: try DiskCache(directory: cacheDirectory, sizeLimit: 64 << 20))
        try await loadAll(requests, with: again)
        XCTAssertEqual(again.metrics.diskHits, stored.count)
        XCTAssertEqual(again.metrics.downloads, requests.count - stored.count)
        XCTAssertEqual(again.metrics.failed, 0)

        // With room again, downloads are stored again.
        cache.removeAll()
        let afterCleanUp = try DiskCache(directory: cacheDirectory, sizeLimit: 64 << 20)
        _ = try await makePipeline(cache: afterCleanUp).image(for: requests[1])
        XCTAssertEqual(afterCleanUp.metrics.writes, 1)
        try await assertCacheConsistent(bodies)
    }

    func testAReadOnlyCacheStillServesItsEntriesAndDeliversNewImagesUncached() async throws {
        let fileSystem = try mountCacheFileSystem(size: 16 << 20)
        let stored = try NetworkFixtures.jpeg(width: 400, height: 300, seed: 50)
        let revalidated = try NetworkFixtures.jpeg(width: 400, height: 300, seed: 51)
        let fresh = try NetworkFixtures.jpeg(width: 400, height: 300, seed: 52)
        let storedRequest = serve("/stored.jpg", stored)
        let freshRequest = serve("/fresh.jpg", fresh)
        let etag = "\"r1\""
        server.route("/revalidated.jpg") { request in
            if request.header("If-None-Match") == etag {
                return TestHTTPServer.Response(status: 304, headers: [("ETag", etag), ("Cache-Control", "max-age=0")])
            }
            return .ok(revalidated, headers: [("ETag", etag), ("Cache-Control", "max-age=0")])
        }
        let revalidatedRequest = ImageRequest(url: server.url("/revalidated.jpg"), size: .maxPixelSize(64))
        let bodies = [
            storedRequest.source.key: stored, revalidatedRequest.source.key: revalidated,
            freshRequest.source.key: fresh
        ]

        try await loadAll(
            [storedRequest, revalidatedRequest], with: makePipeline(cache: try DiskCache(directory: cacheDirectory)))
        // A decode thread may release its reader's link a moment after the caller resumes.
        await waitUntil("the readers' links are released") {
            NetworkFixtures.files(in: self.cacheDirectory.appendingPathComponent("tmp")).isEmpty
        }
        try fileSystem.setReadOnly(true)
        XCTAssertThrowsError(
            try Data("x".utf8).write(to: cacheDirectory.appendingPathComponent("probe")),
            "the cache folder is really read-only, even for root")

        let cache = try DiskCache(directory: cacheDirectory)
        let pipeline = makePipeline(cache: cache)
        try await loadAll([storedRequest, revalidatedRequest, freshRequest], with: pipeline)
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.failed, 0)
        XCTAssertEqual(metrics.diskHits, 1, "the fresh entry is read from the read-only disk")
        XCTAssertEqual(metrics.revalidations, 1, "the stale entry is revalidated and served")
        XCTAssertEqual(metrics.downloads, 1, "only the new image is downloaded")
        XCTAssertGreaterThanOrEqual(
            cache.metrics.writeFailures, 2, "the new body and the refreshed metadata were refused")
        XCTAssertEqual(server.requestCount("/stored.jpg"), 1)
        XCTAssertEqual(server.requestCount("/fresh.jpg"), 1)
        await waitUntil("the uncached download is deleted") { self.leftoverFiles().isEmpty }

        try fileSystem.setReadOnly(false)
        let kept = try await assertCacheConsistent(bodies)
        XCTAssertEqual(kept, [storedRequest.source.key, revalidatedRequest.source.key])
        let writable = try DiskCache(directory: cacheDirectory)
        _ = try await makePipeline(cache: writable).image(for: freshRequest)
        XCTAssertEqual(writable.metrics.writes, 1, "writable again, the cache fills again")
        let refilled = try await assertCacheConsistent(bodies)
        XCTAssertEqual(refilled.count, 3)
    }

    func testACacheFolderDeletedWhileRunningIsRecreatedAndRefilled() async throws {
        let cache = try makeCache()
        let pipeline = makePipeline(cache: cache)
        let first = try NetworkFixtures.jpeg(width: 400, height: 300, seed: 60)
        let second = try NetworkFixtures.jpeg(width: 400, height: 300, seed: 61)
        let slow = try NetworkFixtures.jpeg(width: 800, height: 600, seed: 62)
        let firstRequest = serve("/first.jpg", first)
        let secondRequest = serve("/second.jpg", second)
        // Eight chunks a fifth of a second apart: the folder goes while the body streams.
        server.route(
            "/slow.jpg",
            TestHTTPServer.Response(
                status: 200, headers: [("Content-Type", "image/jpeg"), ("Cache-Control", "max-age=3600")],
                body: .data(slow), chunkSize: slow.count / 8 + 1, chunkDelay: 0.2))
        let slowRequest = ImageRequest(url: server.url("/slow.jpg"), size: .maxPixelSize(64))
        let bodies = [firstRequest.source.key: first, secondRequest.source.key: second, slowRequest.source.key: slow]

        try await loadAll([firstRequest], with: pipeline)
        XCTAssertNotNil(cache.entry(for: firstRequest.source.key))

        // Deleted in the middle of a download into the cache.
        let slowTask = pipeline.imageTask(with: slowRequest)
        let temporary = cacheDirectory.appendingPathComponent("tmp")
        await waitUntil("the slow body streams into the cache") {
            NetworkFixtures.files(in: temporary).contains { $0.split(separator: "/").last?.hasPrefix("w-") == true }
        }
        try FileManager.default.removeItem(at: cacheDirectory)
        let bitmap = try await slowTask.image
        XCTAssertEqual([bitmap.width, bitmap.height], [64, 48], "the body survives its folder")
        XCTAssertEqual(cache.metrics.writeFailures, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: cacheDirectory.path))

        // The next download recreates the folder; the deleted entry is fetched again.
        try await loadAll([secondRequest, firstRequest], with: pipeline)
        XCTAssertEqual(pipeline.metrics.failed, 0)
        XCTAssertEqual(server.requestCount("/first.jpg"), 2, "its entry went with the folder")
        XCTAssertEqual(server.requestCount("/second.jpg"), 1)
        XCTAssertEqual(server.requestCount("/slow.jpg"), 1)
        let stored = try await assertCacheConsistent(bodies)
        XCTAssertEqual(stored, [firstRequest.source.key, secondRequest.source.key])
        await waitUntil("uncached downloads are deleted") { self.leftoverFiles().isEmpty }
    }
}
