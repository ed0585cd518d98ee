import Foundation
import VipsBench
import VipsCore

/// `vipsload bench`: the benchmark scenarios over a folder or the built-in corpus.
enum BenchCommand {
    static let usage = """
        usage: vipsload bench [DIR] [--size N] [--concurrency N] [--repeat R] [--scenario NAME]
                              [--compare] [--json]

        Measures VipsLoad on every image in DIR (recursively), or on the built-in
        corpus, generated once into the cache folder (see 'vipsload corpus').

        scenarios (all by default, in this order):
          throughput   every file to a thumbnail through the pipeline, memory cache
                       bypassed, per format class: images/s, input MB/s, latency
                       p50/p95/p99, CPU use, peak RSS
          warm         the same requests from the memory cache: hits/s through
                       image(for:) from the main actor and from a pool of tasks
          coalesce     500 concurrent identical requests: decodes (1) and time
          scroll       cells rebinding through a long list at 120 rows/s: images
                       shown, decodes, decodes wasted, stale deliveries (0),
                       time-to-visible p50/p95
          scale        throughput at 1x, 4x and 16x the corpus under distinct keys:
                       images/s and peak RSS per step
          soak         (only when named) --soak-requests mixed requests: hits, misses,
                       cancels, failures, ladders, batches; RSS at start, middle, end;
                       leaked tasks (0); memory cache within its limit

          --size N           thumbnail box in pixels (default 256)
          --concurrency N    decodes at once (default: the number of cores)
          --repeat R         repeats of each timed measurement, medians reported (default 3)
          --scenario NAME    run only this scenario (or a comma-separated list)
          --soak-requests N  requests in the soak scenario (default 100000)
          --compare          also run vipsthumbnail (libvips-tools, installed if missing)
                             on the same files in the same run and print the ratio
          --json             one JSON object per scenario on stdout (fields in the README)
        """

    static func run(_ arguments: [String]) async throws(ArgumentParser.UsageError) -> Int32 {
        let parser = ArgumentParser(valueOptions: ["size", "concurrency", "repeat", "scenario", "soak-requests"], flagOptions: ["compare", "json"])
        let parsed = try parser.parse(arguments)
        if parsed.help { Terminal.out(usage); return 0 }
        guard parsed.positional.count <= 1 else { throw ArgumentParser.UsageError(description: "at most one DIR") }
        var settings = BenchmarkSettings()
        settings.size = try parsed.int("size", default: settings.size, in: 1...8192)
        settings.concurrency = try parsed.int("concurrency", default: settings.concurrency, in: 1...256)
        settings.repeats = try parsed.int("repeat", default: settings.repeats, in: 1...100)
        settings.compare = parsed.flag("compare")
        settings.soakRequests = try parsed.int("soak-requests", default: settings.soakRequests, in: 1...100_000_000)
        if let names = parsed.value("scenario") {
            settings.scenarios = []
            for name in names.split(separator: ",") {
                guard let scenario = BenchmarkSettings.Scenario(rawValue: String(name)) else {
                    let all = BenchmarkSettings.Scenario.allCases.map(\.rawValue).joined(separator: ", ")
                    throw ArgumentParser.UsageError(description: "--scenario takes one of \(all), not '\(name)'")
                }
                settings.scenarios.append(scenario)
            }
        }
        let json = parsed.flag("json")

        let classes: [CorpusClass]
        if let folder = parsed.positional.first {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory), isDirectory.boolValue else {
                Terminal.err("vipsload bench: \(folder) is not a folder")
                return 1
            }
            classes = CorpusClass.classes(in: URL(fileURLWithPath: folder))
        } else {
            do {
                classes = try BenchmarkSuite.defaultClasses { done, total in Terminal.progress("corpus: generated \(done)/\(total)") }
            } catch {
                Terminal.endProgress()
                Terminal.err("vipsload bench: cannot prepare the corpus: \(error)")
                return 1
            }
        }
        guard classes.contains(where: { !$0.files.isEmpty }) else {
            Terminal.err("vipsload bench: no images found")
            return 1
        }
        if !json {
            let summary = classes.map { "\($0.name) \($0.files.count)" }.joined(separator: ", ")
            Terminal.out("vipsload bench: \(summary); size \(settings.size), concurrency \(settings.concurrency), "
                         + "\(ProcessInfo.processInfo.activeProcessorCount) cores, libvips \(VipsRuntime.libraryVersion)")
        }
        await BenchmarkSuite.run(classes, settings: settings, progress: { Terminal.progress($0) }) { report in
            Terminal.endProgress()
            Terminal.out(json ? report.json : report.table + "\n")
        }
        let peak = Double(ProcessStats.peakRSSSinceStart) / 1_048_576
        if json {
            Terminal.out("{\"scenario\": \"process\", \"peakRSSMB\": \(String(format: "%.0f", peak))}")
        } else {
            Terminal.out(String(format: "process peak RSS %.0f MB", peak))
        }
        return 0
    }
}
