import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
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

    /// A data cache of its own: entries are files in a folder, indexed in memory.
    /// Only the protocol connects it to the pipeline.
    private final class FolderCache: ImageDataCaching {
        struct Entry {
            let path: String
            let byteCount: Int
            var http: HTTPCacheMetadata?
            let sourceInfo: ImageInfo?
            let version: String
        }
        let folder: String
        let entries = LockedState<[String: Entry]>([:])
        let updates = LockedState(0)

        init(folder: String) { self.folder = folder }

        func cachedData(for key: String) -> CachedImageData? {
            guard let entry = entries.withLock({ $0[key] }) else { return nil }
            return CachedImageData(
                key: key, data: ImageData(input: .file(entry.path), byteCount: entry.byteCount), http: entry.http,
                sourceInfo: entry.sourceInfo, storedVersion: entry.version)
        }

        func makeWriter(for key: String) throws(VipsError) -> ImageDataCacheWriter {
            try ImageDataCacheWriter(directory: folder) { [self] path, byteCount, http, sourceInfo throws(VipsError) in
                let version = UUID().uuidString
                let stored = folder + "/" + version
                guard rename(path, stored) == 0 else { throw VipsError(.io, "cannot store \(key)") }
                entries.withLock {
                    $0[key] = Entry(
                        path: stored, byteCount: byteCount, http: http, sourceInfo: sourceInfo, version: version)
                }
                return ImageData(input: .file(stored), byteCount: byteCount)
            }
        }

        func updateHTTPMetadata(_ http: HTTPCacheMetadata, of hit: CachedImageData) {
            entries.withLock { entries in
                guard entries[hit.key]?.version == hit.storedVersion else { return }
                entries[hit.key]?.http = http
            }
            updates.withLock { $0 += 1 }
        }

        func removeData(for key: String) { entries.withLock { _ = $0.removeValue(forKey: key) } }

        var maxEntryByteCount: Int? { nil }
    }

    func testAnyDataCacheGetsStreamedDownloadsRevalidationAndProcessedImages() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 160, height: 120, seed: 43)
        server.route("/fresh.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
        server.route("/checked.jpg") { request in
            if request.header("If-None-Match") == "\"v1\"" {
                return TestHTTPServer.Response(
                    status: 304, headers: [("ETag", "\"v1\""), ("Cache-Control", "no-cache")])
            }
            return .ok(jpeg, headers: [("ETag", "\"v1\""), ("Cache-Control", "no-cache")])
        }
        let cache = FolderCache(folder: cacheDirectory.path)
        let fresh = ImageRequest(url: server.url("/fresh.jpg"), size: .maxPixelSize(40))
        let checked = ImageRequest(url: server.url("/checked.jpg"), size: .maxPixelSize(40))
        _ = try await makePipeline(cache: cache).image(for: fresh)
        _ = try await makePipeline(cache: cache).image(for: checked)
        XCTAssertEqual(cache.entries.withLock { $0.count }, 2, "both bodies streamed into the cache")

        let pipeline = makePipeline(cache: cache)
        let served = try await pipeline.response(for: fresh)
        XCTAssertEqual(served.origin, .dataCache)
        XCTAssertEqual(server.requestCount("/fresh.jpg"), 1, "a fresh entry is served without a request")
        let revalidated = try await pipeline.response(for: checked)
        XCTAssertEqual(revalidated.bitmap.width, 40)
        XCTAssertEqual(
            server.requests("/checked.jpg").map { $0.header("If-None-Match") }, [nil, "\"v1\""], "revalidated")
        XCTAssertEqual(cache.updates.withLock { $0 }, 1, "the 304's metadata reached the cache")
        XCTAssertEqual(pipeline.metrics.revalidations, 1)

        // Processed images, with their source's header.
        var configuration = ImagePipeline.Configuration(
            decodeConcurrency: 1, memoryCache: nil, dataCache: cache,
            http: HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory))
        configuration.dataCachePolicy = .storeEncodedImages
        let folder = try ImageFolder()
        let path = try folder.jpeg("local", width: 200, height: 100)
        let local = ImageRequest(path: path, size: .maxPixelSize(50))
        _ = try await ImagePipeline(configuration: configuration).image(for: local)
        let rerun = ImagePipeline(configuration: configuration)
        let thumbnail = try await rerun.response(for: local)
        XCTAssertEqual(thumbnail.origin, .dataCache)
        XCTAssertEqual([thumbnail.sourceInfo?.width, thumbnail.sourceInfo?.height], [200, 100])
        XCTAssertEqual(rerun.metrics.decodesStarted, 0)
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
