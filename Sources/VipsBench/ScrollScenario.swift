import Foundation
import VipsLoad

/// `scroll`: a table scrolling at a set rate through a long list, its cells
/// (`ImageSlot`s) rebound as rows leave the top and enter at the bottom, on
/// the main actor as in an app. Counts what a user would see: images shown,
/// stale deliveries (a cell showing an image of a row it no longer holds:
/// must be 0), decodes spent on images never shown, time from binding a cell
/// to its image being visible.
public enum ScrollScenario {
    public static func run(
        _ classes: [CorpusClass], settings: BenchmarkSettings,
        progress: @escaping @Sendable (String) -> Void
    ) async -> ScenarioReport {
        let files = classes.flatMap(\.files)
        guard !files.isEmpty, settings.scrollSlots > 0, settings.scrollRows > 0 else {
            return ScenarioReport(scenario: "scroll")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "vipsload-scroll-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        // One distinct source per row: a link to a corpus file.
        let copies = (settings.scrollRows + files.count - 1) / files.count
        guard let links = try? SymlinkCopies.make(files, copies: copies, in: folder) else {
            return ScenarioReport(scenario: "scroll", notes: ["cannot create the row links"])
        }
        progress("scroll: \(settings.scrollRows) rows at \(Int(settings.scrollRowsPerSecond)) rows/s")
        return await scroll(rows: Array(links.prefix(settings.scrollRows)), settings: settings)
    }

    @MainActor
    static func scroll(rows: [URL], settings: BenchmarkSettings) async -> ScenarioReport {
        let pipeline = ImagePipeline(configuration: .init(decodeConcurrency: settings.concurrency))
        let requests = rows.map { ImageRequest(path: $0.path, size: .maxPixelSize(settings.size)) }
        let rowOfKey = Dictionary(
            requests.enumerated().map { ($0.element.cacheKey, $0.offset) }, uniquingKeysWith: { a, _ in a })
        let tally = Tally()
        let slots = (0..<min(settings.scrollSlots, requests.count)).map { _ in ImageSlot(pipeline: pipeline) }
        for (index, slot) in slots.enumerated() {
            slot.onEvent = { [unowned slot] event in
                guard case .image(_, let request, let fromMemoryCache) = event else { return }
                guard request.cacheKey == slot.request?.cacheKey, let row = rowOfKey[request.cacheKey] else {
                    tally.stale += 1
                    return
                }
                tally.shown += 1
                tally.shownRows.insert(row)
                if !fromMemoryCache { tally.shownFromDecode.insert(row) }
                tally.timeToVisible.append(ProcessStats.now - tally.boundAt[index])
            }
        }
        func bind(_ slotIndex: Int, row: Int) {
            tally.boundAt[slotIndex] = ProcessStats.now
            slots[slotIndex].load(requests[row])
        }
        tally.boundAt = Array(repeating: 0, count: slots.count)
        let start = ProcessStats.now
        for row in 0..<slots.count { bind(row, row: row) }
        let interval = 1 / max(1, settings.scrollRowsPerSecond)
        for row in slots.count..<requests.count {
            // Keep to the schedule even when a tick runs late.
            let due = start + Double(row - slots.count + 1) * interval
            let wait = due - ProcessStats.now
            if wait > 0 { try? await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
            bind((row - slots.count) % slots.count, row: row)
        }
        // The list stops: wait for the visible cells to show their images.
        let deadline = ProcessStats.now + 30
        while !slots.allSatisfy({ tally.isShowing($0, rowOfKey) }), ProcessStats.now < deadline {
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        let settled = slots.allSatisfy { tally.isShowing($0, rowOfKey) }
        let metrics = pipeline.metrics
        let latency = LatencyStatistics(tally.timeToVisible)
        var report = ScenarioReport(
            scenario: "scroll",
            summary: [
                ("rows", .int(requests.count)),
                ("slots", .int(slots.count)),
                ("rowsPerSecond", .number(settings.scrollRowsPerSecond, digits: 0)),
                ("imagesShown", .int(tally.shown)),
                ("distinctRowsShown", .int(tally.shownRows.count)),
                ("decodes", .int(metrics.decodesStarted)),
                ("decodesWasted", .int(max(0, metrics.decodesStarted - tally.shownFromDecode.count))),
                ("cancelled", .int(metrics.cancelled)),
                ("staleDeliveries", .int(tally.stale)),
                ("timeToVisibleP50Ms", .number(latency.p50 * 1000, digits: 1)),
                ("timeToVisibleP95Ms", .number(latency.p95 * 1000, digits: 1))
            ])
        if !settled { report.notes.append("the last visible cells did not all show their images within 30 s") }
        report.notes.append(
            "decodesWasted = decodes started − rows shown from a decode (decodes for rows scrolled past before their image arrived)"
        )
        for slot in slots { slot.reset() }
        return report
    }

    /// What the cells saw, touched only on the main actor.
    @MainActor
    final class Tally {
        var shown = 0, stale = 0
        var shownRows: Set<Int> = [], shownFromDecode: Set<Int> = []
        var timeToVisible: [Double] = []
        var boundAt: [Double] = []

        /// Whether `slot` shows its current request's image.
        func isShowing(_ slot: ImageSlot, _ rowOfKey: [ImageCacheKey: Int]) -> Bool {
            guard let request = slot.request, let row = rowOfKey[request.cacheKey] else { return true }
            return slot.bitmap != nil && shownRows.contains(row)
        }
    }
}
