import Foundation
import XCTest

@testable import VipsLoad

/// Many callers, random cancellation: everyone resumes exactly once and the
/// pipeline ends with nothing in flight.
final class PipelineStressTests: XCTestCase {
    private final class Shared: Sendable {
        let tally = LockedState(Tally())
    }

    private struct Tally {
        var resumed = 0
        var succeeded = 0
        var cancelled = 0
        var wrongPixels = 0
        var unexpectedErrors: [String] = []
    }

    func testTwoThousandRequestsWithRandomCancellationAllResumeOnceAndLeaveNothingInFlight() async throws {
        let folder = try ImageFolder()
        // 30 images, each with its own width, so a result shows which image it is.
        let images = try (0..<30).map {
            (path: try folder.png("i\($0)", width: 40 + $0, height: 30, seed: $0), width: 40 + $0)
        }
        // Each size with the width it gives (nil: the image's own).
        let sizes: [(TargetSize, Int?)] = [(.original, nil), (.maxPixelSize(20), 20), (.maxPixelSize(10), 10)]
        // A small cache, so evictions keep decodes and downscales going all along.
        let pipeline = ImagePipeline.testing(
            decodeConcurrency: 2, cache: MemoryCache(costLimit: 40_000, entryCostLimitFraction: 0.2))
        let shared = Shared()
        let workers = 16, perWorker = 125

        let run = Task {
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<workers {
                    group.addTask {
                        var random = SystemRandomNumberGenerator()
                        for _ in 0..<perWorker {
                            let image = images.randomElement(using: &random)!
                            let (size, fixedWidth) = sizes.randomElement(using: &random)!
                            var request = ImageRequest(
                                path: image.path, size: size,
                                priority: ImageRequest.Priority.allCases.randomElement(using: &random)!)
                            if Int.random(in: 0..<10, using: &random) == 0 {
                                request.options.insert(.disableMemoryCacheReads)
                            }
                            let outcome: Result<Bitmap, any Error>
                            switch Int.random(in: 0..<4, using: &random) {
                            case 0: // plain await
                                outcome = await Result { try await pipeline.image(for: request) }
                            case 1: // task handle cancelled after a few hops
                                let task = pipeline.imageTask(with: request)
                                for _ in 0..<Int.random(in: 0..<4, using: &random) { await Task.yield() }
                                task.cancel()
                                outcome = await Result { try await task.image }
                            case 2: // the calling Swift task is cancelled
                                let caller = Task { try await pipeline.image(for: request) }
                                for _ in 0..<Int.random(in: 0..<4, using: &random) { await Task.yield() }
                                caller.cancel()
                                outcome = await caller.result
                            default: // reprioritised while waiting
                                let task = pipeline.imageTask(with: request)
                                await Task.yield()
                                task.priority = ImageRequest.Priority.allCases.randomElement(using: &random)!
                                outcome = await Result { try await task.image }
                            }
                            shared.tally.withLock { tally in
                                tally.resumed += 1
                                switch outcome {
                                case .success(let bitmap):
                                    tally.succeeded += 1
                                    if bitmap.width != fixedWidth ?? image.width { tally.wrongPixels += 1 }
                                case .failure(let error) where error.isCancellation:
                                    tally.cancelled += 1
                                case .failure(let error):
                                    tally.unexpectedErrors.append("\(worker): \(error)")
                                }
                            }
                        }
                    }
                }
            }
        }
        // A caller that is never resumed would hang: fail instead of waiting forever.
        await waitUntil("all 2,000 callers resume", timeout: 90) {
            shared.tally.withLock { $0.resumed } == workers * perWorker
        }
        await run.value

        let final = shared.tally.withLock { $0 }
        XCTAssertEqual(final.resumed, 2_000)
        XCTAssertEqual(final.succeeded + final.cancelled, 2_000)
        XCTAssertEqual(final.unexpectedErrors, [])
        XCTAssertEqual(final.wrongPixels, 0)
        XCTAssertGreaterThan(final.cancelled, 100, "the test must actually cancel")
        XCTAssertGreaterThan(final.succeeded, 100)

        // The moment the last caller has resumed no task is attached and nothing
        // waits in a queue; at most the decodes already running (2 threads) are
        // finishing into the memory cache...
        let inFlight = pipeline.inFlight
        XCTAssertEqual(inFlight.tasks, 0, "\(inFlight)")
        XCTAssertEqual(inFlight.queuedDecodes, 0)
        XCTAssertEqual(inFlight.queuedLoads, 0)
        XCTAssertLessThanOrEqual(inFlight.decodeJobs, 2)
        // ... and once they return, every table is empty.
        await waitUntil("the pipeline is idle") { pipeline.inFlight.isIdle }
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)

        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.requests, 2_000)
        XCTAssertEqual(metrics.cancelled, final.cancelled)
        XCTAssertEqual(metrics.failed, 0)
        XCTAssertEqual(metrics.decodesStarted, metrics.decodesFinished)
        XCTAssertTrue(try XCTUnwrap(pipeline.memoryCache).isConsistent)
        print("stress: \(metrics)")
    }
}

private extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
