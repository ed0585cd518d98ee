import Foundation
import TestSupport
@_spi(Testing) import VipsCore
import XCTest

@testable import VipsLoad

/// The data cache as a pipeline dependency, file identity, and what errors name.
final class PipelineDataCacheTests: NetworkTestCase {
    private func makePipeline(
        cache: (any ImageDataCaching)?, loader: any ImageDataLoading = DataLoader()
    ) -> ImagePipeline {
        let http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        return ImagePipeline(
            configuration: .init(
                decodeConcurrency: 2, dataLoader: loader, memoryCache: nil,
                dataCache: cache, http: http))
    }

    func testADiskHitIsServedAtOnceWhileEveryDownloadSlotIsStalled() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 200, height: 100, seed: 41)
        server.route("/cached.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
        let gate = ServerGate()
        for index in 0..<6 {
            server.route("/stalled-\(index).jpg") { _ in
                gate.pass()
                return .ok(jpeg)
            }
        }
        let cache = try makeCache()
        _ = try await makePipeline(cache: cache).image(for: ImageRequest(url: server.url("/cached.jpg")))

        let pipeline = makePipeline(cache: try makeCache())
        let stalled = (0..<6).map { pipeline.imageTask(with: ImageRequest(url: server.url("/stalled-\($0).jpg"))) }
        await waitUntil("six downloads hold every slot") {
            (0..<6).allSatisfy { self.server.requestCount("/stalled-\($0).jpg") == 1 }
        }
        // The six lookups that missed have left the I/O lane; the downloads hold the network lane.
        await waitUntil("the six downloads are the only loads running") { pipeline.inFlight.runningLoads == 6 }
        // Served from disk on the I/O lane while all six downloads still hang.
        let bitmap = try await pipeline.image(
            for: ImageRequest(url: server.url("/cached.jpg"), size: .maxPixelSize(50)))
        XCTAssertEqual([bitmap.width, bitmap.height], [50, 25])
        XCTAssertEqual(server.requestCount("/cached.jpg"), 1, "only the first pipeline downloaded it")
        XCTAssertEqual(pipeline.metrics.diskHits, 1)
        XCTAssertTrue(stalled.allSatisfy { $0.state == .running })
        gate.open()
        for task in stalled { _ = try await task.image }
    }

    /// A loader of its own for http URLs, counting its calls.
    private final class MemoryLoader: ImageDataLoading {
        let bytes: Data
        let calls = LockedState(0)
        init(bytes: Data) { self.bytes = bytes }
        func loadData(for source: ImageSource) async throws(VipsError) -> ImageData {
            calls.withLock { $0 += 1 }
            return ImageData(input: .data(bytes), byteCount: bytes.count)
        }
    }

    func testACustomLoadersResultsAreStoredInThePipelinesDataCache() async throws {
        let loader = MemoryLoader(bytes: try NetworkFixtures.jpeg(width: 120, height: 80, seed: 42))
        let request = ImageRequest(url: URL(string: "https://images.invalid/a.jpg")!, size: .maxPixelSize(60))
        let first = try await makePipeline(cache: try makeCache(), loader: loader).image(for: request)
        XCTAssertEqual([first.width, first.height], [60, 40])
        XCTAssertEqual(loader.calls.withLock { $0 }, 1)

        // A new pipeline on the same folder: the data cache answers, the loader is not called.
        let pipeline = makePipeline(cache: try makeCache(), loader: loader)
        let second = try await pipeline.image(for: request)
        XCTAssertEqual([second.width, second.height], [60, 40])
        XCTAssertEqual(loader.calls.withLock { $0 }, 1)
        XCTAssertEqual(pipeline.metrics.diskHits, 1)
    }

    func testAFileReplacedOrRewrittenIsDecodedAgainAndSpellingsShareOneKey() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("photo", width: 60, height: 40, seed: 1)
        let pipeline = ImagePipeline.testing()
        let request = ImageRequest(path: path, size: .maxPixelSize(30))
        let first = try await pipeline.image(for: request)
        XCTAssertEqual([first.width, first.height], [30, 20])

        // Another spelling of the same file is a memory hit.
        let relative = "../" + URL(fileURLWithPath: folder.path).lastPathComponent + "/./photo.png"
        let previous = FileManager.default.currentDirectoryPath
        XCTAssertTrue(FileManager.default.changeCurrentDirectoryPath(folder.path))
        defer { _ = FileManager.default.changeCurrentDirectoryPath(previous) }
        XCTAssertEqual(ImageRequest(path: relative).source, ImageRequest(path: path).source)
        _ = try await pipeline.image(for: ImageRequest(path: relative, size: .maxPixelSize(30)))
        _ = try await pipeline.image(for: ImageRequest(url: URL(fileURLWithPath: path), size: .maxPixelSize(30)))
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)
        XCTAssertEqual(pipeline.metrics.memoryHits, 2)

        // Replaced by another file (a new inode): decoded again.
        let other = try folder.png("other", width: 80, height: 40, seed: 2)
        XCTAssertEqual(rename(other, path), 0)
        let replaced = try await pipeline.image(for: request)
        XCTAssertEqual([replaced.width, replaced.height], [30, 15])
        XCTAssertEqual(pipeline.metrics.decodesStarted, 2)

        // Rewritten in place (same inode, new size and time): decoded again.
        let rewritten = try ImageSynthesizer.data(width: 40, height: 40, seed: 3, format: .png())
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: rewritten)
        try handle.close()
        let third = try await pipeline.image(for: request)
        XCTAssertEqual([third.width, third.height], [30, 30])
        XCTAssertEqual(pipeline.metrics.decodesStarted, 3)

        // Forgetting the source drops every size and version.
        _ = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(10)))
        XCTAssertNotNil(pipeline.cachedImage(for: ImageRequest(path: path, size: .maxPixelSize(10))))
        pipeline.removeCachedImages(for: .file(path))
        XCTAssertNil(pipeline.cachedImage(for: request))
        XCTAssertNil(pipeline.cachedImage(for: ImageRequest(path: path, size: .maxPixelSize(10))))
        XCTAssertEqual(pipeline.memoryCache?.count, 0)
    }

    func testErrorsNameTheURLNeverATemporaryOrCacheFileAndCarryTheStatus() async throws {
        // JPEG magic, then junk: sniffed as an image, downloaded, then the decode fails.
        var junk = Data([0xFF, 0xD8, 0xFF, 0xE0])
        junk.append(Data(repeating: 0x5A, count: 4000))
        server.route("/junk.jpg", .ok(junk, headers: [("Cache-Control", "max-age=3600")]))
        server.route("/missing.jpg", .status(404))
        for cache in [nil, try makeCache()] as [DiskCache?] {
            let pipeline = makePipeline(cache: cache)
            let url = server.url("/junk.jpg")
            do throws(VipsError) {
                _ = try await pipeline.image(for: ImageRequest(url: url, size: .maxPixelSize(30)))
                XCTFail("junk decoded")
            } catch {
                XCTAssertTrue([.corruptData, .truncatedData].contains(error.kind), "\(error)")
                XCTAssertTrue(error.message.contains(url.absoluteString), "\(error)")
                XCTAssertFalse(error.message.contains(downloadDirectory.path), "\(error)")
                XCTAssertFalse(error.message.contains(cacheDirectory.path), "\(error)")
            }
            let notFound = await assertThrows(kind: .httpStatus) {
                try await pipeline.image(for: ImageRequest(url: server.url("/missing.jpg")))
            }
            XCTAssertEqual(notFound?.httpStatus, 404)
        }
    }

    func testAMissingFileIsFileNotFoundAndTheSystemsReasonsMapToKinds() async throws {
        let folder = try ImageFolder()
        let pipeline = ImagePipeline(configuration: .init(memoryCache: nil))
        let error = await assertThrows(kind: .fileNotFound) {
            try await pipeline.image(for: ImageRequest(path: folder.path + "/absent.png"))
        }
        XCTAssertTrue(error?.message.contains("absent.png") == true, "\(String(describing: error))")
        XCTAssertEqual(VipsError.file(ENOENT, "x").kind, .fileNotFound)
        XCTAssertEqual(VipsError.file(ENOTDIR, "x").kind, .fileNotFound)
        XCTAssertEqual(VipsError.file(EACCES, "x").kind, .permissionDenied)
        XCTAssertEqual(VipsError.file(EPERM, "x").kind, .permissionDenied)
        XCTAssertEqual(VipsError.file(EIO, "x").kind, .io)
    }

    func testAnUnreadableFileIsPermissionDenied() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("locked", width: 10, height: 10)
        let pipeline = ImagePipeline(configuration: .init(memoryCache: nil))
        XCTAssertEqual(chmod(path, 0), 0)
        defer { chmod(path, 0o644) }
        // Root reads any file whatever its mode: then there is nothing to refuse.
        try XCTSkipIf(getuid() == 0 && access(path, R_OK) == 0, "running as root: permissions are not enforced")
        await assertThrows(kind: .permissionDenied) { try await pipeline.image(for: ImageRequest(path: path)) }
    }

    func testDecodeThreadsAreNamed() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("named", width: 30, height: 30)
        let pipeline = ImagePipeline.testing(decodeConcurrency: 2)
        let gate = LockedState<[String]>([])
        pipeline.engine.decodeObserver.withLock {
            $0 = { _ in
                let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                gate.withLock { $0.append(name.trimmingCharacters(in: .whitespacesAndNewlines)) }
            }
        }
        _ = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(10)))
        _ = try await pipeline.image(
            for: ImageRequest(path: path, size: .maxPixelSize(20), options: .disableMemoryCacheReads))
        let names = gate.withLock { $0 }
        XCTAssertFalse(names.isEmpty)
        // "vipsload-decode-N", cut by the kernel to 15 bytes.
        XCTAssertTrue(names.allSatisfy { $0 == "vipsload-decode" }, "\(names)")
    }

    func testStaleIfErrorServesTheStaleEntryOnlyWhenAllowedAndAskedFor() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 80, height: 40, seed: 43)
        let calls = LockedState(0)
        for path in ["/flaky.jpg", "/strict.jpg"] {
            let directive = path == "/flaky.jpg" ? "max-age=0, stale-if-error=600" : "max-age=0"
            server.route(path) { _ in
                let call = calls.withLock {
                    $0 += 1; return $0
                }
                // The first answer of each is the image; later ones fail.
                return call <= 2 ? .ok(jpeg, headers: [("Cache-Control", directive), ("ETag", "\"v1\"")]) : .status(503)
            }
        }
        var http = HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)
        http.usesStaleIfError = true
        let pipeline = ImagePipeline(configuration: .init(memoryCache: nil, dataCache: try makeCache(), http: http))
        for path in ["/flaky.jpg", "/strict.jpg"] {
            _ = try await pipeline.image(for: ImageRequest(url: server.url(path)))
        }
        // Stale now; the server fails: the entry that allows it is served...
        let stale = try await pipeline.image(for: ImageRequest(url: server.url("/flaky.jpg"), size: .maxPixelSize(40)))
        XCTAssertEqual([stale.width, stale.height], [40, 20])
        XCTAssertEqual(pipeline.metrics.revalidations, 0)
        // ... the one that does not is an error, with its status.
        let error = await assertThrows(kind: .httpStatus) {
            try await pipeline.image(for: ImageRequest(url: self.server.url("/strict.jpg")))
        }
        XCTAssertEqual(error?.httpStatus, 503)

        // Without the opt-in the directive is ignored.
        let strictPipeline = ImagePipeline(
            configuration: .init(
                memoryCache: nil, dataCache: try makeCache(),
                http: HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory)))
        await assertThrows(kind: .httpStatus) {
            try await strictPipeline.image(for: ImageRequest(url: self.server.url("/flaky.jpg")))
        }
    }
}
