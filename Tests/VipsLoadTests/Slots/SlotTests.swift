import Foundation
import XCTest

@testable import VipsLoad

/// ImageSlot: the image view / table cell stand-in.
final class SlotTests: XCTestCase {
    /// What one slot was told, as strings easy to compare.
    @MainActor
    private final class Events {
        var log: [String] = []
        var onMainThread = true

        func attach(to slot: ImageSlot) {
            slot.onEvent = { [unowned self] event in
                if !Thread.isMainThread { onMainThread = false }
                switch event {
                case .placeholder(let bitmap, let request):
                    log.append("placeholder \(bitmap?.width ?? 0) \(request.source.key.split(separator: "/").last!)")
                case .image(let bitmap, let request, let fromMemoryCache):
                    log.append(
                        "image \(bitmap.width) \(request.source.key.split(separator: "/").last!)\(fromMemoryCache ? " memory" : "")"
                    )
                case .preview(let bitmap, let request):
                    log.append("preview \(bitmap.width) \(request.source.key.split(separator: "/").last!)")
                case .failure(let error, let request):
                    log.append("failure \(error.kind.rawValue) \(request.source.key.split(separator: "/").last!)")
                }
            }
        }
    }

    @MainActor
    func testMemoryHitIsDeliveredSynchronouslyInsideLoad() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("a", width: 50, height: 40)
        let pipeline = ImagePipeline.testing()
        let request = ImageRequest(path: path)
        _ = try await pipeline.image(for: request)

