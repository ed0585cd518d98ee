import Foundation
import XCTest

@testable import VipsLoad

/// Calling back into the pipeline from inside its own callbacks — a data
/// loader's cancellation handler, a loader's `loadData`, an `ImageSlot`
/// event — as users do. The pipeline never runs outside code while it holds
/// a lock, so none of these crashes ("Recursive call to lock") or hangs. Each
/// test runs under a watchdog: a hang fails it instead of the whole suite.
final class PipelineReentrancyTests: XCTestCase {
    /// Runs `body` and fails the test if it has not finished within `seconds`.
    private func withWatchdog(
        _ what: String, seconds: Double = 30,
        _ body: @escaping @Sendable () async throws -> Void
    ) async {
        let finished = expectation(description: what)
        let failure = LockedState<(any Error)?>(nil)
        Task {
            do { try await body() } catch { failure.withLock { $0 = error } }
            finished.fulfill()
        }
        await fulfillment(of: [finished], timeout: seconds)
        if let error = failure.withLock({ $0 }) { XCTFail("\(what): \(error)") }
    }

    /// A loader whose loads of `hanging` wait until cancelled and then run
    /// `onCancel` inside the cancellation handler; other sources load normally.
    private final class CallbackLoader: ImageDataLoading {
        let hanging: ImageSource
        let entered = DispatchSemaphore(value: 0)
        let onCancel: LockedState<(@Sendable () -> Void)?> = LockedState(nil)
        private let base = DataLoader()
        private let waiter = LockedState<CheckedContinuation<Void, any Error>?>(nil)

        init(hanging: ImageSource) { self.hanging = hanging }

