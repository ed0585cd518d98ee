import Foundation
import VipsLoad

/// `rerun`: a gallery indexer run twice over the same files with a disk
/// cache and `DataCachePolicy.automatic`: the first pass decodes every file
/// and stores its thumbnail, the second (a new pipeline on the same cache
/// folder, as a new process would be) serves the stored thumbnails.
///
/// The cache folder is `vipsload-bench-rerun` in the system's temporary
/// folder, emptied before the first pass and removed after the second; a run
/// killed in between leaves it for the next run to empty.
public enum RerunScenario {
    public static func run(
        _ classes: [CorpusClass], settings: BenchmarkSettings,
        progress: @escaping @Sendable (String) -> Void
    ) async -> ScenarioReport {
        var report = ScenarioReport(scenario: "rerun")
        let files = classes.flatMap(\.files)
        guard !files.isEmpty else { return report }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "vipsload-bench-rerun", isDirectory: true)
        try? FileManager.default.removeItem(at: folder)
        defer { try? FileManager.default.removeItem(at: folder) }
        let requests = files.map { ImageRequest(path: $0.path, size: .maxPixelSize(settings.size)) }
        var summary: ScenarioReport.Fields = [("images", .int(files.count)), ("size", .int(settings.size))]
        for pass in ["first", "second"] {
            progress("rerun: \(pass) pass")
            let cache: DiskCache
            do throws(VipsError) {
                cache = try DiskCache(directory: folder, sizeLimit: 4 << 30)
            } catch {
                report.notes.append("no disk cache in \(folder.path): \(error.message)")
                return report
            }
            var configuration = ImagePipeline.Configuration(
                decodeConcurrency: settings.concurrency, memoryCache: nil,
                dataCache: cache)
            configuration.dataCachePolicy = .automatic
            let pipeline = ImagePipeline(configuration: configuration)
            let start = ProcessStats.now
            let result = await ClosedLoop.run(requests, workers: settings.concurrency) { request in
                _ = try await pipeline.image(for: request)
            }
            let seconds = ProcessStats.now - start
            let metrics = pipeline.metrics
            summary += [
                ("\(pass)ImagesPerSecond", .number(Double(files.count) / max(seconds, 1e-9), digits: 1)),
                ("\(pass)Decodes", .int(metrics.decodesStarted)),
                ("\(pass)DiskHits", .int(metrics.diskHits)),
                ("\(pass)Failures", .int(result.failures))
            ]
        }
        report.summary = summary
        report.notes.append(
            "second pass: a new pipeline on the first pass's cache folder (stored lossless PNG thumbnails)")
        return report
    }
}
