import Foundation
import VipsLoad

/// `warm`: the throughput requests again, now all memory-cache hits, through
/// `image(for:)` — called from the main actor (as an app's UI code would) and
/// from a pool of tasks.
public enum WarmScenario {
    public static func run(
        _ classes: [CorpusClass], settings: BenchmarkSettings,
        progress: @escaping @Sendable (String) -> Void
    ) async -> ScenarioReport {
        var report = ScenarioReport(scenario: "warm")
        let pipeline = ImagePipeline(configuration: .init(decodeConcurrency: settings.concurrency))
        let requests = classes.flatMap(\.files).map { ImageRequest(path: $0.path, size: .maxPixelSize(settings.size)) }
        guard !requests.isEmpty else { return report }
        progress("warm: filling the memory cache")
        _ = await ClosedLoop.run(requests, workers: settings.concurrency) { _ = try await pipeline.image(for: $0) }
        let cached = requests.filter { pipeline.cachedImage(for: $0) != nil }
        guard !cached.isEmpty else {
            report.notes.append("no request could be cached; nothing to measure")
            return report
        }

        progress("warm: hits from the main actor")
        var mainRates: [Double] = []
        for _ in 0..<settings.repeats {
            let before = pipeline.metrics.memoryHits
            let seconds = await hitsFromMainActor(pipeline, cached, count: settings.warmHits)
            let hits = pipeline.metrics.memoryHits - before
            mainRates.append(Double(hits) / seconds)
        }

        progress("warm: hits from \(settings.concurrency) tasks")
        var poolRates: [Double] = []
        for _ in 0..<settings.repeats {
            let before = pipeline.metrics.memoryHits
            let perTask = settings.warmHits / settings.concurrency
            let start = ProcessStats.now
            await withTaskGroup(of: Void.self) { group in
                for worker in 0..<settings.concurrency {
                    group.addTask {
                        for index in 0..<perTask {
                            _ = try? await pipeline.image(for: cached[(index &+ worker &* 7) % cached.count])
                        }
                    }
                }
            }
            poolRates.append(Double(pipeline.metrics.memoryHits - before) / (ProcessStats.now - start))
        }
        let metrics = pipeline.metrics
        report.summary = [
            ("cachedImages", .int(cached.count)),
            ("hitsPerMeasurement", .int(settings.warmHits)),
            ("mainActorHitsPerSecond", .number(LatencyStatistics.median(mainRates), digits: 0)),
            ("taskPoolHitsPerSecond", .number(LatencyStatistics.median(poolRates), digits: 0)),
            ("taskPoolTasks", .int(settings.concurrency)),
            ("decodes", .int(metrics.decodesStarted))
        ]
        return report
    }

    /// Seconds taken by `count` hits requested one after another on the main actor.
    @MainActor
    static func hitsFromMainActor(_ pipeline: ImagePipeline, _ requests: [ImageRequest], count: Int) async -> Double {
        let start = ProcessStats.now
        var index = 0
        for _ in 0..<count {
            _ = try? await pipeline.image(for: requests[index])
            index += 1
            if index == requests.count { index = 0 }
        }
        return ProcessStats.now - start
    }
}
