import Foundation
import VipsCore
import VipsLoad

/// `throughput`: every file decoded to a thumbnail through the pipeline, the
/// memory cache bypassed, per format class. Closed loop: `concurrency`
/// workers each keep one request in flight, so latency is service time.
public enum ThroughputScenario {
    /// One class's figures.
    public struct Measurement: Sendable {
        public let imagesPerSecond: Double
        public let megabytesPerSecond: Double
        public let latency: LatencyStatistics
        public let cpuPercent: Double
        public let peakRSS: Int
        public let failures: Int
    }

    public static func run(
        _ classes: [CorpusClass], settings: BenchmarkSettings,
        progress: @escaping @Sendable (String) -> Void
    ) async -> ScenarioReport {
        var report = ScenarioReport(scenario: "throughput")
        ProcessStats.resetPeakRSS()
        var totalImages = 0, totalSeconds = 0.0, scenarioPeak = 0
        for corpusClass in classes where !corpusClass.files.isEmpty {
            progress("throughput: \(corpusClass.name)")
            let measurement = await measure(corpusClass, settings: settings)
            totalImages += corpusClass.files.count
            scenarioPeak = max(scenarioPeak, measurement.peakRSS)
            totalSeconds += Double(corpusClass.files.count) / max(measurement.imagesPerSecond, 1e-9)
            var row: ScenarioReport.Fields = [
                ("class", .text(corpusClass.name)),
                ("images", .int(corpusClass.files.count)),
                ("imagesPerSecond", .number(measurement.imagesPerSecond, digits: 1)),
                ("inputMBPerSecond", .number(measurement.megabytesPerSecond, digits: 1)),
                ("p50Ms", .number(measurement.latency.p50 * 1000, digits: 1)),
                ("p95Ms", .number(measurement.latency.p95 * 1000, digits: 1)),
                ("p99Ms", .number(measurement.latency.p99 * 1000, digits: 1)),
                ("cpuPercent", .number(measurement.cpuPercent, digits: 0)),
                ("peakRSSMB", .number(Double(measurement.peakRSS) / 1_048_576, digits: 0)),
                ("failures", .int(measurement.failures))
            ]
            if settings.compare {
                // Like for like: vipsthumbnail decodes, encodes a JPEG and writes it, so VipsLoad
                // does the same here (ImageEncoder, quality 75 as vipsthumbnail's default).
                progress("throughput: \(corpusClass.name) (VipsLoad with JPEG encode + write)")
                let written = await measure(corpusClass, settings: settings, writingJPEG: true)
                progress("throughput: \(corpusClass.name) (vipsthumbnail)")
                if let peer = VipsthumbnailPeer.measure(
                    corpusClass.files, size: settings.size, repeats: settings.repeats)
                {
                    row += [
                        ("writtenImagesPerSecond", .number(written.imagesPerSecond, digits: 1)),
                        ("writtenPeakRSSMB", .number(Double(written.peakRSS) / 1_048_576, digits: 0)),
                        ("vipsthumbnailImagesPerSecond", .number(peer.imagesPerSecond, digits: 1)),
                        ("vipsthumbnailPeakRSSMB", .number(Double(peer.peakRSS) / 1_048_576, digits: 0)),
                        ("ratio", .number(written.imagesPerSecond / peer.imagesPerSecond, digits: 2))
                    ]
                } else {
                    report.notes.append("vipsthumbnail is not available: no comparison for \(corpusClass.name)")
                }
            }
            report.rows.append(row)
        }
        report.summary = [
            ("size", .int(settings.size)),
            ("concurrency", .int(settings.concurrency)),
            ("repeats", .int(settings.repeats)),
            ("imagesPerSecond", .number(totalSeconds > 0 ? Double(totalImages) / totalSeconds : 0, digits: 1)),
            ("peakRSSMB", .number(Double(scenarioPeak) / 1_048_576, digits: 0))
        ]
        if settings.compare {
            report.notes.append(
                "ratio = VipsLoad images/s ÷ vipsthumbnail images/s, both measured in this run and both "
                    + "decoding, encoding a JPEG (quality 75) and writing it (writtenImagesPerSecond); "
                    + "imagesPerSecond is VipsLoad's decode to a bitmap alone")
        }
        return report
    }

    /// Median over `settings.repeats` runs of one class; latencies pooled.
    /// With `writingJPEG`, each bitmap is also encoded as a quality-75 JPEG and written to a
    /// temporary folder (removed afterwards), as a thumbnailer does.
    static func measure(
        _ corpusClass: CorpusClass, settings: BenchmarkSettings, writingJPEG: Bool = false
    ) async -> Measurement {
        var rates: [Double] = [], cpu: [Double] = [], latencies: [Double] = []
        var failures = 0, seconds: [Double] = []
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "vipsload-bench-\(UUID().uuidString)")
        if writingJPEG { try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
        defer { if writingJPEG { try? FileManager.default.removeItem(at: folder) } }
        ProcessStats.resetPeakRSS()
        for _ in 0..<settings.repeats {
            let pipeline = ImagePipeline(
                configuration: .init(decodeConcurrency: settings.concurrency, memoryCache: nil))
            let requests = corpusClass.files.map {
                ImageRequest(path: $0.path, size: .maxPixelSize(settings.size), options: .disableMemoryCache)
            }
            let cpuStart = ProcessStats.cpuSeconds, start = ProcessStats.now
            let result = await ClosedLoop.run(requests, workers: settings.concurrency) { request in
                let bitmap = try await pipeline.image(for: request)
                guard writingJPEG, let path = request.source.filePath else { return }
                let data = try ImageEncoder().encode(bitmap, as: .jpeg(quality: 75)).data
                let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent + ".jpg"
                try data.write(to: folder.appendingPathComponent(name))
            }
            let wall = ProcessStats.now - start
            seconds.append(wall)
            rates.append(Double(requests.count) / wall)
            cpu.append((ProcessStats.cpuSeconds - cpuStart) / wall * 100)
            latencies += result.latencies
            failures = max(failures, result.failures)
        }
        let rate = LatencyStatistics.median(rates)
        return Measurement(
            imagesPerSecond: rate,
            megabytesPerSecond: Double(corpusClass.bytes) / 1_048_576 / LatencyStatistics.median(seconds),
            latency: LatencyStatistics(latencies), cpuPercent: LatencyStatistics.median(cpu),
            peakRSS: ProcessStats.peakRSS, failures: failures)
    }
}

/// Runs items through `workers` concurrent workers, each doing one at a time.
enum ClosedLoop {
    struct Result {
        var latencies: [Double] = []
        var failures = 0
    }

    static func run<Item: Sendable>(
        _ items: [Item], workers: Int,
        _ body: @escaping @Sendable (Item) async throws -> Void
    ) async -> Result {
        let next = Counter()
        return await withTaskGroup(of: Result.self) { group in
            for _ in 0..<max(1, min(workers, items.count)) {
                group.addTask {
                    var local = Result()
                    while true {
                        let index = next.increment() - 1
                        guard index < items.count else { return local }
                        let start = ProcessStats.now
                        do { try await body(items[index]) } catch { local.failures += 1 }
                        local.latencies.append(ProcessStats.now - start)
                    }
                }
            }
            var total = Result()
            for await partial in group {
                total.latencies += partial.latencies
                total.failures += partial.failures
            }
            return total
        }
    }
}
