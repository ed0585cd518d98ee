import Dispatch
import Foundation
import VipsCore
import XCTest

@testable import VipsLoad

/// Work nobody waits for any more: `Configuration.stopsAbandonedWork` stops a
/// running decode part-way, and a cancelled caller's encode never runs, or is
/// stopped while it runs. (A server answering within a deadline needs the
/// deadline to stop the work it times, not only the answer.)
final class PipelineAbandonedWorkTests: XCTestCase {
    /// Holds decodes on their thread until released: a decode that is
    /// deterministically running.
    private final class DecodeHold: Sendable {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)

        /// Holds every decode of `pipeline` from now on.
        init(_ pipeline: ImagePipeline) {
            pipeline.engine.decodeObserver.withLock {
                $0 = { [started, release] _ in
                    started.signal()
                    release.wait()
                }
            }
        }
    }

    private func pipeline(stopsAbandonedWork: Bool, decodeConcurrency: Int) -> ImagePipeline {
        var configuration = ImagePipeline.Configuration(
            decodeConcurrency: decodeConcurrency, dataLoader: DataLoader(),
            memoryCache: MemoryCache(costLimit: 64 << 20))
        configuration.stopsAbandonedWork = stopsAbandonedWork
        return ImagePipeline(configuration: configuration)
    }

    /// A running decode whose only caller cancels is stopped and leaves the
    /// pipeline at once: the next caller for the same image starts a decode
    /// of its own (it would otherwise join work that is stopping), the
    /// stopped decode caches nothing, and the pipeline ends idle.
    func testAnAbandonedRunningDecodeIsStoppedAndANewCallerStartsAfresh() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 320, height: 240)
        let pipeline = pipeline(stopsAbandonedWork: true, decodeConcurrency: 2)
        let hold = DecodeHold(pipeline)
        let request = ImageRequest(path: path, size: .maxPixelSize(80))
        let abandoned = pipeline.imageTask(with: request)
        await waitUntil("the decode is running") { hold.started.wait(timeout: .now()) == .success }
        abandoned.cancel()
        do {
            _ = try await abandoned.image
            XCTFail("a cancelled task delivered")
        } catch {
            XCTAssertTrue(error.isCancellation, "\(error)")
        }
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty, "the stopped decode left the pipeline's tables")

        let next = pipeline.imageTask(with: request)
        await waitUntil("the new caller's own decode is running") { hold.started.wait(timeout: .now()) == .success }
        XCTAssertEqual(pipeline.metrics.coalesced, 0, "nothing joined the stopping decode")
        hold.release.signal()
        hold.release.signal()
        let bitmap = try await next.image
        XCTAssertEqual(bitmap.width, 80)
        await waitUntil("both decodes returned") { pipeline.inFlight.isIdle }
        XCTAssertEqual(pipeline.metrics.decodesStarted, 2)
        pipeline.engine.decodeObserver.withLock { $0 = nil }
    }

    /// Without `stopsAbandonedWork` (the default) the same running decode
    /// runs on, and the next caller joins it: the behaviour the flag changes.
    func testByDefaultAnAbandonedRunningDecodeRunsOnAndIsJoined() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 320, height: 240)
        let pipeline = pipeline(stopsAbandonedWork: false, decodeConcurrency: 2)
        let hold = DecodeHold(pipeline)
        let request = ImageRequest(path: path, size: .maxPixelSize(80))
        let abandoned = pipeline.imageTask(with: request)
        await waitUntil("the decode is running") { hold.started.wait(timeout: .now()) == .success }
        abandoned.cancel()
        _ = try? await abandoned.image
        let next = pipeline.imageTask(with: request)
        XCTAssertEqual(pipeline.metrics.coalesced, 1, "the new caller joined the running decode")
        hold.release.signal()
        let bitmap = try await next.image
        XCTAssertEqual(bitmap.width, 80)
        pipeline.engine.decodeObserver.withLock { $0 = nil }
    }

    /// An encode whose caller is cancelled while it waits for a decode thread
    /// never runs: the caller gets `.cancelled` at once, while the thread is
    /// still busy. One cancelled while it runs is stopped and throws
    /// `.cancelled` too, rather than handing back an image nobody wants.
    func testACancelledEncodeNeverRunsOrIsStoppedWhileItRuns() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 320, height: 240)
        let pipeline = pipeline(stopsAbandonedWork: true, decodeConcurrency: 1)
        let hold = DecodeHold(pipeline)
        let width = 3000
        let height = 2000
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        for index in pixels.indices { pixels[index] = UInt8(truncatingIfNeeded: index &* 2_654_435_761 >> 13) }
        let large = try Bitmap(width: width, height: height, channels: 3, pixels: pixels)

        // The pipeline's one decode thread is busy: the encode waits for it.
        let busy = pipeline.imageTask(with: ImageRequest(path: path, size: .maxPixelSize(80)))
        await waitUntil("the decode holds the only thread") { hold.started.wait(timeout: .now()) == .success }
        let answer = LockedState<Result<EncodedImage, VipsError>?>(nil)
        let queued = Task {
            let result: Result<EncodedImage, VipsError>
            do throws(VipsError) {
                result = .success(try await pipeline.encode(large, as: .png()))
            } catch {
                result = .failure(error)
            }
            answer.withLock { $0 = result }
        }
        await waitUntil("the encode is queued") { pipeline.inFlight.queuedDecodes == 1 }
        queued.cancel()
        // Bounded: were the encode still queued, it could only run once the thread is released below.
        await waitUntil("the cancelled encode is answered while the thread is still busy") {
            answer.withLock { $0 } != nil
        }
        XCTAssertEqual(pipeline.inFlight.queuedDecodes, 0, "it left the queue")
        hold.release.signal()
        await queued.value
        switch answer.withLock({ $0 }) {
        case .failure(let error)?: XCTAssertEqual(error.kind, .cancelled, "\(error)")
        case .success?: XCTFail("an encode cancelled while queued still ran")
        case nil: XCTFail("no answer")
        }
        _ = try await busy.image
        pipeline.engine.decodeObserver.withLock { $0 = nil }

        let running = Task { try await pipeline.encode(large, as: .png(compression: 9)) }
        await waitUntil("the encode runs") { pipeline.inFlight.runningDecodes == 1 }
        running.cancel()
        await assertThrows(kind: .cancelled, "an encode cancelled while it runs") { try await running.value }
        await waitUntil("the thread is free again") { pipeline.inFlight.isIdle }
    }
}
