import Foundation
import XCTest

@testable import VipsLoad

/// Decode concurrency, priorities and cancellation through the pipeline.
final class PipelineQueueTests: XCTestCase {
    /// The order in which decodes start, from the pipeline's decode threads.
    private final class DecodeLog: Sendable {
        private let keys = LockedState<[String]>([])
        func record(_ key: ImageCacheKey) { keys.withLock { $0.append(key.sourceKey) } }
        var order: [String] { keys.withLock { $0 } }
    }

    func testFiftyCancelledQueuedTasksNeverDecode() async throws {
        let folder = try ImageFolder()
        let paths = try (0..<50).map { try folder.png("image\($0)", width: 24, height: 16, seed: $0) }
        let pipeline = ImagePipeline.testing(decodeConcurrency: 1)
        pipeline.isDecodingSuspended = true

        let tasks = paths.map { pipeline.imageTask(with: ImageRequest(path: $0)) }
        let outcomes = Task {
            await withTaskGroup(of: Bool.self) { group in
                for task in tasks {
                    group.addTask {
                        do { _ = try await task.image; return false } catch { return error.isCancellation }
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
        }
        // All loaded and waiting for the one (blocked) decode slot.
        await waitUntil("50 decodes queued") { pipeline.inFlight.queuedDecodes == 50 }
        for task in tasks { task.cancel() }
        let cancelled = await outcomes.value
        XCTAssertEqual(cancelled, [Bool](repeating: true, count: 50))
        XCTAssertTrue(tasks.allSatisfy { $0.state == .cancelled })
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)
        XCTAssertEqual(pipeline.inFlight.queuedDecodes, 0)
        XCTAssertEqual(pipeline.inFlight.runningDecodes, 0)
        await waitUntil("the last load slot is released") { pipeline.inFlight.isIdle }

        pipeline.isDecodingSuspended = false
        let after = try await pipeline.image(for: ImageRequest(path: paths[0]))
        XCTAssertEqual(after.width, 24)
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.decodesStarted, 1, "only the request made after the cancellations decodes")
        XCTAssertEqual(metrics.cancelled, 50)
    }

    func testCancellingTheCallingSwiftTaskCancelsTheRequest() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 64, height: 64)
        let gate = GatedLoader()
        let pipeline = ImagePipeline.testing(loader: gate)

