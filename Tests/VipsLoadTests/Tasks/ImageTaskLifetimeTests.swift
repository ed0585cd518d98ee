import Foundation
import VipsCore
import XCTest

@testable import VipsLoad

/// A task nobody keeps: the natural event loop over a task made in the loop's own expression.
final class ImageTaskLifetimeTests: XCTestCase {
    /// Iterates `events` of a task no variable holds, in a Swift task of its own (the loop hung before
    /// the fix, so it is awaited with a deadline), and returns the events it saw.
    private func eventsOfAnUnkeptTask(
        _ pipeline: @escaping @Sendable () -> ImagePipeline, _ request: ImageRequest
    ) async throws -> [ImageTask.Event] {
        let ended = expectation(description: "the events ended")
        let seen = LockedEvents()
        Task {
            for await event in pipeline().imageTask(with: request).events { seen.append(event) }
            ended.fulfill()
        }
        await fulfillment(of: [ended], timeout: 60)
        return seen.events
    }

    func testEventsOfATaskNobodyKeepsEndAndTheTaskLeavesThePipeline() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 640, height: 480)
        let pipeline = ImagePipeline.testing()
        let events = try await eventsOfAnUnkeptTask(
            { pipeline }, ImageRequest(path: path, size: .maxPixelSize(120)))
        guard case .finished(.success(let bitmap))? = events.last else {
            return XCTFail("last event: \(String(describing: events.last))")
        }
        XCTAssertEqual([bitmap.width, bitmap.height], [120, 90])
        let inFlight = pipeline.inFlight
        XCTAssertEqual([inFlight.tasks, inFlight.decodeJobs, inFlight.dataLoads], [0, 0, 0], "\(inFlight)")
    }

    /// The line as written: neither the pipeline nor the task is kept.
    func testEventsEndWhenNeitherThePipelineNorTheTaskIsKept() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 640, height: 480)
        let events = try await eventsOfAnUnkeptTask(
            { ImagePipeline(configuration: .init(decodeConcurrency: 1)) },
            ImageRequest(path: path, size: .maxPixelSize(120)))
        guard case .finished(.success)? = events.last else {
            return XCTFail("last event: \(String(describing: events.last))")
        }
    }
}

/// Events collected from another Swift task.
private final class LockedEvents: Sendable {
    private let state = LockedState<[ImageTask.Event]>([])
    func append(_ event: ImageTask.Event) { state.withLock { $0.append(event) } }
    var events: [ImageTask.Event] { state.withLock { $0 } }
}