        func loadData(for source: ImageSource) async throws(VipsError) -> ImageData {
            guard source == hanging else { return try await base.loadData(for: source) }
            try? await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    waiter.withLock { $0 = continuation }
                    entered.signal()
                }
            } onCancel: {
                self.onCancel.withLock { $0 }?()
                self.waiter.withLock { waiter in
                    waiter?.resume(throwing: CancellationError())
                    waiter = nil
                }
            }
            throw .cancelled(source.description)
        }
    }

    /// Holds a pipeline for closures made before it.
    private final class PipelineBox: Sendable {
        let pipeline = LockedState<ImagePipeline?>(nil)
        var value: ImagePipeline? { pipeline.withLock { $0 } }
    }

    func testALoaderCancellationHandlerCanCallBackIntoThePipeline() async throws {
        let folder = try ImageFolder()
        let hung = try folder.png("hung", width: 40, height: 30)
        let other = try folder.png("other", width: 60, height: 40)
        let cached = try folder.png("cached", width: 20, height: 20)
        let loader = CallbackLoader(hanging: .file(hung))
        let pipeline = ImagePipeline.testing(loader: loader)
        _ = try await pipeline.image(for: ImageRequest(path: cached))
        let box = PipelineBox()
        box.pipeline.withLock { $0 = pipeline }
        let seen = LockedState<[String]>([])
        let spawned = LockedState<ImageTask?>(nil)
        loader.onCancel.withLock {
            $0 = {
                guard let pipeline = box.value else { return }
                let hit = pipeline.cachedImage(for: ImageRequest(path: cached))
                let inFlight = pipeline.inFlight
                let metrics = pipeline.metrics
                let task = pipeline.imageTask(with: ImageRequest(path: other, size: .maxPixelSize(30)))
                seen.withLock {
                    $0 = ["hit \(hit?.width ?? 0)", "tasks \(inFlight.tasks)", "requests \(metrics.requests)"]
                }
                spawned.withLock { $0 = task }
            }
        }
        await withWatchdog("cancelling a load whose handler calls back") {
            let task = pipeline.imageTask(with: ImageRequest(path: hung))
            await Task.detached { loader.entered.wait() }.value
            task.cancel()
            do throws(VipsError) {
                _ = try await task.image
                XCTFail("a cancelled task delivered")
            } catch {
                XCTAssertEqual(error.kind, .cancelled)
            }
            await waitUntil("the handler ran") { spawned.withLock { $0 } != nil }
            let bitmap = try await spawned.withLock { $0 }!.image
            XCTAssertEqual(bitmap.width, 30)
        }
        XCTAssertEqual(seen.withLock { $0 }.first, "hit 20")
        await waitUntil("nothing is left in flight") { pipeline.inFlight.isIdle }
    }

    func testALoaderCancellationHandlerWaitingOnAThreadThatReadsThePipelineDoesNotHang() async throws {
        let folder = try ImageFolder()
        let hung = try folder.png("hung", width: 40, height: 30)
        let loader = CallbackLoader(hanging: .file(hung))
        let pipeline = ImagePipeline.testing(loader: loader)
        let box = PipelineBox()
        box.pipeline.withLock { $0 = pipeline }
        let readOnOtherThread = LockedState(false)
        loader.onCancel.withLock {
            $0 = {
                let done = DispatchSemaphore(value: 0)
                Thread.detachNewThread {
                    _ = box.value?.inFlight
                    _ = box.value?.metrics
                    readOnOtherThread.withLock { $0 = true }
                    done.signal()
                }
                done.wait()
            }
        }
        await withWatchdog("a handler that waits for another thread reading the pipeline") {
            let task = pipeline.imageTask(with: ImageRequest(path: hung))
            await Task.detached { loader.entered.wait() }.value
            task.cancel()
            XCTAssertEqual(task.state, .cancelled)
        }
        await waitUntil("the other thread read the pipeline") { readOnOtherThread.withLock { $0 } }
    }

    /// A loader whose `loadData` first loads another image through the same pipeline.
    private final class NestingLoader: ImageDataLoading {
        let box: PipelineBox
        let nested: String
        private let base = DataLoader()

        init(box: PipelineBox, nested: String) {
            self.box = box
            self.nested = nested
        }

        func loadData(for source: ImageSource) async throws(VipsError) -> ImageData {
            if source.filePath != nested, let pipeline = box.value {
                let inner = try await pipeline.image(for: ImageRequest(path: nested, size: .maxPixelSize(10)))
                guard inner.width == 10 else { throw VipsError(.internal, "nested load gave \(inner.width) px") }
            }
            return try await base.loadData(for: source)
        }
    }

    func testALoaderCanSubmitAnotherRequestToTheSamePipeline() async throws {
        let folder = try ImageFolder()
        let outer = try folder.png("outer", width: 80, height: 60)
        let nested = try folder.png("nested", width: 40, height: 40)
        let box = PipelineBox()
        let pipeline = ImagePipeline.testing(loader: NestingLoader(box: box, nested: nested))
        box.pipeline.withLock { $0 = pipeline }
        await withWatchdog("a load that loads another image first") {
            let bitmap = try await pipeline.image(for: ImageRequest(path: outer, size: .maxPixelSize(40)))
            XCTAssertEqual([bitmap.width, bitmap.height], [40, 30])
        }
        XCTAssertEqual(pipeline.metrics.decodesStarted, 2)
    }

    // MARK: - Slots

    /// Events as strings, and a hook run inside the handler.
    @MainActor
    private final class Recorder {
        var log: [String] = []
        var reaction: ((ImageSlot.Event) -> Void)?

        func attach(to slot: ImageSlot, as name: String) {
            slot.onEvent = { [unowned self] event in
                let file: (ImageRequest) -> String = { String($0.source.key.split(separator: "/").last ?? "") }
                switch event {
                case .placeholder(_, let request): log.append("\(name) placeholder \(file(request))")
                case .image(_, let request, _): log.append("\(name) image \(file(request))")
                case .failure(let error, let request): log.append("\(name) failure \(error.kind) \(file(request))")
                case .preview(_, let request): log.append("\(name) preview \(file(request))")
                }
                reaction?(event)
            }
        }
    }

    @MainActor
    func testASlotHandlerCanResetOrReloadItsOwnSlotAndNeverSeesAStaleEvent() async throws {
        let folder = try ImageFolder()
        let first = try folder.png("first", width: 40, height: 30)
        let second = try folder.png("second", width: 50, height: 30)
        let gate = GatedLoader()
        let pipeline = ImagePipeline.testing(loader: gate)
        let slot = ImageSlot(pipeline: pipeline)
        let recorder = Recorder()
        recorder.attach(to: slot, as: "a")

        // Loading another request from inside the placeholder event.
        var reloaded = false
        recorder.reaction = { event in
            guard case .placeholder = event, !reloaded else { return }
            reloaded = true
            slot.load(ImageRequest(path: second))
        }
        slot.load(ImageRequest(path: first))
        XCTAssertEqual(recorder.log, ["a placeholder first.png", "a placeholder second.png"])
        // The first request was cancelled (and its cancellation is never
        // reported); only the second one waits.
        await waitUntil("the second load waits at the gate") { gate.waiting == 1 }
        XCTAssertEqual(pipeline.inFlight.tasks, 1)
        for _ in 0..<5 { await Task.yield() }
        XCTAssertEqual(recorder.log, ["a placeholder first.png", "a placeholder second.png"])

        // The slot's own reset() still cancels the second load.
        recorder.reaction = nil
        slot.reset()
        await waitUntil("the second load is cancelled") { gate.waiting == 0 && pipeline.inFlight.tablesAreEmpty }

        // Resetting from inside the placeholder event: nothing more is delivered.
        recorder.log = []
        recorder.reaction = { event in
            if case .placeholder = event { slot.reset() }
        }
        slot.load(ImageRequest(path: first))
        await waitUntil("the load is cancelled") { gate.waiting == 0 && pipeline.inFlight.tablesAreEmpty }
        gate.open()
        await waitUntil("nothing is left in flight") { pipeline.inFlight.isIdle }
        for _ in 0..<5 { await Task.yield() }
        XCTAssertEqual(recorder.log, ["a placeholder first.png"])
        XCTAssertNil(slot.request)
    }

    @MainActor
    func testASlotHandlerCanCancelResetAndLoadAnotherSlot() async throws {
        let folder = try ImageFolder()
        let one = try folder.png("one", width: 40, height: 30)
        let two = try folder.png("two", width: 30, height: 30)
        let three = try folder.png("three", width: 20, height: 30)
        let gate = GatedLoader(holds: { $0.filePath?.hasSuffix("two.png") == true })
        let pipeline = ImagePipeline.testing(loader: gate)
        let slotA = ImageSlot(pipeline: pipeline)
        let slotB = ImageSlot(pipeline: pipeline)
        let recorder = Recorder()
        recorder.attach(to: slotA, as: "a")
        let recorderB = Recorder()
        recorderB.attach(to: slotB, as: "b")

        slotB.load(ImageRequest(path: two))
        await waitUntil("b's load waits at the gate") { gate.waiting == 1 }
        // a's image event resets b and makes b load something else.
        recorder.reaction = { event in
            guard case .image = event else { return }
            slotB.reset()
            slotB.load(ImageRequest(path: three))
        }
        slotA.load(ImageRequest(path: one))
        await waitUntil("b shows three") { recorderB.log.last == "b image three.png" }
        XCTAssertEqual(recorder.log, ["a placeholder one.png", "a image one.png"])
        XCTAssertEqual(recorderB.log, ["b placeholder two.png", "b placeholder three.png", "b image three.png"])
        await waitUntil("b's first load is cancelled") { gate.cancelledWaits == 1 }
        await waitUntil("nothing is left in flight") { pipeline.inFlight.isIdle }
    }
}
