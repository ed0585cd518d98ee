import Foundation
import TestSupport
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsLoad

/// Progressive previews while downloading: a progressive JPEG dripped by the
/// test server shows previews as its scans complete, long before its body has
/// arrived; never after the final image, never smaller, only when asked for,
/// and none once the task is cancelled.
final class PipelinePreviewTests: NetworkTestCase {
    /// What a task's events said, in order.
    private struct Seen {
        /// For each preview: its pixels, the body bytes received before it, the seconds since the start.
        var previews: [(width: Int, height: Int, received: Int, seconds: Double)] = []
        var received = 0
        var finished: Result<Bitmap, VipsError>?
        var eventsAfterFinished = 0
        var seconds = 0.0
    }

    private func makePipeline(previewInterval: Duration = .milliseconds(500)) -> ImagePipeline {
        var configuration = ImagePipeline.Configuration(
            memoryCache: MemoryCache(), http: HTTPDataLoader.Configuration(temporaryDirectory: downloadDirectory))
        configuration.previewInterval = previewInterval
        return ImagePipeline(configuration: configuration)
    }

    /// About 2 MB of progressive JPEG, made by libvips (`interlace`).
    private static let progressive: Data = {
        (try? ImageSynthesizer.data(width: 2100, height: 1575, seed: 11, format: .jpeg(quality: 95, progressive: true)))
            ?? Data()
    }()

