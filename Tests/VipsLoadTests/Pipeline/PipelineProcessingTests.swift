import Foundation
import Synchronization
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsLoad

/// Resize modes, processors, responses and encoding through the pipeline.
final class PipelineProcessingTests: XCTestCase {
    func testProcessedRequestsCoalesceAndShareOneDecodeAndLoad() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 640, height: 480)
        let gate = GatedLoader()
        let pipeline = ImagePipeline.testing(loader: gate)
        let processed = LockedState<[ImageCacheKey]>([])
        pipeline.engine.processObserver.withLock { $0 = { key in processed.withLock { $0.append(key) } } }
        let circle = ImageRequest(
            path: path, size: .fit(width: 100, height: 100), mode: .fill(),
            processors: [ImageProcessors.Circle()])
        let blurred = ImageRequest(
            path: path, size: .fit(width: 100, height: 100), mode: .fill(),
            processors: [ImageProcessors.GaussianBlur(sigma: 2)])
        let plain = ImageRequest(path: path, size: .fit(width: 100, height: 100), mode: .fill())
        XCTAssertNotEqual(circle.cacheKey, blurred.cacheKey)
        XCTAssertNotEqual(circle.cacheKey, plain.cacheKey)
        XCTAssertNotEqual(plain.cacheKey, ImageRequest(path: path, size: .fit(width: 100, height: 100)).cacheKey)

        let tasks =
            (0..<10).map { _ in pipeline.imageTask(with: circle) }
            + (0..<5).map { _ in pipeline.imageTask(with: blurred) }
            + [pipeline.imageTask(with: plain)]
        await waitUntil("16 tasks wait") { pipeline.inFlight.tasks == 16 }
        // One decode unit and two processing units, over one held data load.
        XCTAssertEqual(pipeline.inFlight.decodeJobs, 3)
        XCTAssertEqual(pipeline.inFlight.dataLoads, 1)
        gate.open()
        var bitmaps: [Bitmap] = []
        for task in tasks { bitmaps.append(try await task.image) }
        for bitmap in bitmaps[0..<10] { XCTAssertEqual([bitmap.width, bitmap.height, bitmap.channels], [100, 100, 4]) }
        for bitmap in bitmaps[10..<16] { XCTAssertEqual([bitmap.width, bitmap.height, bitmap.channels], [100, 100, 3]) }
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.decodesStarted, 1, "different processors over one source share its decode")
        XCTAssertEqual(metrics.dataLoadsStarted, 1)
        XCTAssertEqual(Set(processed.withLock { $0 }.map(\.description)).count, 2)
        XCTAssertEqual(processed.withLock { $0.count }, 2, "identical processed requests coalesce")

        // Each result is cached under its own key: a second wave is all memory hits.
        XCTAssertNotNil(pipeline.cachedImage(for: circle))
        XCTAssertNotNil(pipeline.cachedImage(for: blurred))
        XCTAssertNotNil(pipeline.cachedImage(for: plain))
        let again = try await pipeline.response(for: circle)
        XCTAssertEqual(again.origin, .memoryCache)
        XCTAssertEqual(again.bitmap.channels, 4)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)
        XCTAssertEqual(processed.withLock { $0.count }, 2)
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)
    }

    func testProcessorOverACachedDecodeDoesNotDecodeAgain() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 320, height: 240)
        let pipeline = ImagePipeline.testing()
        let plain = ImageRequest(path: path, size: .maxPixelSize(64))
        _ = try await pipeline.image(for: plain)
        var turned = plain
        turned.processors = [ImageProcessors.Rotate(.degrees90)]
        let bitmap = try await pipeline.image(for: turned)
        XCTAssertEqual([bitmap.width, bitmap.height], [48, 64])
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)
    }

    func testResponseCarriesSourceInfoOriginAndDamage() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 640, height: 480)
        let pipeline = ImagePipeline.testing()
        let request = ImageRequest(path: path, size: .maxPixelSize(64), scale: 2)
        let first = try await pipeline.response(for: request)
        XCTAssertEqual(first.origin, .load)
        XCTAssertEqual([first.bitmap.width, first.bitmap.height], [128, 96], "points × scale = pixels")
        XCTAssertEqual(first.sourceInfo?.width, 640)
        XCTAssertEqual(first.sourceInfo?.height, 480)
        XCTAssertEqual(first.sourceInfo?.format, .jpeg)
        XCTAssertEqual(first.sourceInfo?.orientation, 1)
        XCTAssertEqual(first.sourceInfo?.pages, 1)
        XCTAssertFalse(first.decodedLeniently)
        let second = try await pipeline.response(for: request)
        XCTAssertEqual(second.origin, .memoryCache)
        XCTAssertEqual(second.sourceInfo?.width, 640)

        let whole = try Data(contentsOf: URL(fileURLWithPath: path))
        let damaged = ImageRequest(
            source: .data(Data(whole.prefix(whole.count / 2)), identifier: "damaged"), size: .maxPixelSize(64))
        let lenient = try await pipeline.response(for: damaged)
        XCTAssertTrue(lenient.decodedLeniently)
        XCTAssertEqual(lenient.origin, .load)
    }

    func testBadParametersFailBeforeAnythingLoads() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 64, height: 48)
        let pipeline = ImagePipeline.testing()
        let requests = [
            ImageRequest(path: path, size: .width(0)),
            ImageRequest(path: path, size: .width(10), mode: .fill()),
            ImageRequest(path: path, size: .maxPixelSize(10), processors: [ImageProcessors.GaussianBlur(sigma: .nan)]),
            ImageRequest(
                path: path, size: .maxPixelSize(10),
                processors: [ImageProcessors.Crop(x: 0, y: 0, width: -1, height: 1)])
        ]
        for request in requests {
            do {
                _ = try await pipeline.image(for: request)
                XCTFail("\(request) should fail")
            } catch {
                XCTAssertEqual(error.kind, .invalidArgument, "\(error)")
            }
        }
        XCTAssertEqual(pipeline.metrics.dataLoadsStarted, 0)
        // A parameter that depends on the image fails after the decode, and is not cached.
        let outside = ImageRequest(
            path: path, size: .maxPixelSize(32), processors: [ImageProcessors.Crop(x: 20, y: 0, width: 20, height: 5)])
        do {
            _ = try await pipeline.image(for: outside)
            XCTFail("the crop lies outside the 32×24 image")
        } catch {
            XCTAssertEqual(error.kind, .invalidArgument)
            XCTAssertTrue(error.message.contains(path), error.message)
        }
        XCTAssertNil(pipeline.cachedImage(for: outside))
    }

    func testEncodedImageInEveryFormatRoundTripsThroughInfo() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("photo", width: 320, height: 240)
        let pipeline = ImagePipeline.testing()
        let request = ImageRequest(
            path: path, size: .fit(width: 96, height: 96), mode: .fill(),
            processors: [ImageProcessors.RoundedCorners(radius: 12)])
        let formats: [OutputFormat] = [
            .jpeg(quality: 80, progressive: true, chromaSubsampling: .off), .png(compression: 9, palette: true),
            .webp(quality: 70, lossless: false, effort: 2), .webp(lossless: true), .avif(quality: 40, effort: 2), .gif
        ]
        for format in formats {
            let encoded = try await pipeline.encodedImage(for: request, as: format)
            XCTAssertEqual([encoded.width, encoded.height], [96, 96])
            let info = try ImageDecoder().info(.data(encoded.data))
            XCTAssertEqual(info.format, format.imageFormat, "\(format)")
            XCTAssertEqual([info.width, info.height], [96, 96], "\(format)")
            XCTAssertEqual(
                info.hasAlpha, format.supportsAlpha, "\(format): rounded corners keep alpha where the format allows")
        }
        do {
            _ = try await pipeline.encodedImage(for: request, as: .jpeg(quality: 0))
            XCTFail("quality 0")
        } catch {
            XCTAssertEqual(error.kind, .invalidArgument)
        }
        // JPEG flattens the transparent corners onto the background.
        let black = try await pipeline.encodedImage(for: request, as: .jpeg(), background: .black)
        let decoded = try ImageDecoder().decode(.data(black.data))
        XCTAssertLessThan(decoded.pixel(x: 0, y: 0)?.max() ?? 255, 30)
    }

    func testEncodingAGivenBitmapMatchesEncodedImage() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("photo", width: 320, height: 240)
        let pipeline = ImagePipeline.testing()
        let request = ImageRequest(path: path, size: .maxPixelSize(64))
        let bitmap = try await pipeline.image(for: request)
        let given = try await pipeline.encode(bitmap, as: .webp(quality: 70), priority: .high)
        let made = try await pipeline.encodedImage(for: request, as: .webp(quality: 70))
        XCTAssertEqual(given.data, made.data, "the same bitmap, the same encoder")
        XCTAssertEqual([given.width, given.height], [64, 48])
        do {
            _ = try await pipeline.encode(bitmap, as: .avif(quality: 101), label: "given")
            XCTFail("quality 101")
        } catch {
            XCTAssertEqual(error.kind, .invalidArgument)
        }
    }

    func testMetadataIsStrippedByDefaultAndKeptWhenAsked() async throws {
        let folder = try ImageFolder()
        let path = try folder.write(
            "turned.jpg", ImageSynthesizer.data(width: 320, height: 240, format: .jpeg(orientation: 6)))
        let pipeline = ImagePipeline.testing()
        let request = ImageRequest(path: path, size: .maxPixelSize(100))
        let stripped = try await pipeline.encodedImage(for: request, as: .jpeg())
        XCTAssertNil(try ImageDecoder().metadata(.data(stripped.data)).exif)
        XCTAssertEqual(try ImageDecoder().info(.data(stripped.data)).orientation, 1)
        let kept = try await pipeline.encodedImage(for: request, as: .jpeg(), keepingMetadata: true)
        XCTAssertNotNil(try ImageDecoder().metadata(.data(kept.data)).exif, "EXIF kept")
        let info = try ImageDecoder().info(.data(kept.data))
        XCTAssertEqual(info.orientation, 1, "orientation reset: the pixels are upright")
        XCTAssertEqual([info.width, info.height], [75, 100])
    }

    func testEncodedImageIsWrittenAtomically() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 160, height: 120)
        let pipeline = ImagePipeline.testing()
        let encoded = try await pipeline.encodedImage(for: ImageRequest(path: path, size: .width(50)), as: .webp())
        let target = URL(fileURLWithPath: folder.path + "/out.webp")
        try Data("old".utf8).write(to: target)
        try encoded.write(to: target)
        XCTAssertEqual(try Data(contentsOf: target), encoded.data)
        XCTAssertEqual(
            try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted(), ["out.webp", "photo.jpg"],
            "no temporary file is left")
        XCTAssertThrowsError(try encoded.write(to: URL(fileURLWithPath: folder.path + "/missing/out.webp"))) { error in
            XCTAssertEqual((error as? VipsError)?.kind, .fileNotFound)
        }
    }

    func testAnimatedImageKeepsEveryFrameOptIn() async throws {
        let folder = try ImageFolder()
        let frames = try [UInt8(10), 130, 250].map { level in
            try Bitmap(width: 60, height: 40, channels: 3, pixels: [UInt8](repeating: level, count: 60 * 40 * 3))
        }
        let encoded = try ImageEncoder().encode(
            try AnimatedBitmap(frames: frames, delays: [40, 80, 120], loopCount: 0), as: .webp())
        let path = try folder.write("clip.webp", encoded.data)
        let pipeline = ImagePipeline.testing()
        let animation = try await pipeline.animatedImage(
            for: ImageRequest(path: path, size: .maxPixelSize(30), scale: 1))
        XCTAssertEqual(animation.frameCount, 3)
        XCTAssertEqual([animation.width, animation.height], [30, 20])
        XCTAssertEqual(animation.delays, [40, 80, 120])
        let first = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(30)))
        XCTAssertEqual([first.width, first.height], [30, 20], "without the opt-in: the first frame")
        XCTAssertEqual(first.source?.info.pages, 3)
        do {
            _ = try await pipeline.animatedImage(for: ImageRequest(path: path, size: .maxPixelSize(30), mode: .fill()))
            XCTFail("animations are fitted")
        } catch {
            XCTAssertEqual(error.kind, .invalidArgument)
        }
    }

    func testCancellingEveryProcessedTaskCancelsItsDecodeAndLoad() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 320, height: 240)
        let gate = GatedLoader()
        let pipeline = ImagePipeline.testing(loader: gate)
        let request = ImageRequest(path: path, size: .maxPixelSize(64), processors: [ImageProcessors.Greyscale()])
        let tasks = (0..<3).map { _ in pipeline.imageTask(with: request) }
        await waitUntil("the load waits at the gate") { gate.waiting == 1 }
        XCTAssertEqual(pipeline.inFlight.decodeJobs, 2, "a processing unit over a decode unit")
        for task in tasks { task.cancel() }
        await waitUntil("the held load is cancelled") { gate.cancelledWaits == 1 }
        await waitUntil("every table empties") { pipeline.inFlight.tablesAreEmpty }
        gate.open()
        XCTAssertEqual(pipeline.metrics.decodesStarted, 0)
        for task in tasks { XCTAssertEqual(task.state, .cancelled) }
        // Nothing failed is kept: the same request now loads and processes.
        let bitmap = try await pipeline.image(for: request)
        let pixel = try XCTUnwrap(bitmap.pixel(x: 10, y: 10))
        XCTAssertTrue(pixel[0] == pixel[1] && pixel[1] == pixel[2])
    }
}
