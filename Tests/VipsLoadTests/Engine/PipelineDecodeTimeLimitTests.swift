import Dispatch
import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsLoad

/// `Configuration.decodeTimeLimit`: a decode past the limit fails its
/// requests with `.timedOut`, is stopped, and gives its thread back.
final class PipelineDecodeTimeLimitTests: XCTestCase {
    private func pipeline(limit: Duration?) throws -> ImagePipeline {
        var configuration = ImagePipeline.Configuration(
            decodeConcurrency: 1, dataLoader: DataLoader(),
            memoryCache: MemoryCache(costLimit: 64 << 20))
        try configuration.setDecodeTimeLimit(limit)
        return ImagePipeline(configuration: configuration)
    }

    /// The pipeline's one decode thread is stopped at the limit and comes
    /// back. Each decode's start is an event the test waits for: the decode
    /// thread reports it after arming the watchdog, and at a 1 ms limit a
    /// request may be told `.timedOut` before its thread gets that far, so
    /// the test never asks right after the request returns whether the
    /// decode has started (that raced under ThreadSanitizer).
    func testALongDecodeIsStoppedAtTheLimitAndTheNextOneRuns() async throws {
        let folder = try ImageFolder()
        let large = try folder.write("large.tif", ImageSynthesizer.data(width: 4000, height: 3000, format: .tiff))
        let small = try folder.jpeg("small", width: 160, height: 120)
        let pipeline = try pipeline(limit: .milliseconds(1))
        let (starts, started) = AsyncStream<ImageCacheKey>.makeStream()
        pipeline.engine.decodeObserver.withLock { $0 = { key in started.yield(key) } }
        var decodes = starts.makeAsyncIterator()

        let long = ImageRequest(path: large, size: .maxPixelSize(256))
        await assertThrows(kind: [.timedOut], "a 12 MP TIFF in 1 ms") {
            _ = try await pipeline.image(for: long)
        }
        let first = await decodes.next()
        XCTAssertEqual(first?.sourceKey, long.cacheKey.sourceKey, "the decode ran and was stopped")
        await waitUntil("the stopped decode returns its thread") { pipeline.inFlight.runningDecodes == 0 }

        // The pipeline's one decode thread came back: its next decode starts
        // (at a 1 ms limit it may time out too; that it ran is the point).
        let next = ImageRequest(path: small, size: .maxPixelSize(80))
        do {
            let bitmap = try await pipeline.image(for: next)
            XCTAssertEqual(bitmap.width, 80)
        } catch {
            XCTAssertEqual(error.kind, .timedOut, "\(error)")
        }
        let second = await decodes.next()
        XCTAssertEqual(second?.sourceKey, next.cacheKey.sourceKey, "the next decode ran on the same pipeline")
        await waitUntil("the pipeline is idle") { pipeline.inFlight.isIdle }
        XCTAssertNil(pipeline.cachedImage(for: long), "nothing is cached")
        started.finish()
    }

    func testRequestsAreToldAtTheLimitEvenWhileTheDecodeCannotBeInterrupted() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 160, height: 120)
        let pipeline = try pipeline(limit: .milliseconds(300))
        // A decode stuck where it cannot be interrupted (as a codec call that never returns would be).
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        pipeline.engine.decodeObserver.withLock {
            $0 = { _ in
                started.signal(); release.wait()
            }
        }
        let request = ImageRequest(path: path, size: .maxPixelSize(80))
        let first = pipeline.imageTask(with: request)
        let second = pipeline.imageTask(with: request)
        for task in [first, second] {
            await assertThrows(kind: [.timedOut], "a stuck decode") { _ = try await task.image }
        }
        XCTAssertEqual(started.wait(timeout: .now()), .success, "the decode had started")
        XCTAssertEqual(pipeline.inFlight.runningDecodes, 1, "the stuck decode still holds its thread")
        XCTAssertEqual(pipeline.inFlight.tasks, 0)

        // Once it returns, its late result is dropped, and a new request decodes afresh.
        pipeline.engine.decodeObserver.withLock { $0 = nil }
        release.signal()
        await waitUntil("the stuck decode returns") { pipeline.inFlight.isIdle }
        XCTAssertNil(pipeline.cachedImage(for: request))
        let bitmap = try await pipeline.image(for: request)
        XCTAssertEqual(bitmap.width, 80)
    }

    func testALimitThatIsNotPositiveIsRefusedWhenSetAndDecodesAreNotChecked() throws {
        var configuration = ImagePipeline.Configuration()
        for limit in [Duration.zero, .milliseconds(-5)] {
            XCTAssertThrowsError(try configuration.setDecodeTimeLimit(limit), "\(limit)") { error in
                XCTAssertEqual((error as? VipsError)?.kind, .invalidArgument, "\(error)")
            }
            XCTAssertEqual(configuration.decodeTimeLimit, .seconds(30), "the previous limit stays")
        }
        try configuration.setDecodeTimeLimit(nil)
        XCTAssertNil(configuration.decodeTimeLimit)
        try configuration.setDecodeTimeLimit(.seconds(2))
        XCTAssertEqual(configuration.decodeTimeLimit, .seconds(2))
    }
}
