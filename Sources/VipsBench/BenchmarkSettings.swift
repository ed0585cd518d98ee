import Foundation
import VipsCore

/// What a benchmark run measures and how. Every property documents its default.
public struct BenchmarkSettings: Sendable {
    /// The scenarios, in the order they run.
    public enum Scenario: String, Sendable, CaseIterable {
        case throughput, warm, coalesce, scroll, scale
        /// Two passes of a gallery indexer over one disk cache.
        case rerun
        /// Minutes of mixed requests; only when asked for by name.
        case soak

        /// What runs when no scenario is named.
        public static let standard: [Scenario] = [.throughput, .warm, .coalesce, .scroll, .scale, .rerun]
    }

    /// Thumbnail box side in pixels. Default 256.
    public var size: Int
    /// Decodes at once (the pipeline's decode concurrency, and the number of
    /// closed-loop workers). Default: the CPUs this process can use
    /// (`SystemResources.current.usableCPUs`: affinity and cgroup quota).
    public var concurrency: Int
    /// Repeats of each timed measurement; medians are reported. Default 3.
    public var repeats: Int
    /// Scenarios to run. Default `Scenario.standard` (all but `soak`).
    public var scenarios: [Scenario]
    /// Also run `vipsthumbnail` on the same files in the same run and print the ratio. Default false.
    public var compare: Bool
    /// Corpus multiples for `scale`. Default [1, 4, 16].
    public var scaleSteps: [Int]
    /// Rows per second the `scroll` scenario scrolls at. Default 120.
    public var scrollRowsPerSecond: Double
    /// Rows the `scroll` scenario scrolls through. Default 240.
    public var scrollRows: Int
    /// Slots (visible cells) in the `scroll` scenario. Default 12.
    public var scrollSlots: Int
    /// Identical requests in the `coalesce` scenario. Default 500.
    public var coalesceRequests: Int
    /// Memory-cache hits measured per `warm` measurement. Default 2,000,000.
    public var warmHits: Int
    /// Requests in the `soak` scenario. Default 100,000.
    public var soakRequests: Int

    public init(
        size: Int = 256, concurrency: Int = SystemResources.current.usableCPUs, repeats: Int = 3,
        scenarios: [Scenario] = Scenario.standard, compare: Bool = false, scaleSteps: [Int] = [1, 4, 16],
        scrollRowsPerSecond: Double = 120, scrollRows: Int = 240, scrollSlots: Int = 12,
        coalesceRequests: Int = 500, warmHits: Int = 2_000_000, soakRequests: Int = 100_000
    ) {
        self.size = size
        self.concurrency = max(1, concurrency)
        self.repeats = max(1, repeats)
        self.scenarios = scenarios
        self.compare = compare
        self.scaleSteps = scaleSteps
        self.scrollRowsPerSecond = scrollRowsPerSecond
        self.scrollRows = scrollRows
        self.scrollSlots = scrollSlots
        self.coalesceRequests = coalesceRequests
        self.warmHits = warmHits
        self.soakRequests = max(1, soakRequests)
    }
}

/// The files of one format class (a corpus sub-folder, or files grouped by format).
public struct CorpusClass: Sendable {
    public let name: String
    public let files: [URL]
    public let bytes: Int

    public init(name: String, files: [URL]) {
        self.name = name
        self.files = files
        bytes = files.reduce(0) { total, url in
            total + ((try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0)
        }
    }

    /// Groups every image below `folder` (recursively, by magic bytes) into
    /// classes: the sub-folder for the built-in corpus, else the format.
    public static func classes(in folder: URL) -> [CorpusClass] {
        guard
            let enumerator = FileManager.default.enumerator(
                at: folder, includingPropertiesForKeys: [.isRegularFileKey],
                options: [.skipsHiddenFiles])
        else { return [] }
        var groups: [String: [URL]] = [:]
        for case let url as URL in enumerator {
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true,
                let handle = FileHandle(forReadingAtPath: url.path)
            else { continue }
            let prefix = (try? handle.read(upToCount: 32)) ?? Data()
            try? handle.close()
            guard let format = ImageFormat.sniff(prefix) else { continue }
            groups[format.rawValue, default: []].append(url)
        }
        return groups.sorted { $0.key < $1.key }.map {
            CorpusClass(name: $0.key, files: $0.value.sorted { $0.path < $1.path })
        }
    }
}
