import Foundation
import VipsLoad

/// `coalesce`: many concurrent identical requests must cost one decode.
public enum CoalesceScenario {
    public static func run(
        _ classes: [CorpusClass], settings: BenchmarkSettings,
        progress: @escaping @Sendable (String) -> Void
    ) async -> ScenarioReport {
        var report = ScenarioReport(scenario: "coalesce")
        guard let file = classes.first(where: { !$0.files.isEmpty })?.files.first else { return report }
        progress("coalesce: \(settings.coalesceRequests) identical requests")
        let pipeline = ImagePipeline(configuration: .init(decodeConcurrency: settings.concurrency))
        let request = ImageRequest(path: file.path, size: .maxPixelSize(settings.size))
        let start = ProcessStats.now
        let failures = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<settings.coalesceRequests {
                group.addTask { (try? await pipeline.image(for: request)) == nil ? 1 : 0 }
            }
            return await group.reduce(0, +)
        }
        let seconds = ProcessStats.now - start
        let metrics = pipeline.metrics
        report.summary = [
            ("requests", .int(settings.coalesceRequests)),
            ("decodes", .int(metrics.decodesStarted)),
            ("coalesced", .int(metrics.coalesced)),
            ("memoryHits", .int(metrics.memoryHits)),
            ("failures", .int(failures)),
            ("milliseconds", .number(seconds * 1000, digits: 1)),
            ("file", .text(file.lastPathComponent))
        ]
        return report
    }
}
