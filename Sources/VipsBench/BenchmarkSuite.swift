import Foundation
import VipsCore

/// Runs the chosen scenarios over a corpus, in order, and returns their reports.
public enum BenchmarkSuite {
    public static func run(
        _ classes: [CorpusClass], settings: BenchmarkSettings,
        progress: @escaping @Sendable (String) -> Void = { _ in },
        report: (ScenarioReport) -> Void
    ) async {
        for scenario in settings.scenarios {
            let result: ScenarioReport
            switch scenario {
            case .throughput: result = await ThroughputScenario.run(classes, settings: settings, progress: progress)
            case .warm: result = await WarmScenario.run(classes, settings: settings, progress: progress)
            case .coalesce: result = await CoalesceScenario.run(classes, settings: settings, progress: progress)
            case .scroll: result = await ScrollScenario.run(classes, settings: settings, progress: progress)
            case .scale: result = await ScaleScenario.run(classes, settings: settings, progress: progress)
            case .rerun: result = await RerunScenario.run(classes, settings: settings, progress: progress)
            case .soak: result = await SoakScenario.run(classes, settings: settings, progress: progress)
            }
            report(result)
        }
    }

    /// The built-in corpus as classes (generated on first use).
    public static func defaultClasses(
        scale: Double = 1, folder: URL = BenchmarkCorpus.defaultFolder,
        progress: (@Sendable (Int, Int) -> Void)? = nil
    ) throws -> [CorpusClass] {
        let classes = try BenchmarkCorpus(folder: folder).prepare(scale: scale, progress: progress)
            .map { CorpusClass(name: $0.0.name, files: $0.1) }
        // A first run generates the corpus in this process: its freed buffers
        // must not count towards the peaks measured next.
        VipsRuntime.releaseFreedMemory()
        return classes
    }
}
