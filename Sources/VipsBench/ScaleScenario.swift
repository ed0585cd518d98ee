import Foundation
import VipsLoad

/// `scale`: throughput at 1×, 4×, 16× the corpus, each copy under its own key
/// (symbolic links), with a bounded memory cache that keeps churning:
/// images/s should stay flat and peak RSS bounded.
public enum ScaleScenario {
    /// The memory cache bound used here, small enough to be exceeded many times.
    static let memoryCacheLimit = 64 << 20

    public static func run(
        _ classes: [CorpusClass], settings: BenchmarkSettings,
        progress: @escaping @Sendable (String) -> Void
    ) async -> ScenarioReport {
        var report = ScenarioReport(scenario: "scale")
        let files = classes.flatMap(\.files)
        guard !files.isEmpty else { return report }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "vipsload-scale-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        for step in settings.scaleSteps where step > 0 {
            progress("scale: \(step)× (\(files.count * step) images)")
            guard
                let links = try? SymlinkCopies.make(files, copies: step, in: folder.appendingPathComponent("x\(step)"))
            else {
                report.notes.append("cannot create links for step \(step)×")
                continue
            }
            let cache = MemoryCache(costLimit: memoryCacheLimit)
            let pipeline = ImagePipeline(
                configuration: .init(decodeConcurrency: settings.concurrency, memoryCache: cache))
            let requests = links.map { ImageRequest(path: $0.path, size: .maxPixelSize(settings.size)) }
            ProcessStats.resetPeakRSS()
            let start = ProcessStats.now
            let result = await ClosedLoop.run(requests, workers: settings.concurrency) {
                _ = try await pipeline.image(for: $0)
            }
            let seconds = ProcessStats.now - start
            report.rows.append([
                ("step", .text("\(step)x")),
                ("images", .int(requests.count)),
                ("imagesPerSecond", .number(Double(requests.count) / seconds, digits: 1)),
                ("p95Ms", .number(LatencyStatistics(result.latencies).p95 * 1000, digits: 1)),
                ("peakRSSMB", .number(Double(ProcessStats.peakRSS) / 1_048_576, digits: 0)),
                ("cacheMB", .number(Double(cache.totalCost) / 1_048_576, digits: 1)),
                ("decodes", .int(pipeline.metrics.decodesStarted)),
                ("failures", .int(result.failures))
            ])
            try? FileManager.default.removeItem(at: folder.appendingPathComponent("x\(step)"))
        }
        report.summary = [("memoryCacheLimitMB", .int(memoryCacheLimit >> 20))]
        return report
    }
}

/// Distinct paths for the same files: `copies` symbolic links to each.
enum SymlinkCopies {
    static func make(_ files: [URL], copies: Int, in folder: URL) throws -> [URL] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var links: [URL] = []
        for copy in 0..<copies {
            for (index, file) in files.enumerated() {
                let link = folder.appendingPathComponent("\(copy)-\(index)-\(file.lastPathComponent)")
                try FileManager.default.createSymbolicLink(at: link, withDestinationURL: file)
                links.append(link)
            }
        }
        return links
    }
}
