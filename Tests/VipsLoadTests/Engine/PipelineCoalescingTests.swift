import Foundation
import XCTest

@testable import VipsLoad

/// Identical requests share one decode; sizes of one source share one load;
/// a cached larger bitmap serves smaller requests; errors reach everyone.
final class PipelineCoalescingTests: XCTestCase {
    func testHundredConcurrentIdenticalRequestsDecodeOnceThenHitMemory() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 640, height: 480)
        let gate = GatedLoader()
        let pipeline = ImagePipeline.testing(loader: gate)
        let request = ImageRequest(path: path, size: .maxPixelSize(128))

        let results = Task {
            try await withThrowingTaskGroup(of: Bitmap.self) { group in
                for _ in 0..<100 { group.addTask { try await pipeline.image(for: request) } }
                return try await group.reduce(into: [Bitmap]()) { $0.append($1) }
            }
        }
        // Every request is in flight, sharing one held load, before anything decodes.
        await waitUntil("100 tasks wait") { pipeline.inFlight.tasks == 100 }
        XCTAssertEqual(pipeline.inFlight.decodeJobs, 1)
        XCTAssertEqual(pipeline.inFlight.dataLoads, 1)
        gate.open()
        let bitmaps = try await results.value

        XCTAssertEqual(bitmaps.count, 100)
        for bitmap in bitmaps { XCTAssertEqual([bitmap.width, bitmap.height], [128, 96]) }
        var metrics = pipeline.metrics
        XCTAssertEqual(metrics.decodesStarted, 1)
        XCTAssertEqual(metrics.dataLoadsStarted, 1)
        XCTAssertEqual(metrics.coalesced, 99)
        XCTAssertEqual(metrics.memoryHits, 0)

        // The second wave is served from memory: no decode, no load.
        try await withThrowingTaskGroup(of: Bitmap.self) { group in
            for _ in 0..<100 { group.addTask { try await pipeline.image(for: request) } }
            for try await bitmap in group { XCTAssertEqual(bitmap.width, 128) }
        }
        metrics = pipeline.metrics
        XCTAssertEqual(metrics.decodesStarted, 1)
        XCTAssertEqual(metrics.dataLoadsStarted, 1)
        XCTAssertEqual(metrics.memoryHits, 100)
        XCTAssertEqual(metrics.requests, 200)
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)
    }

    func testDifferentSizesOfOneSourceShareOneDataLoad() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 400, height: 300)
        let gate = GatedLoader()
        let pipeline = ImagePipeline.testing(loader: gate)
        let sizes: [TargetSize] = [.maxPixelSize(32), .maxPixelSize(64), .fit(width: 100, height: 100), .original]

        let results = Task {
            try await withThrowingTaskGroup(of: (Int, Bitmap).self) { group in
                for (index, size) in sizes.enumerated() {
                    group.addTask { (index, try await pipeline.image(for: ImageRequest(path: path, size: size))) }
                }
                return try await group.reduce(into: [Int: Bitmap]()) { $0[$1.0] = $1.1 }
            }
        }
        await waitUntil("4 sizes wait for the data") { pipeline.inFlight.decodeJobs == 4 }
        XCTAssertEqual(pipeline.inFlight.dataLoads, 1)
        gate.open()
        let bitmaps = try await results.value

        XCTAssertEqual(bitmaps.mapValues(\.width), [0: 32, 1: 64, 2: 100, 3: 400])
        XCTAssertEqual(gate.calls, ["file:" + path])
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.dataLoadsStarted, 1)
        XCTAssertEqual(metrics.dataLoadsShared, 3)
        XCTAssertEqual(metrics.decodesStarted, 4)
        XCTAssertEqual(
            metrics.bytesLoaded, try XCTUnwrap(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int))
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)
        await waitUntil("the decode threads return") { pipeline.inFlight.isIdle }
    }

    func testSmallerRequestIsServedByDownscalingTheCachedLargerBitmap() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 400, height: 300, seed: 4)
        let pipeline = ImagePipeline.testing()

        let original = try await pipeline.image(for: ImageRequest(path: path))
        XCTAssertEqual([original.width, original.height], [400, 300])
        let small = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(100)))
        XCTAssertEqual([small.width, small.height], [100, 75])
        var metrics = pipeline.metrics
        XCTAssertEqual(metrics.decodesStarted, 1, "the small size must not decode the file again")
        XCTAssertEqual(metrics.memoryResizes, 1)

        // The downscale matches a real decode of that size (within resampling differences).
        let decoded = try ImageDecoder().decode(.file(path), size: .maxPixelSize(100))
        XCTAssertEqual([decoded.width, decoded.height], [small.width, small.height])
        XCTAssertLessThan(meanAbsoluteDifference(decoded, small), 6)

        // The 100 px bitmap (which touched its box) cannot serve a larger size: that decodes.
        let pipeline2 = ImagePipeline.testing()
        _ = try await pipeline2.image(for: ImageRequest(path: path, size: .maxPixelSize(100)))
        let larger = try await pipeline2.image(for: ImageRequest(path: path, size: .maxPixelSize(200)))
        XCTAssertEqual(larger.width, 200)
        metrics = pipeline2.metrics
        XCTAssertEqual(metrics.decodesStarted, 2)
        XCTAssertEqual(metrics.memoryResizes, 0)
        // ... but it serves a smaller one.
        let smaller = try await pipeline2.image(for: ImageRequest(path: path, size: .fit(width: 40, height: 40)))
        XCTAssertEqual([smaller.width, smaller.height], [40, 30])
        XCTAssertEqual(pipeline2.metrics.decodesStarted, 2)
        XCTAssertEqual(pipeline2.metrics.memoryResizes, 1)
    }

    func testCachedImageSmallerThanItsBoxIsKnownToBeOriginalSize() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("small", width: 80, height: 60)
        let pipeline = ImagePipeline.testing()
        // Asked for 500 px, an 80×60 image stays 80×60: that is its original size...
        let first = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(500)))
        XCTAssertEqual([first.width, first.height], [80, 60])
        // ... so every smaller size can be made from it, and the original too.
        let half = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(40)))
        XCTAssertEqual([half.width, half.height], [40, 30])
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)
        XCTAssertEqual(pipeline.metrics.memoryResizes, 1)
        // Upscaled requests never use it.
        let up = try await pipeline.image(
            for: ImageRequest(path: path, size: .maxPixelSize(160), options: .allowUpscale))
        XCTAssertEqual([up.width, up.height], [160, 120])
        XCTAssertEqual(pipeline.metrics.decodesStarted, 2)
    }

    func testEquivalentRequestsShareOneBitmapTaggedWithEachScale() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 300, height: 200)
        let pipeline = ImagePipeline.testing()
        let retina = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(50), scale: 2))
        XCTAssertEqual([retina.width, retina.height], [100, 67])
        XCTAssertEqual(retina.scale, 2)
        XCTAssertEqual(retina.pointSize.width, 50)
        // Same pixels (100 px box), different scale tag: a memory hit.
        let plain = try await pipeline.image(for: ImageRequest(path: path, size: .fit(width: 100, height: 100)))
        XCTAssertEqual([plain.width, plain.height], [100, 67])
        XCTAssertEqual(plain.scale, 1)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)
        XCTAssertEqual(pipeline.metrics.memoryHits, 1)
    }

    func testErrorsReachEveryCallerAndAreNeverCached() async throws {
        let folder = try ImageFolder()
        let path = folder.path + "/later.jpg"
        let pipeline = ImagePipeline.testing()
        let request = ImageRequest(path: path, size: .maxPixelSize(64))

        let errors = try await withThrowingTaskGroup(of: VipsError?.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    do { _ = try await pipeline.image(for: request); return nil } catch let error as VipsError {
                        return error
                    }
                }
            }
            return try await group.reduce(into: [VipsError?]()) { $0.append($1) }
        }
        XCTAssertEqual(errors.count, 20)
        for error in errors { XCTAssertEqual(error?.kind, .fileNotFound) }
        XCTAssertEqual(pipeline.metrics.failed, 20)
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)

        // Corrupt bytes fail in the decoder, for every caller.
        let junk = try folder.write("junk.jpg", Data([0xFF, 0xD8, 0xFF, 0xE0] + [UInt8](repeating: 7, count: 200)))
        await assertThrows(kind: [.corruptData, .truncatedData], "junk") {
            try await pipeline.image(for: ImageRequest(path: junk))
        }

        // The file appears: the next request loads it (nothing was cached).
        _ = try folder.jpeg("later", width: 128, height: 128)
        let bitmap = try await pipeline.image(for: request)
        XCTAssertEqual(bitmap.width, 64)
    }

    func testMemoryCacheCanBeBypassedPerRequest() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 200, height: 100)
        let pipeline = ImagePipeline.testing()
        let bypass = ImageRequest(path: path, size: .maxPixelSize(50), options: .disableMemoryCache)
        for _ in 0..<3 { _ = try await pipeline.image(for: bypass) }
        XCTAssertEqual(pipeline.metrics.decodesStarted, 3)
        XCTAssertEqual(pipeline.memoryCache?.count, 0)

        // Writes without reads: stored, but this request type still decodes.
        let writeOnly = ImageRequest(path: path, size: .maxPixelSize(50), options: .disableMemoryCacheReads)
        _ = try await pipeline.image(for: writeOnly)
        XCTAssertEqual(pipeline.memoryCache?.count, 1)
        _ = try await pipeline.image(for: writeOnly)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 5)
        // A normal request now hits.
        _ = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(50)))
        XCTAssertEqual(pipeline.metrics.decodesStarted, 5)
        XCTAssertEqual(pipeline.metrics.memoryHits, 1)
    }

    func testInvalidSizeFailsWithoutDecoding() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 64, height: 64)
        let pipeline = ImagePipeline.testing()
        for request in [
            ImageRequest(path: path, size: .maxPixelSize(0)), ImageRequest(path: path, scale: 0),
            ImageRequest(path: path, size: .fit(width: 10, height: -1))
        ] {
            await assertThrows(kind: .invalidArgument, "\(request)") {
                try await pipeline.image(for: request)
            }
        }
        XCTAssertEqual(pipeline.metrics.decodesStarted, 0)
        XCTAssertEqual(pipeline.metrics.dataLoadsStarted, 0)
    }
}

/// Mean absolute difference per channel value of two same-sized bitmaps.
func meanAbsoluteDifference(_ a: Bitmap, _ b: Bitmap) -> Double {
    precondition(a.width == b.width && a.height == b.height && a.channels == b.channels)
    return a.withUnsafeBytes { pa in
        b.withUnsafeBytes { pb in
            var total = 0
            for i in 0..<pa.count { total += abs(Int(pa[i]) - Int(pb[i])) }
            return Double(total) / Double(pa.count)
        }
    }
}
