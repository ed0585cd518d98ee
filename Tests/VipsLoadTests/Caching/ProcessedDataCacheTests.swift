import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsLoad

/// `DataCachePolicy`: processed images kept in the data cache, for files and URLs.
final class ProcessedDataCacheTests: NetworkTestCase {
    private func makePipeline(policy: DataCachePolicy = .automatic, decodeConcurrency: Int = 2) throws -> ImagePipeline
    {
        var configuration = ImagePipeline.Configuration(
            decodeConcurrency: decodeConcurrency, memoryCache: nil,
            dataCache: try makeCache(),
            http: HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory))
        configuration.dataCachePolicy = policy
        return ImagePipeline(configuration: configuration)
    }

    private func thumbnails(_ paths: [String], _ pipeline: ImagePipeline) async throws -> [[Int]] {
        var sizes: [[Int]] = []
        for path in paths {
            let bitmap = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(64)))
            sizes.append([bitmap.width, bitmap.height])
        }
        return sizes
    }

    /// The bodies of the cache's entries.
    private func bodies() throws -> [URL] {
        let entries = cacheDirectory.appendingPathComponent("entries")
        return try FileManager.default.contentsOfDirectory(at: entries, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "body" }
    }

    func testARerunOverTheSameFolderDecodesNothingAndAReplacedFileMisses() async throws {
        let folder = try ImageFolder()
        let paths = try (0..<3).map { try folder.jpeg("photo-\($0)", width: 400, height: 300 - $0 * 50, seed: $0) }
        let first = try makePipeline()
        let sizes = try await thumbnails(paths, first)
        XCTAssertEqual(first.metrics.decodesStarted, 3)
        XCTAssertEqual(try bodies().count, 3, "one processed entry each, no originals of files")

        // A new pipeline on the same folder: served from the stored thumbnails.
        let second = try makePipeline()
        let again = try await thumbnails(paths, second)
        XCTAssertEqual(again, sizes)
        XCTAssertEqual(second.metrics.decodesStarted, 0)
        XCTAssertEqual(second.metrics.processedImageDecodes, 3, "the stored thumbnails are what it decoded")
        XCTAssertEqual(first.metrics.processedImageDecodes, 0)
        XCTAssertEqual(second.metrics.diskHits, 3)
        // The very pixels (stored lossless).
        let original = try await first.image(
            for: ImageRequest(
                path: paths[0], size: .maxPixelSize(64),
                options: .disableDataCacheReads))
        let stored = try await second.image(for: ImageRequest(path: paths[0], size: .maxPixelSize(64)))
        XCTAssertEqual(original.pixelData, stored.pixelData)

        // Another size or processors: other entries.
        _ = try await second.image(for: ImageRequest(path: paths[0], size: .maxPixelSize(32)))
        XCTAssertEqual(second.metrics.decodesStarted, 1)

        // A replaced file is a new version: it misses.
        let replacement = try folder.jpeg("replacement", width: 200, height: 200, seed: 9)
        XCTAssertEqual(rename(replacement, paths[1]), 0)
        let third = try makePipeline()
        let replaced = try await thumbnails([paths[1]], third)
        XCTAssertEqual(replaced, [[64, 64]])
        XCTAssertEqual(third.metrics.decodesStarted, 1)
    }

    func testAStoredEntrysDecodeIsItsUnitsWorkMovedAndCancelledWithIt() async throws {
        let folder = try ImageFolder()
        let paths = try (0..<3).map { try folder.jpeg("photo-\($0)", width: 300, height: 200, seed: $0) }
        _ = try await thumbnails(paths, try makePipeline())
        let pipeline = try makePipeline(decodeConcurrency: 1)
        pipeline.isDecodingSuspended = true
        let order = LockedState<[Int]>([])
        let tasks = paths.enumerated().map { index, path in
            let task = pipeline.imageTask(with: ImageRequest(path: path, size: .maxPixelSize(64), priority: .low))
            task.onCompletion { _ in order.withLock { $0.append(index) } }
            return task
        }
        await waitUntil("the three lookups queue their decodes") { pipeline.inFlight.queuedDecodes == 3 }
        tasks[2].priority = .veryHigh
        tasks[0].cancel()
        XCTAssertEqual(pipeline.inFlight.queuedDecodes, 2, "the cancelled task's decode left the queue")
        pipeline.isDecodingSuspended = false
        for task in tasks[1...] { _ = try await task.image }
        await waitUntil("every completion is observed") { order.withLock { $0.count } == 3 }
        XCTAssertEqual(order.withLock { $0 }, [0, 2, 1], "the raised task's decode ran first")
        XCTAssertEqual(pipeline.metrics.processedImageDecodes, 2)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 0)
        await waitUntil("the pipeline is idle") { pipeline.inFlight.isIdle }
    }

    func testAProcessedHitDescribesItsSourceNotTheStoredThumbnail() async throws {
        let folder = try ImageFolder()
        let rotated = try folder.write(
            "rotated.jpg", ImageSynthesizer.data(width: 400, height: 300, format: .jpeg(orientation: 6)))
        let frames = try [UInt8(10), 130, 250].map { level in
            try Bitmap(width: 60, height: 40, channels: 3, pixels: [UInt8](repeating: level, count: 60 * 40 * 3))
        }
        let clip = try folder.write(
            "clip.webp",
            try ImageEncoder().encode(
                try AnimatedBitmap(frames: frames, delays: [40, 80, 120], loopCount: 0), as: .webp()
            ).data)
        let requests = [
            ImageRequest(path: rotated, size: .maxPixelSize(64)), ImageRequest(path: clip, size: .maxPixelSize(30))
        ]
        let first = try makePipeline()
        var decoded: [ImageInfo?] = []
        for request in requests { decoded.append(try await first.response(for: request).sourceInfo) }
        XCTAssertEqual(decoded[0].map { [$0.width, $0.height, $0.orientation, $0.pages] }, [300, 400, 6, 1])
        XCTAssertEqual(decoded[0]?.format, .jpeg)
        XCTAssertEqual(decoded[1]?.pages, 3)

        let second = try makePipeline()
        for (request, info) in zip(requests, decoded) {
            let response = try await second.response(for: request)
            XCTAssertEqual(response.origin, .dataCache)
            XCTAssertEqual(response.sourceInfo, info, "the source's header, stored with the thumbnail")
        }
        XCTAssertEqual(second.metrics.decodesStarted, 0)
        XCTAssertEqual(second.metrics.processedImageDecodes, 2)
    }

    func testACorruptedProcessedEntryIsDetectedAndRebuiltNeverServed() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 400, height: 200, seed: 4)
        let expected = try await thumbnails([path], try makePipeline())
        let body = try XCTUnwrap(try bodies().first)
        var bytes = try Data(contentsOf: body)
        // Damage a byte in the middle of the stored PNG (its length and magic unchanged).
        bytes[bytes.count / 2] ^= 0xFF
        try bytes.write(to: body)

        let second = try makePipeline()
        let rebuilt = try await thumbnails([path], second)
        XCTAssertEqual(rebuilt, expected)
        XCTAssertEqual(second.metrics.decodesStarted, 1, "rebuilt from the source")
        XCTAssertEqual(second.metrics.diskHits, 0)
        XCTAssertEqual(
            (second.configuration.dataCache as? DiskCache)?.metrics.corruptEntriesRemoved, 1, "caught by its checksum")
        let third = try makePipeline()
        let served = try await thumbnails([path], third)
        XCTAssertEqual(served, expected)
        XCTAssertEqual(third.metrics.decodesStarted, 0, "the rebuilt entry serves the next run")
    }

    func testOverHTTPTheRerunNeitherDownloadsNorDecodes() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 400, height: 200, seed: 5)
        server.route("/gallery.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
        let request = ImageRequest(
            url: server.url("/gallery.jpg"), size: .maxPixelSize(50),
            processors: [ImageProcessors.GaussianBlur(sigma: 1)])
        let first = try makePipeline()
        _ = try await first.image(for: request)
        XCTAssertEqual(first.metrics.decodesStarted, 1)
        XCTAssertEqual(try bodies().count, 1, "automatic: the processed image, not the original")

        let second = try makePipeline()
        let bitmap = try await second.image(for: request)
        XCTAssertEqual([bitmap.width, bitmap.height], [50, 25])
        XCTAssertEqual(second.metrics.decodesStarted, 0)
        XCTAssertEqual(server.requestCount("/gallery.jpg"), 1)

        // storeAll keeps the original too; the original policy keeps only it.
        for (policy, count) in [(DataCachePolicy.storeAll, 2), (.storeOriginalData, 2)] {
            try FileManager.default.removeItem(at: cacheDirectory)
            let pipeline = try makePipeline(policy: policy)
            _ = try await pipeline.image(for: request)
            XCTAssertEqual(try bodies().count, policy == .storeAll ? count : 1, "\(policy)")
        }
    }

    func testReloadRebuildsAProcessedEntryAndCacheOnlyIsServedFromIt() async throws {
        let jpeg = try NetworkFixtures.jpeg(width: 300, height: 100, seed: 6)
        server.route("/offline.jpg", .ok(jpeg, headers: [("Cache-Control", "max-age=3600")]))
        let request = ImageRequest(url: server.url("/offline.jpg"), size: .maxPixelSize(60))
        _ = try await makePipeline().image(for: request)

        var offline = request
        offline.options = .returnCacheDataDontLoad
        let second = try makePipeline()
        let served = try await second.image(for: offline)
        XCTAssertEqual([served.width, served.height], [60, 20])
        XCTAssertEqual(second.metrics.decodesStarted, 0)

        var reload = request
        reload.options = .reloadIgnoringCachedData
        _ = try await second.image(for: reload)
        XCTAssertEqual(second.metrics.decodesStarted, 1)
        XCTAssertEqual(server.requestCount("/offline.jpg"), 2)
        let third = try makePipeline()
        _ = try await third.image(for: request)
        XCTAssertEqual(third.metrics.decodesStarted, 0, "the reload stored its result")
    }
}
