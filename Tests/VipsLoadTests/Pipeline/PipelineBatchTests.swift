import Foundation
import XCTest

@testable import VipsLoad

/// Many requests at once, each result with its index as it completes.
final class PipelineBatchTests: XCTestCase {
    func testEveryResultArrivesOnceWithItsIndex() async throws {
        let folder = try ImageFolder()
        let paths = try (0..<20).map { try folder.png("i\($0)", width: 30 + $0, height: 20, seed: $0) }
        let pipeline = ImagePipeline.testing()
        _ = try await pipeline.image(for: ImageRequest(path: paths[3])) // one memory hit
        var requests = paths.map { ImageRequest(path: $0) }
        requests.append(ImageRequest(path: paths[5])) // a duplicate shares a decode
        for i in 0..<4 { requests.append(ImageRequest(path: folder.path + "/missing\(i).png")) }

        var seen: [Int: ImagePipeline.BatchResult] = [:]
        for await result in pipeline.images(for: requests) {
            XCTAssertNil(seen[result.index], "index \(result.index) delivered twice")
            seen[result.index] = result
        }
        XCTAssertEqual(seen.count, 25)
        for index in 0..<20 {
            XCTAssertEqual(try seen[index]?.result.get().width, 30 + index)
        }
        XCTAssertEqual(try seen[20]?.result.get().width, 35)
        for index in 21..<25 {
            XCTAssertThrowsError(try seen[index]?.result.get()) {
                XCTAssertEqual(($0 as? VipsError)?.kind, .fileNotFound)
            }
            XCTAssertEqual(seen[index]?.request, requests[index])
        }
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.decodesStarted, 20)
        // The preloaded image hits; the duplicate joins its twin's decode, or hits
        // the cache if that decode already finished: never a second decode.
        XCTAssertEqual(metrics.memoryHits + metrics.coalesced, 2)
        XCTAssertGreaterThanOrEqual(metrics.memoryHits, 1)
        XCTAssertEqual(metrics.failed, 4)
    }

    func testStoppingEarlyCancelsTheRest() async throws {
        let folder = try ImageFolder()
        let paths = try (0..<10).map { try folder.png("i\($0)", width: 16, height: 16, seed: $0) }
        // Six loads run at once: the one let through must be among the first six.
        let gate = GatedLoader(holds: { $0 != .file(paths[2]) })
        let pipeline = ImagePipeline.testing(loader: gate)

        var first: ImagePipeline.BatchResult?
        for await result in pipeline.images(for: paths.map { ImageRequest(path: $0) }) {
            first = result
            break
        }
        XCTAssertEqual(first?.index, 2)
        await waitUntil("the rest are cancelled") { pipeline.inFlight.tablesAreEmpty }
        // Started loads see the cancellation; queued ones never reach the loader.
        await waitUntil("no load is left at the gate") { gate.waiting == 0 && pipeline.inFlight.isIdle }
        XCTAssertEqual(gate.cancelledWaits, gate.calls.count - 1)
        XCTAssertEqual(pipeline.metrics.cancelled, 9)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)
    }

    func testEmptyBatchEndsAtOnce() async {
        let pipeline = ImagePipeline.testing()
        var count = 0
        for await _ in pipeline.images(for: []) { count += 1 }
        XCTAssertEqual(count, 0)
    }
}
