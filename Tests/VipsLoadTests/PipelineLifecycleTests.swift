import Foundation
import XCTest
@testable import VipsLoad

/// A pipeline that is no longer used goes away with its threads.
final class PipelineLifecycleTests: XCTestCase {
    /// Threads of this process named like the pipeline's decode threads.
    private func decodeThreadCount() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            let name = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
            return name.hasPrefix("vipsload.dec.")
        }.count
    }

    func testReleasedPipelineEndsItsDecodeThreads() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("a", width: 40, height: 30)
        let before = decodeThreadCount()
        weak var released: JobGraph?
        do {
            let pipelines = (0..<3).map { _ in ImagePipeline.testing(decodeConcurrency: 2) }
            for pipeline in pipelines {
                // Two different sizes at once: both decode threads start.
                async let a = pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(20)))
                async let b = pipeline.image(for: ImageRequest(path: path))
                _ = try await (a, b)
                await waitUntil("the decodes return") { pipeline.inFlight.isIdle }
            }
            released = pipelines[0].graph
            // Each pipeline started a thread per decode slot (pipelines of earlier
            // tests may be ending theirs meanwhile, hence no comparison with `before`).
            XCTAssertGreaterThanOrEqual(decodeThreadCount(), 6)
        }
        await waitUntil("the engine is released") { released == nil }
        await waitUntil("its decode threads end") { decodeThreadCount() <= before }
    }
}