        let caller = Task { try await pipeline.image(for: ImageRequest(path: path)) }
        await waitUntil("the load waits at the gate") { gate.waiting == 1 }
        caller.cancel()
        do {
            _ = try await caller.value
            XCTFail("a cancelled caller got an image")
        } catch {
            XCTAssertTrue(error.isCancellation, "\(error)")
        }
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)
        await waitUntil("the loader saw the cancellation") { gate.cancelledWaits == 1 }
        await waitUntil("the load slot is released") { pipeline.inFlight.isIdle }
        XCTAssertEqual(pipeline.metrics.decodesStarted, 0)
        XCTAssertEqual(pipeline.metrics.cancelled, 1)
    }

    func testSharedWorkIsCancelledOnlyWhenTheLastCallerCancels() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 120, height: 90)
        let gate = GatedLoader()
        let pipeline = ImagePipeline.testing(loader: gate)
        let request = ImageRequest(path: path, size: .maxPixelSize(60))

        let first = pipeline.imageTask(with: request)
        let second = pipeline.imageTask(with: request)
        let third = pipeline.imageTask(with: request)
        await waitUntil("the load waits at the gate") { gate.waiting == 1 }
        first.cancel()
        second.cancel()
        XCTAssertEqual(pipeline.inFlight.decodeJobs, 1, "one caller still wants the work")
        XCTAssertEqual(gate.cancelledWaits, 0)
        gate.open()
        let bitmap = try await third.image
        XCTAssertEqual(bitmap.width, 60)
        XCTAssertEqual(first.state, .cancelled)
        XCTAssertEqual(third.state, .completed)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)

        // Now all callers of another request cancel: the load itself is cancelled.
        let gate2 = GatedLoader()
        let pipeline2 = ImagePipeline.testing(loader: gate2)
        let a = pipeline2.imageTask(with: request), b = pipeline2.imageTask(with: request)
        await waitUntil("the load waits at the gate") { gate2.waiting == 1 }
        a.cancel()
        b.cancel()
        await waitUntil("the loader saw the cancellation") { gate2.cancelledWaits == 1 }
        XCTAssertTrue(pipeline2.inFlight.tablesAreEmpty)
        await waitUntil("the load slot is released") { pipeline2.inFlight.isIdle }
        XCTAssertEqual(pipeline2.metrics.decodesStarted, 0)
    }

    /// Holds decodes on their thread until released: a decode that is
    /// deterministically running.
    private final class DecodeHold: Sendable {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
    }

    func testCancelledRunningDecodeDeliversToNoOneButFillsTheMemoryCache() async throws {
        let folder = try ImageFolder()
        let path = try folder.jpeg("photo", width: 160, height: 120)
        let pipeline = ImagePipeline.testing(decodeConcurrency: 1)
        let hold = DecodeHold()
        pipeline.engine.decodeObserver.withLock {
            $0 = { _ in
                hold.started.signal(); hold.release.wait()
            }
        }
        let request = ImageRequest(path: path, size: .maxPixelSize(80))

        let task = pipeline.imageTask(with: request)
        await waitUntil("the decode is running") { hold.started.wait(timeout: .now()) == .success }
        task.cancel()
        do {
            _ = try await task.image
            XCTFail("a cancelled task delivered")
        } catch {
            XCTAssertTrue(error.isCancellation)
        }
        XCTAssertEqual(pipeline.inFlight.tasks, 0)
        XCTAssertEqual(pipeline.inFlight.decodeJobs, 1, "the running decode stays until it returns")

        // A new caller for the same key joins the running decode instead of starting another.
        let joiner = pipeline.imageTask(with: request)
        XCTAssertEqual(pipeline.metrics.coalesced, 1)
        hold.release.signal()
        let bitmap = try await joiner.image
        XCTAssertEqual(bitmap.width, 80)
        XCTAssertEqual(task.state, .cancelled)

        // Cancelled with no one joining: the result still lands in the memory cache.
        let other = pipeline.imageTask(
            with: ImageRequest(path: path, size: .maxPixelSize(40), options: .disableMemoryCacheReads))
        await waitUntil("the second decode is running") { hold.started.wait(timeout: .now()) == .success }
        other.cancel()
        hold.release.signal()
        await waitUntil("the decode returns") { pipeline.inFlight.isIdle }
        XCTAssertTrue(pipeline.inFlight.tablesAreEmpty)
        XCTAssertEqual(other.state, .cancelled)
        pipeline.engine.decodeObserver.withLock { $0 = nil }
        let cached = try await pipeline.image(for: ImageRequest(path: path, size: .maxPixelSize(40)))
        XCTAssertEqual(cached.width, 40)
        let metrics = pipeline.metrics
        XCTAssertEqual(metrics.decodesStarted, 2)
        XCTAssertEqual(metrics.memoryHits, 1)
        XCTAssertEqual(metrics.cancelled, 2)
    }

    func testRaisedLowPriorityTaskStartsBeforeTheOtherWaitingOnes() async throws {
        let folder = try ImageFolder()
        let paths = try (0..<6).map { try folder.png("image\($0)", width: 32, height: 32, seed: $0) }
        let pipeline = ImagePipeline.testing(decodeConcurrency: 1)
        let log = DecodeLog()
        pipeline.engine.decodeObserver.withLock { $0 = { log.record($0) } }
        pipeline.isDecodingSuspended = true

        // Queue one at a time so the decode queue's arrival order is known.
        var tasks: [ImageTask] = []
        for (index, path) in paths.enumerated() {
            tasks.append(pipeline.imageTask(with: ImageRequest(path: path, priority: index == 0 ? .veryLow : .normal)))
            await waitUntil("decode \(index) queued") { pipeline.inFlight.queuedDecodes == index + 1 }
        }
        tasks[0].priority = .veryHigh
        XCTAssertEqual(tasks[0].priority, .veryHigh)
        pipeline.isDecodingSuspended = false
        for task in tasks { _ = try await task.image }

        XCTAssertEqual(log.order, paths.map { "file:" + $0 }, "the raised task first, then first come first served")
    }

    func testWaitingWorkStartsHighestPriorityFirst() async throws {
        let folder = try ImageFolder()
        let priorities: [ImageRequest.Priority] = [.low, .veryLow, .high, .normal, .veryHigh, .normal]
        let paths = try priorities.indices.map { try folder.png("image\($0)", width: 32, height: 32, seed: $0) }
        let pipeline = ImagePipeline.testing(decodeConcurrency: 1)
        let log = DecodeLog()
        pipeline.engine.decodeObserver.withLock { $0 = { log.record($0) } }
        pipeline.isDecodingSuspended = true

        var tasks: [ImageTask] = []
        for (index, path) in paths.enumerated() {
            tasks.append(pipeline.imageTask(with: ImageRequest(path: path, priority: priorities[index])))
            await waitUntil("decode \(index) queued") { pipeline.inFlight.queuedDecodes == index + 1 }
        }
        // Lowering a task moves it back; the shared job follows its highest task.
        tasks[2].priority = .veryLow
        pipeline.isDecodingSuspended = false
        for task in tasks { _ = try await task.image }
        XCTAssertEqual(log.order, [4, 3, 5, 0, 1, 2].map { "file:" + paths[$0] })
    }

    func testSharedJobRunsAtItsHighestCallersPriority() async throws {
        let folder = try ImageFolder()
        let paths = try (0..<3).map { try folder.png("image\($0)", width: 32, height: 32, seed: $0) }
        let pipeline = ImagePipeline.testing(decodeConcurrency: 1)
        let log = DecodeLog()
        pipeline.engine.decodeObserver.withLock { $0 = { log.record($0) } }
        pipeline.isDecodingSuspended = true

        let first = pipeline.imageTask(with: ImageRequest(path: paths[0], priority: .normal))
        await waitUntil("first queued") { pipeline.inFlight.queuedDecodes == 1 }
        let second = pipeline.imageTask(with: ImageRequest(path: paths[1], priority: .low))
        await waitUntil("second queued") { pipeline.inFlight.queuedDecodes == 2 }
        // A high-priority caller joins the low job: the job moves ahead.
        let joiner = pipeline.imageTask(with: ImageRequest(path: paths[1], priority: .high))
        XCTAssertEqual(pipeline.metrics.coalesced, 1)
        let third = pipeline.imageTask(with: ImageRequest(path: paths[2], priority: .normal))
        await waitUntil("third queued") { pipeline.inFlight.queuedDecodes == 3 }
        pipeline.isDecodingSuspended = false
        for task in [first, second, joiner, third] { _ = try await task.image }
        XCTAssertEqual(log.order, [1, 0, 2].map { "file:" + paths[$0] })
    }
}