        let slot = ImageSlot(pipeline: pipeline)
        let events = Events()
        events.attach(to: slot)
        slot.load(request)
        // No await between load and this line: the hit arrived synchronously.
        XCTAssertEqual(events.log, ["image 50 a.png memory"])
        XCTAssertEqual(slot.bitmap?.width, 50)
        XCTAssertEqual(slot.request, request)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1)
    }

    @MainActor
    func testPlaceholderFirstThenTheImageOnTheMainActor() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("a", width: 50, height: 40)
        let gate = GatedLoader()
        let pipeline = ImagePipeline.testing(loader: gate)
        let slot = ImageSlot(pipeline: pipeline)
        slot.placeholder = try Bitmap(width: 2, height: 2, channels: 3, pixels: [UInt8](repeating: 128, count: 12))
        let events = Events()
        events.attach(to: slot)

        slot.load(ImageRequest(path: path))
        XCTAssertEqual(events.log, ["placeholder 2 a.png"])
        XCTAssertEqual(slot.bitmap?.width, 2)
        gate.open()
        await waitUntil("the image arrives") { events.log.count == 2 }
        XCTAssertEqual(events.log, ["placeholder 2 a.png", "image 50 a.png"])
        XCTAssertEqual(slot.bitmap?.width, 50)
        XCTAssertTrue(events.onMainThread)
    }

    @MainActor
    func testLoadingAgainCancelsThePreviousRequest() async throws {
        let folder = try ImageFolder()
        let first = try folder.png("first", width: 30, height: 30)
        let second = try folder.png("second", width: 60, height: 30)
        let gate = GatedLoader()
        let pipeline = ImagePipeline.testing(loader: gate)
        let slot = ImageSlot(pipeline: pipeline)
        let events = Events()
        events.attach(to: slot)

        slot.load(ImageRequest(path: first))
        slot.load(ImageRequest(path: second))
        gate.open()
        await waitUntil("the second image arrives") { slot.bitmap?.width == 60 }
        XCTAssertEqual(events.log, ["placeholder 0 first.png", "placeholder 0 second.png", "image 60 second.png"])
        XCTAssertEqual(pipeline.metrics.cancelled, 1)
        XCTAssertEqual(pipeline.metrics.decodesStarted, 1, "the abandoned request never decodes")

        // Failures are reported for the current request; reset cancels and clears.
        slot.load(ImageRequest(path: folder.path + "/missing.png"))
        await waitUntil("the failure arrives") { events.log.count == 5 }
        XCTAssertEqual(events.log.last, "failure fileNotFound missing.png")
        let held = GatedLoader()
        let pipeline2 = ImagePipeline.testing(loader: held)
        let slot2 = ImageSlot(pipeline: pipeline2)
        slot2.load(ImageRequest(path: first))
        await waitUntil("the load waits") { held.waiting == 1 }
        slot2.reset()
        XCTAssertNil(slot2.request)
        XCTAssertNil(slot2.bitmap)
        await waitUntil("the load is cancelled") { held.cancelledWaits == 1 }
        XCTAssertTrue(pipeline2.inFlight.tablesAreEmpty)
    }

    /// A slot owned by an actor other than the main actor gets its results there.
    private actor Gallery {
        let slot: ImageSlot
        var widths: [Int] = []

        init(pipeline: ImagePipeline) {
            slot = ImageSlot(pipeline: pipeline)
        }

        func show(_ request: ImageRequest) {
            slot.onEvent = { [unowned self] event in
                // Runs isolated to this actor: touching its state needs no hop.
                if case .image(let bitmap, _, _) = event { self.widths.append(bitmap.width) }
            }
            slot.load(request)
        }
    }

    func testSlotOwnedByAnotherActorDeliversOnThatActor() async throws {
        let folder = try ImageFolder()
        let path = try folder.png("a", width: 44, height: 40)
        let pipeline = ImagePipeline.testing()
        let gallery = Gallery(pipeline: pipeline)
        await gallery.show(ImageRequest(path: path))
        let deadline = Date().addingTimeInterval(30)
        while await gallery.widths.isEmpty, Date() < deadline { try await Task.sleep(for: .milliseconds(1)) }
        let widths = await gallery.widths
        XCTAssertEqual(widths, [44])
    }

    /// The test's own record of a scrolling table, to judge every delivery.
    @MainActor
    private final class Table {
        var current: [ImageRequest?]
        var violations: [String] = []
        var decodedDeliveries = 0
        var memoryDeliveries = 0
        let widths: [String: Int]

        init(slots: Int, widths: [String: Int]) {
            current = Array(repeating: nil, count: slots)
            self.widths = widths
        }

        func attach(_ slot: ImageSlot, index: Int) {
            slot.onEvent = { [unowned self] event in
                switch event {
                case .placeholder(_, let request):
                    if request != current[index] { violations.append("slot \(index): placeholder for a stale request") }
                case .image(let bitmap, let request, let fromMemoryCache):
                    if request != current[index] {
                        violations.append("slot \(index): image for a request it moved on from")
                    }
                    if bitmap.width != widths[request.source.key] {
                        violations.append("slot \(index): wrong image for \(request)")
                    }
                    if fromMemoryCache { memoryDeliveries += 1 } else { decodedDeliveries += 1 }
                case .preview(_, let request):
                    if request != current[index] { violations.append("slot \(index): preview for a stale request") }
                case .failure(let error, let request):
                    violations.append("slot \(index): \(request) failed: \(error)")
                }
            }
        }
    }

    @MainActor
    func testScrollingTableEndsWithEverySlotShowingItsLastRequest() async throws {
        let folder = try ImageFolder()
        // 200 images, each a different width, so a bitmap tells which image it is.
        let paths = try (0..<200).map { try folder.png("row\($0)", width: 24 + $0, height: 12, seed: $0) }
        let widths = Dictionary(uniqueKeysWithValues: paths.enumerated().map { ("file:" + $1, 24 + $0) })
        let pipeline = ImagePipeline.testing(decodeConcurrency: 2)
        let slots = (0..<20).map { _ in ImageSlot(pipeline: pipeline) }
        let table = Table(slots: 20, widths: widths)
        for (index, slot) in slots.enumerated() {
            slot.placeholder = try Bitmap(width: 1, height: 1, channels: 3, pixels: [128, 128, 128])
            table.attach(slot, index: index)
        }

        // 500 rows flow past 20 reused slots: a fling (the first 100 rows within
        // one frame, so slots move on before their loads can finish, however
        // fast the decoder), frames of three rows, pauses, and images coming round again.
        for row in 0..<500 {
            let index = row % 20
            let request = ImageRequest(path: paths[(row * 7) % 200])
            table.current[index] = request
            slots[index].load(request)
            if row >= 100, row % 3 == 2 { await Task.yield() } // a frame
            if row % 100 == 99 { try await Task.sleep(for: .milliseconds(5)) } // the finger pauses
        }
        await waitUntil("every slot shows its last request's image") {
            slots.indices.allSatisfy { slots[$0].bitmap?.width == widths[table.current[$0]!.source.key] }
        }

        XCTAssertEqual(table.violations, [])
        for (index, slot) in slots.enumerated() {
            XCTAssertEqual(slot.request, table.current[index])
            XCTAssertEqual(slot.bitmap?.width, widths[table.current[index]!.source.key])
        }
        await waitUntil("decodes of rows scrolled past have returned") { pipeline.inFlight.isIdle }
        let metrics = pipeline.metrics
        let kept = try XCTUnwrap(pipeline.memoryCache).count
        // Each image decodes at most once: a decode still running when its row
        // scrolls away finishes into the memory cache (where a row coming back
        // finds it), so every decode is an image kept, none is thrown away.
        XCTAssertEqual(metrics.decodesStarted, kept)
        XCTAssertEqual(metrics.decodesStarted, metrics.decodesFinished)
        XCTAssertGreaterThan(metrics.cancelled, 0, "the fling must actually abandon loads")
        print(
            "scrolling table: 500 requests, 200 images, 20 slots: \(metrics.decodesStarted) decodes, "
                + "\(kept) images kept in memory, \(table.decodedDeliveries) decoded deliveries, "
                + "\(table.memoryDeliveries) memory hits delivered, \(metrics.cancelled) loads cancelled")
    }
}
