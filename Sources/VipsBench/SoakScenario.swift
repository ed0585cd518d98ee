import Foundation
import Synchronization
import VipsCore
import VipsLoad
import VipsSynthesis

/// `soak`: many mixed requests over minutes — memory hits, misses, cancels,
/// failures, progressive ladders and batches — checking that memory stays
/// flat after warm-up, no task is leaked and the memory cache stays within
/// its limit. Not part of the default run (it takes minutes); `--scenario soak`.
public enum SoakScenario {
    /// The memory cache bound, small enough to churn all the time.
    static let memoryCacheLimit = 32 << 20

    public static func run(
        _ classes: [CorpusClass], settings: BenchmarkSettings,
        progress: @escaping @Sendable (String) -> Void
    ) async -> ScenarioReport {
        var report = ScenarioReport(scenario: "soak")
        // Small and medium files keep a few minutes' worth of requests mostly about the pipeline.
        let good =
            classes.filter { $0.name != "jpeg-large" }.flatMap(\.files)
            + (classes.first { $0.name == "jpeg-large" }?.files.prefix(2) ?? [])
        guard !good.isEmpty else { return report }
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(
            "vipsload-soak-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        guard let bad = try? badInputs(in: scratch) else {
            report.notes.append("cannot write the failing inputs")
            return report
        }
        let cache = MemoryCache(costLimit: memoryCacheLimit)
        let pipeline = ImagePipeline(configuration: .init(decodeConcurrency: settings.concurrency, memoryCache: cache))
        let total = settings.soakRequests
        let window = 64
        let sizes = [24, 32, 48, 64, 96, 128, 160, 200, 256]
        let counts = SoakCounts()
        var samples: [(Int, Int)] = [] // (requests done, RSS)
        var cacheOverLimit = 0
        var random = SplitMix64(seed: 2026)
        var issued = 0
        let start = ProcessStats.now
        ProcessStats.resetPeakRSS()
        await withTaskGroup(of: Void.self) { group in
            while issued < total || !group.isEmpty {
                while issued < total && issued - counts.done < window {
                    let roll = random.next() % 100
                    let file = good[Int(random.next() % UInt64(good.count))]
                    let size = sizes[Int(random.next() % UInt64(sizes.count))]
                    let priority = ImageRequest.Priority.allCases[Int(random.next() % 5)]
                    let request = ImageRequest(path: file.path, size: .maxPixelSize(size), priority: priority)
                    let delay = UInt64(random.next() % 3_000_000)
                    issued += 1
                    group.addTask {
                        switch roll {
                        case 0..<60: // plain request: a hit, a join or a decode
                            do { _ = try await pipeline.image(for: request); counts.record(.succeeded) } catch {
                                counts.record(.failed)
                            }
                        case 60..<75: // started, then cancelled after up to 3 ms
                            let task = pipeline.imageTask(with: request)
                            try? await Task.sleep(nanoseconds: delay)
                            task.cancel()
                            do throws(VipsError) {
                                _ = try await task.image
                                counts.record(.succeeded)
                            } catch  where error.kind == .cancelled {
                                counts.record(.cancelled)
                            } catch {
                                counts.record(.failed)
                            }
                        case 75..<85: // a failing input: must fail, typed
                            let failing = ImageRequest(
                                path: bad[Int(delay % UInt64(bad.count))].path, size: .maxPixelSize(size))
                            do {
                                _ = try await pipeline.image(for: failing);
                                counts.record(.unexpected, "\(failing.source) decoded")
                            } catch is VipsError {
                                counts.record(.failed)
                            } catch { counts.record(.unexpected, "\(failing.source): \(type(of: error)) \(error)") }
                        case 85..<95: // a progressive ladder
                            let ladder = Set([32, 96, size]).sorted().map {
                                ImageRequest(path: file.path, size: .maxPixelSize($0))
                            }
                            do {
                                var last = 0
                                for try await step in pipeline.progressiveImages(for: ladder) {
                                    if step.bitmap.width < last {
                                        counts.record(.unexpected, "ladder shrank \(last) → \(step.bitmap.width)")
                                    }
                                    last = step.bitmap.width
                                }
                                counts.record(.succeeded)
                            } catch { counts.record(.failed) }
                        default: // a small batch, abandoned half-way now and then
                            let batch = (0..<4).map {
                                ImageRequest(path: good[(Int(delay) + $0) % good.count].path, size: .maxPixelSize(size))
                            }
                            var seen = 0
                            for await _ in pipeline.images(for: batch) {
                                seen += 1
                                if delay % 2 == 0 && seen == 2 { break }
                            }
                            counts.record(.succeeded)
                        }
                        counts.finish()
                    }
                }
                await group.next()
                if cache.totalCost > cache.costLimit { cacheOverLimit += 1 }
                let done = counts.done
                if samples.count < 11 && done >= samples.count * total / 10 {
                    samples.append((done, ProcessStats.currentRSS))
                    progress("soak: \(done)/\(total)")
                }
            }
        }
        let seconds = ProcessStats.now - start
        // Decodes whose callers all left may still be finishing on their threads.
        let deadline = ProcessStats.now + 30
        while !pipeline.inFlight.isIdle && ProcessStats.now < deadline {
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        let inFlight = pipeline.inFlight
        let metrics = pipeline.metrics
        func rss(_ index: Int) -> ScenarioReport.Value {
            samples.indices.contains(index) ? .number(Double(samples[index].1) / 1_048_576, digits: 0) : .text("-")
        }
        report.summary = [
            ("requests", .int(total)),
            ("seconds", .number(seconds, digits: 1)),
            ("requestsPerSecond", .number(Double(total) / seconds, digits: 0)),
            ("succeeded", .int(counts.succeeded)),
            ("cancelled", .int(counts.cancelled)),
            ("failed", .int(counts.failed)),
            ("unexpected", .int(counts.unexpected)),
            ("memoryHits", .int(metrics.memoryHits)),
            ("decodes", .int(metrics.decodesStarted)),
            ("rssAfterWarmupMB", rss(1)),
            ("rssMiddleMB", rss(5)),
            ("rssEndMB", rss(10)),
            ("peakRSSMB", .number(Double(ProcessStats.peakRSS) / 1_048_576, digits: 0)),
            ("memoryCacheMB", .number(Double(cache.totalCost) / 1_048_576, digits: 1)),
            ("memoryCacheLimitMB", .int(memoryCacheLimit >> 20)),
            ("cacheOverLimitSamples", .int(cacheOverLimit)),
            ("leakedTasks", .int(inFlight.tasks)),
            ("idleAfterwards", .text(inFlight.isIdle ? "yes" : "no: \(inFlight)"))
        ]
        if let detail = counts.unexpectedDetail { report.notes.append("first unexpected outcome: \(detail)") }
        return report
    }

    /// Inputs that must fail: corrupt, truncated, empty, not an image, missing.
    static func badInputs(in folder: URL) throws -> [URL] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let jpeg = try ImageSynthesizer.data(width: 64, height: 48, format: .jpeg())
        let files: [(String, Data)] = [
            ("empty.jpg", Data()),
            ("text.png", Data("<html>not an image</html>".utf8)),
            ("junk.jpg", Data([0xFF, 0xD8, 0xFF]) + Data(repeating: 0x5A, count: 300)),
            ("header-only.jpg", jpeg.prefix(20))
        ]
        var urls = try files.map { name, data -> URL in
            let url = folder.appendingPathComponent(name)
            try data.write(to: url)
            return url
        }
        urls.append(folder.appendingPathComponent("missing.jpg"))
        return urls
    }
}

/// Outcome counters shared by the soak's tasks.
final class SoakCounts: Sendable {
    enum Outcome { case succeeded, cancelled, failed, unexpected }

    private let finished = Atomic<Int>(0)
    private let outcomes = LockedState<[Outcome: Int]>([:])

    private let firstUnexpected = LockedState<String?>(nil)

    func record(_ outcome: Outcome, _ detail: String = "") {
        outcomes.withLock { $0[outcome, default: 0] += 1 }
        if outcome == .unexpected { firstUnexpected.withLock { if $0 == nil { $0 = detail } } }
    }

    /// What the first unexpected outcome was.
    var unexpectedDetail: String? { firstUnexpected.withLock { $0 } }
    func finish() { finished.add(1, ordering: .relaxed) }

    var done: Int { finished.load(ordering: .relaxed) }
    var succeeded: Int { count(.succeeded) }
    var cancelled: Int { count(.cancelled) }
    var failed: Int { count(.failed) }
    var unexpected: Int { count(.unexpected) }

    private func count(_ outcome: Outcome) -> Int { outcomes.withLock { $0[outcome, default: 0] } }
}
