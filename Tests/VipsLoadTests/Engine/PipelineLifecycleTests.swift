import Foundation
import XCTest

@testable import VipsLoad

/// A pipeline that is no longer used goes away with its threads.
final class PipelineLifecycleTests: XCTestCase {
    func testReleasedPipelineEndsItsDecodeThreads() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("a", width: 40, height: 30)
        weak var released: PipelineEngine?
        var pools: [PriorityThreadPool] = []
        do {
            let pipelines = (0..<3).map { _ in ImagePipeline.testing(decodeConcurrency: 2) }
            for pipeline in pipelines {
                // Two different sizes at once: a thread per decode slot starts.
                async let a = pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(20)))
                async let b = pipeline.image(for: ImageRequest(path: path))
                _ = try await (a, b)
                await waitUntil("the decodes return") { pipeline.inFlight.isIdle }
            }
            released = pipelines[0].engine
            pools = pipelines.map(\.engine.decodePool)
            await waitUntil("each pipeline's decode threads run") {
                pools.allSatisfy { $0.liveThreads.load(ordering: .relaxed) > 0 }
            }
            // ARC may end a value's life after its last use: keep them to here.
            withExtendedLifetime(pipelines) {}
        }
        // Nothing (no task, queue entry or thread) keeps the engine alive...
        await waitUntil("the engine is released") { released == nil }
        // ... and its threads end with it.
        await waitUntil("its decode threads end") { pools.allSatisfy { $0.liveThreads.load(ordering: .relaxed) == 0 } }
    }
}