    private func collect(_ task: ImageTask, cancelAtFirstPreview: Bool = false) async -> Seen {
        var seen = Seen()
        let start = ContinuousClock.now
        func seconds() -> Double {
            let elapsed = ContinuousClock.now - start
            return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        for await event in task.events {
            if seen.finished != nil { seen.eventsAfterFinished += 1 }
            switch event {
            case .progress(let completed, _):
                seen.received = completed
            case .preview(let bitmap):
                seen.previews.append((bitmap.width, bitmap.height, seen.received, seconds()))
                if cancelAtFirstPreview { task.cancel() }
            case .cacheHit: break
            case .finished(let outcome):
                seen.finished = outcome
                seen.seconds = seconds()
            }
        }
        return seen
    }

    func testADrippedProgressiveJPEGShowsPreviewsLongBeforeItsBodyHasArrived() async throws {
        let jpeg = Self.progressive
        XCTAssertGreaterThan(jpeg.count, 1_500_000, "about 2 MB")
        var response = TestHTTPServer.Response.ok(jpeg)
        response.drip(bytesPerSecond: 200_000)
        server.route("/progressive.jpg", response)
        let pipeline = makePipeline()
        let request = ImageRequest(
            url: server.url("/progressive.jpg"), size: .maxPixelSize(512), options: [.progressivePreviews],
            processors: [ImageProcessors.GaussianBlur(sigma: 1)])
        let seen = await collect(pipeline.imageTask(with: request))
        let final = try XCTUnwrap(try? seen.finished?.get())
        let first = try XCTUnwrap(seen.previews.first, "no preview")
        let sizes = seen.previews.map {
            "\($0.width)×\($0.height)@\(Int(Double($0.received) * 100 / Double(jpeg.count)))%"
        }
        print(
            "previews of a \(jpeg.count)-byte progressive JPEG at 200 kB/s: first after \(String(format: "%.2f", first.seconds)) s"
                + " (\(first.received) bytes, \(Int(Double(first.received) * 100 / Double(jpeg.count)))% of the body),"
                + " final after \(String(format: "%.2f", seen.seconds)) s; \(seen.previews.count) previews: \(sizes.joined(separator: ", "))"
        )
        XCTAssertLessThan(first.received, jpeg.count / 2, "the first preview came before half of the body")
        XCTAssertEqual(seen.eventsAfterFinished, 0)
        for (earlier, later) in zip(seen.previews, seen.previews.dropFirst()) {
            XCTAssertGreaterThanOrEqual(later.width * later.height, earlier.width * earlier.height, "never smaller")
            XCTAssertGreaterThanOrEqual(later.received, earlier.received)
        }
        // Processed like the final image: the same size.
        XCTAssertEqual(first.width, final.width)
        XCTAssertEqual(first.height, final.height)
        // Nothing of the previews is cached: only the final image is in memory.
        XCTAssertEqual(pipeline.memoryCache?.count, 1)
    }

    func testNoPreviewsUnlessTheRequestAsksForThem() async throws {
        let jpeg = Self.progressive
        var response = TestHTTPServer.Response.ok(jpeg)
        response.drip(bytesPerSecond: 2_000_000)
        server.route("/plain.jpg", response)
        let pipeline = makePipeline(previewInterval: .zero)
        let seen = await collect(
            pipeline.imageTask(with: ImageRequest(url: server.url("/plain.jpg"), size: .maxPixelSize(256))))
        XCTAssertNotNil(try? seen.finished?.get())
        XCTAssertGreaterThan(seen.received, 0)
        XCTAssertEqual(seen.previews.count, 0)
    }

    func testABaselineJPEGHasNoPreviews() async throws {
        let baseline = try ImageSynthesizer.data(width: 2000, height: 1500, seed: 12, format: .jpeg(quality: 95))
        var response = TestHTTPServer.Response.ok(baseline)
        response.drip(bytesPerSecond: 2_000_000)
        server.route("/baseline.jpg", response)
        let pipeline = makePipeline(previewInterval: .zero)
        let seen = await collect(
            pipeline.imageTask(
                with: ImageRequest(
                    url: server.url("/baseline.jpg"), size: .maxPixelSize(256), options: [.progressivePreviews])))
        XCTAssertNotNil(try? seen.finished?.get())
        XCTAssertEqual(seen.previews.count, 0)
    }

    func testCancellingATaskStopsItsPreviews() async throws {
        let jpeg = Self.progressive
        var response = TestHTTPServer.Response.ok(jpeg)
        response.drip(bytesPerSecond: 400_000)
        server.route("/cancelled.jpg", response)
        let pipeline = makePipeline(previewInterval: .zero)
        let task = pipeline.imageTask(
            with: ImageRequest(
                url: server.url("/cancelled.jpg"), size: .maxPixelSize(256), options: [.progressivePreviews]))
        let seen = await collect(task, cancelAtFirstPreview: true)
        XCTAssertEqual(seen.previews.count, 1, "none after the cancel")
        guard case .failure(let error)? = seen.finished else { return XCTFail("expected a cancellation") }
        XCTAssertEqual(error.kind, .cancelled)
        XCTAssertEqual(task.state, .cancelled)
        // The download is dropped, so no more bytes are read for previews.
        XCTAssertTrue(server.wait { $0.clientCloseCount("/cancelled.jpg") == 1 })
    }

    @MainActor
    func testASlotShowsPreviewsBeforeTheImageAndNoneAfter() async throws {
        let jpeg = Self.progressive
        var response = TestHTTPServer.Response.ok(jpeg)
        response.drip(bytesPerSecond: 1_000_000)
        server.route("/slot.jpg", response)
        let pipeline = makePipeline(previewInterval: .zero)
        let slot = ImageSlot(pipeline: pipeline)
        var log: [String] = []
        let done = expectation(description: "image")
        slot.onEvent = { event in
            switch event {
            case .placeholder: log.append("placeholder")
            case .preview: log.append("preview")
            case .image:
                log.append("image")
                done.fulfill()
            case .failure(let error, _): log.append("failure \(error)")
            }
        }
        slot.load(
            ImageRequest(url: server.url("/slot.jpg"), size: .maxPixelSize(256), options: [.progressivePreviews]))
        await fulfillment(of: [done], timeout: 60)
        XCTAssertEqual(log.first, "placeholder")
        XCTAssertEqual(log.last, "image")
        XCTAssertGreaterThan(log.filter { $0 == "preview" }.count, 0, "\(log)")
        XCTAssertEqual(log.filter { $0 == "image" }.count, 1)
    }
}
