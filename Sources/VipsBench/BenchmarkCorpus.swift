import Dispatch
import Foundation
import VipsCore
import VipsSynthesis

/// The built-in benchmark corpus: deterministic, photo-like images generated
/// once into a cache folder and reused by every later run.
///
/// Layout (one sub-folder per format class):
/// - `jpeg-large/`: 24 JPEGs of 4000×3000 (every third progressive, every
///   fourth with EXIF orientation 6 or 8)
/// - `png/`: 8 PNGs of 2000×1500 (every other with alpha)
/// - `webp/`: 8 lossy WebPs of 2000×1500
/// - `jpeg-small/`: 32 JPEGs of 640×480
public struct BenchmarkCorpus: Sendable {
    /// One class of files of the same kind and size.
    public struct FormatClass: Sendable, Hashable {
        public let name: String
        public let count: Int
        public let width: Int
        public let height: Int
        /// The synthetic format of file `index` of this class.
        let format: @Sendable (Int) -> ImageSynthesizer.Format
        let alpha: @Sendable (Int) -> Bool

        public static func == (a: FormatClass, b: FormatClass) -> Bool { a.name == b.name }
        public func hash(into hasher: inout Hasher) { hasher.combine(name) }
    }

    /// The classes of the default corpus, in report order.
    public static let classes: [FormatClass] = [
        FormatClass(
            name: "jpeg-large", count: 24, width: 4000, height: 3000,
            format: { index in
                .jpeg(
                    quality: 88, progressive: index % 3 == 2, orientation: index % 4 == 3 ? (index % 8 == 3 ? 6 : 8) : 1
                )
            }, alpha: { _ in false }),
        FormatClass(name: "png", count: 8, width: 2000, height: 1500, format: { _ in .png() }, alpha: { $0 % 2 == 1 }),
        FormatClass(
            name: "webp", count: 8, width: 2000, height: 1500, format: { _ in .webp(quality: 80) },
            alpha: { _ in false }),
        FormatClass(
            name: "jpeg-small", count: 32, width: 640, height: 480, format: { _ in .jpeg(quality: 85) },
            alpha: { _ in false })
    ]

    /// Bumped whenever the generated content changes, so old caches are not reused.
    static let version = 1

    /// The corpus folder.
    public let folder: URL

    /// The default location: `$VIPSLOAD_CACHE_DIR/corpus-v1`, else
    /// `$XDG_CACHE_HOME/vipsload/corpus-v1`, else `~/.cache/vipsload/corpus-v1`.
    public static var defaultFolder: URL {
        let environment = ProcessInfo.processInfo.environment
        let base: URL
        if let dir = environment["VIPSLOAD_CACHE_DIR"], !dir.isEmpty {
            base = URL(fileURLWithPath: dir)
        } else if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty {
            base = URL(fileURLWithPath: xdg).appendingPathComponent("vipsload")
        } else {
            base = FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/vipsload")
        }
        return base.appendingPathComponent("corpus-v\(version)")
    }

    public init(folder: URL = BenchmarkCorpus.defaultFolder) {
        self.folder = folder
    }

    /// Generates whatever is missing (in parallel across the cores) and
    /// returns the files by class. A complete corpus is reused as it is.
    ///
    /// - Parameters:
    ///   - scale: 1 for the default corpus; a smaller value (e.g. 0.05) shrinks
    ///     every image's sides and count, for tests that need a tiny corpus.
    ///   - progress: called with (done, total) while generating.
    public func prepare(
        scale: Double = 1, progress: (@Sendable (Int, Int) -> Void)? = nil
    ) throws -> [(FormatClass, [URL])] {
        let plan: [(FormatClass, [URL], Int, Int)] = Self.classes.map { formatClass in
            let count = max(1, Int((Double(formatClass.count) * min(1, scale * 4)).rounded()))
            let width = max(16, Int(Double(formatClass.width) * min(1, scale)))
            let height = max(12, Int(Double(formatClass.height) * min(1, scale)))
            let ext = formatClass.format(0).fileExtension
            let urls = (0..<count).map {
                folder.appendingPathComponent(formatClass.name).appendingPathComponent(
                    String(format: "%@-%02d.%@", formatClass.name, $0, ext))
            }
            return (formatClass, urls, width, height)
        }
        let work = plan.flatMap { entry in
            entry.1.enumerated().map { (entry.0, $0.offset, $0.element, entry.2, entry.3) }
        }
        .filter { !FileManager.default.fileExists(atPath: $0.2.path) }
        for entry in plan {
            try FileManager.default.createDirectory(
                at: entry.1[0].deletingLastPathComponent(), withIntermediateDirectories: true)
        }
        let failure = FirstError()
        let done = Counter()
        DispatchQueue.concurrentPerform(iterations: work.count) { index in
            let (formatClass, fileIndex, url, width, height) = work[index]
            do {
                let seed = formatClass.name.utf8.reduce(7) { $0 &* 31 &+ Int($1) } &+ fileIndex
                let data = try ImageSynthesizer.data(
                    width: width, height: height, seed: seed, alpha: formatClass.alpha(fileIndex),
                    format: formatClass.format(fileIndex))
                // Atomic: an interrupted run never leaves a half-written file that a later run would reuse.
                try data.write(to: url, options: .atomic)
                progress?(done.increment(), work.count)
            } catch {
                failure.record(error)
            }
        }
        if let error = failure.error { throw error }
        return plan.map { ($0.0, $0.1) }
    }
}
