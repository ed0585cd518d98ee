import Foundation
import XCTest

@testable import VipsLoad

/// Ladders of sizes or sources, delivered smallest first, never backwards.
final class PipelineProgressiveTests: XCTestCase {
    func testLadderOfSizesDeliversIncreasingSizesInOrder() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 800, height: 600)
        let gate = GatedLoader()
        // One decode slot: the three decodes run in ladder order, so every step arrives.
        let pipeline = ImagePipeline.testing(loader: gate, decodeConcurrency: 1)
        let ladder = [TargetSize.maxPixelSize(64), .maxPixelSize(256), .original].map {
            ImageRequest(path: path, size: $0)
        }

        let steps = Task { try await collectSteps(pipeline.progressiveImages(for: ladder)) }
        await waitUntil("three sizes wait for one load") { pipeline.inFlight.decodeJobs == 3 }
        gate.open()
        let delivered = try await steps.value

        XCTAssertEqual(delivered.map(\.step), [0, 1, 2])
        XCTAssertEqual(delivered.map(\.bitmap.width), [64, 256, 800])
        XCTAssertEqual(delivered.map(\.isFinal), [false, false, true])
        XCTAssertEqual(pipeline.metrics.dataLoadsStarted, 1)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 3)
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)
    }

    func testOnlyTheOriginalIsDeliveredWhenItIsAlreadyCached() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 400, height: 300)
        let pipeline = ImagePipeline.testing()
        _ = try await pipeline.image(for: ImageRequest(path: path))
        let ladder = [TargetSize.maxPixelSize(32), .maxPixelSize(128), .original].map {
            ImageRequest(path: path, size: $0)
        }

        let delivered = try await collectSteps(pipeline.progressiveImages(for: ladder))
        XCTAssertEqual(delivered.map(\.step), [2])
        XCTAssertEqual(delivered.first?.bitmap.width, 400)
        XCTAssertEqual(delivered.first?.isFinal, true)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1, "nothing decoded for the ladder")
        XCTAssertEqual(pipeline.metrics.memoryResizes, 0, "the smaller steps were not even made")
        XCTAssertEqual(pipeline.metrics.requests, 2)
    }

    func testACachedMiddleStepIsShownAtOnceAndOnlyLargerStepsLoad() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 400, height: 300)
        let pipeline = ImagePipeline.testing()
        _ = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(128)))
        let ladder = [TargetSize.maxPixelSize(32), .maxPixelSize(128), .original].map {
            ImageRequest(path: path, size: $0)
        }

        let delivered = try await collectSteps(pipeline.progressiveImages(for: ladder))
        XCTAssertEqual(delivered.map(\.step), [1, 2])
        XCTAssertEqual(delivered.map(\.bitmap.width), [128, 400])
        XCTAssertEqual(pipeline.metrics.decodesStarted, 2)
        XCTAssertEqual(pipeline.metrics.requests, 3, "the 32 px step was never requested")
    }

    func testLargerStepArrivingFirstCancelsTheSmallerPendingStep() async throws {
        let folder = try ImageFolder()
        let thumbnail = try folder.jpeg("thumbnail", width: 40, height: 30, seed: 2)
        let full = try folder.jpeg("full", width: 320, height: 240, seed: 2)
        // The thumbnail's load is held back: the full image arrives first.
        let gate = GatedLoader(holds: { $0 == .file(thumbnail) })
        let pipeline = ImagePipeline.testing(loader: gate)
        let ladder = [ImageRequest(path: thumbnail), ImageRequest(path: full)]

        let delivered = try await collectSteps(pipeline.progressiveImages(for: ladder))
        XCTAssertEqual(delivered.map(\.step), [1])
        XCTAssertEqual(delivered.first?.bitmap.width, 320)
        // Cancelled at the gate, or (when the full image won by a wide margin)
        // before its load even reached the loader.
        await waitUntil("the thumbnail's load is cancelled") { gate.waiting == 0 && pipeline.inFlight.isIdle }
        XCTAssertEqual(gate.cancelledWaits, gate.calls.filter { $0 == ImageSource.file(thumbnail).key }.count)
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1, "the thumbnail is never decoded")
        XCTAssertEqual(pipeline.metrics.cancelled, 1)
    }

    func testSmallerStepFailureIsSkippedAndFinalStepFailureThrows() async throws {
        let folder = try ImageFolder()
        let real = try folder.jpeg("real", width: 100, height: 80)
        let missing = folder.path + "/missing.jpg"
        let pipeline = ImagePipeline.testing(decodeConcurrency: 1)

        let skipped = try await collectSteps(
            pipeline.progressiveImages(for: [ImageRequest(path: missing), ImageRequest(path: real)]))
        XCTAssertEqual(skipped.map(\.step), [1])

        var steps: [Int] = []
        do {
            for try await step in pipeline.progressiveImages(for: [
                ImageRequest(path: real, size: .maxPixelSize(10)), ImageRequest(path: missing)
            ]) {
                steps.append(step.step)
            }
            XCTFail("the missing final step did not throw")
        } catch {
            XCTAssertEqual(error.kind, .fileNotFound)
        }
        XCTAssertTrue(steps == [] || steps == [0], "\(steps)")

        do {
            for try await _ in pipeline.progressiveImages(for: []) {}
            XCTFail("an empty ladder did not throw")
        } catch {
            XCTAssertEqual(error.kind, .invalidArgument)
        }
    }

    func testBreakingAfterTheFirstStepCancelsTheLargerOnes() async throws {
        let folder = try ImageFolder()
        let thumbnail = try folder.jpeg("thumbnail", width: 40, height: 30)
        let full = try folder.jpeg("full", width: 400, height: 300)
        let gate = GatedLoader(holds: { $0 == .file(full) })
        let pipeline = ImagePipeline.testing(loader: gate)

        var first: ProgressiveImage?
        for try await step in pipeline.progressiveImages(for: [ImageRequest(path: thumbnail), ImageRequest(path: full)])
        {
            first = step
            // The thumbnail can arrive before the full image's load has even
            // started; stop only once that load is in flight, so what is
            // checked is that breaking cancels it.
            await waitUntil("the full image's load waits at the gate") { gate.waiting == 1 }
            break
        }
        XCTAssertEqual(first?.step, 0)
        XCTAssertEqual(first?.isFinal, false)
        await waitUntil("the full image's load is cancelled") { gate.cancelledWaits == 1 }
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)
        XCTAssertEqual(pipeline.metrics.cancelled, 1)
    }

    func testStoppingTheIterationCancelsEveryPendingStep() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 200, height: 100)
        let gate = GatedLoader()
        let pipeline = ImagePipeline.testing(loader: gate)
        let ladder = [TargetSize.maxPixelSize(20), .maxPixelSize(50), .original].map {
            ImageRequest(path: path, size: $0)
        }

        let consumer = Task { try await collectSteps(pipeline.progressiveImages(for: ladder)) }
        await waitUntil("the load waits") { gate.waiting == 1 }
        XCTAssertEqual(pipeline.inFlight.tasks, 3)
        consumer.cancel()
        let delivered = try? await consumer.value
        XCTAssertEqual(delivered?.count ?? 0, 0)
        await waitUntil("every step is cancelled") { pipeline.inFlight.tablesAreEmpty }
        await waitUntil("the shared load is cancelled") { gate.cancelledWaits == 1 }
        XCTAssertEqual(pipeline.metrics.cancelled, 3)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 0)
    }
}

/// Every step of a progressive load, in delivery order.
private func collectSteps(_ stream: ProgressiveImages) async throws -> [ProgressiveImage] {
    var steps: [ProgressiveImage] = []
    for try await step in stream { steps.append(step) }
    return steps
}
