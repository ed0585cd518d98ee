import Dispatch
import Foundation
import VipsBench
import VipsCore
import VipsLoad

/// Reports a `thumb` run: error lines on stderr, one JSON object per input
/// on stdout with `--json`, a line per output with `--verbose`, the progress
/// line, and the summary.
///
/// The progress line (done/total, percentage, rate, ETA) is redrawn in place
/// on a terminal (unless `--quiet`); elsewhere it is silent unless
/// `--progress`, which prints it as a plain line at most once a second.
final class ThumbReporter: Sendable {
    struct Options {
        var json = false
        var quiet = false
        var verbose = false
        /// `--progress`: also when stderr is not a terminal.
        var progress = false
    }

    /// The counts so far.
    struct Counts {
        var written = 0, skipped = 0, failed = 0
        /// Of `written`, the thumbnails copied from the `--cache-dir` cache (nothing decoded).
        var fromCache = 0
        var done: Int { written + skipped + failed }
    }

    private struct State {
        var counts = Counts()
        var lastDraw: UInt64 = 0
    }

    private let options: Options
    private let total: Int
    private let start = DispatchTime.now().uptimeNanoseconds
    private let state = LockedState(State())
    private let drawsInPlace: Bool
    private let drawsLines: Bool

    init(total: Int, options: Options) {
        self.total = total
        self.options = options
        drawsInPlace = !options.quiet && Terminal.stderrIsTerminal
        drawsLines = !options.quiet && !Terminal.stderrIsTerminal && options.progress
    }

    var counts: Counts { state.withLock { $0.counts } }

    /// Seconds since the reporter was made.
    var elapsed: Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }

    /// An output written; `fromCache` when its thumbnail came from the `--cache-dir` cache;
    /// `placeholder` (with `--placeholder`) goes into its JSON object.
    func written(
        _ input: String, output: String, width: Int, height: Int, bytes: Int, milliseconds: Double,
        fromCache: Bool = false, placeholder: ImagePlaceholder? = nil
    ) {
        if options.json {
            Terminal.out(
                Terminal.jsonObject(
                    [
                        ("input", JSONText.string(input)), ("status", JSONText.string("written")),
                        ("output", JSONText.string(output)),
                        ("width", String(width)), ("height", String(height)), ("bytes", String(bytes)),
                        ("ms", String(format: "%.1f", milliseconds)), ("fromCache", fromCache ? "true" : "false")
                    ] + (placeholder.map { [("placeholder", $0.jsonObject)] } ?? [])))
        }
        if options.verbose, !options.quiet {
            line(
                "vipsload thumb: \(input) -> \(output) (\(width)x\(height), \(bytes) bytes, \(String(format: "%.0f", milliseconds)) ms"
                    + (fromCache ? ", from the cache)" : ")"))
        }
        count {
            $0.written += 1
            if fromCache { $0.fromCache += 1 }
        }
    }

    func skipped(_ input: String, output: String, reason: String, placeholder: ImagePlaceholder? = nil) {
        if options.json {
            Terminal.out(
                Terminal.jsonObject(
                    [
                        ("input", JSONText.string(input)), ("status", JSONText.string("skipped")),
                        ("output", JSONText.string(output)),
                        ("reason", JSONText.string(reason))
                    ] + (placeholder.map { [("placeholder", $0.jsonObject)] } ?? [])))
        }
        if options.verbose, !options.quiet { line("vipsload thumb: \(input): skipped: \(reason)") }
        count { $0.skipped += 1 }
    }

    /// A file found in a folder that is not an input (`InputCollector`): a
    /// line with `--verbose`, nothing otherwise; not counted.
    func ignored(_ path: String, reason: String) {
        if options.verbose, !options.quiet { line("vipsload thumb: \(path): skipped: \(reason)") }
    }

    func failed(_ input: String, kind: String, message: String) {
        if options.json {
            Terminal.out(
                Terminal.jsonObject([
                    ("input", JSONText.string(input)), ("status", JSONText.string("failed")),
                    (
                        "error",
                        Terminal.jsonObject([("kind", JSONText.string(kind)), ("message", JSONText.string(message))])
                    )
                ]))
        }
        line("vipsload thumb: \(input): \(kind): \(message)")
        count { $0.failed += 1 }
    }

    func failed(_ input: String, _ error: VipsError) {
        failed(input, kind: error.kind.rawValue, message: error.message(about: input))
    }

    /// Ends the progress line and prints the summary (a JSON object too with
    /// `--json`); `decodes`: the images decoded, here and in workers.
    func finish(retries: Int, decodes: Int, shard: Shard) {
        let seconds = elapsed
        let counts = self.counts
        let rate = seconds > 0 ? Double(counts.written) / seconds : 0
        if drawsInPlace { Terminal.write("\r\u{1B}[K", to: .standardError) }
        if options.json {
            Terminal.out(
                Terminal.jsonObject([
                    (
                        "summary",
                        Terminal.jsonObject([
                            ("written", String(counts.written)), ("skipped", String(counts.skipped)),
                            ("failed", String(counts.failed)), ("fromCache", String(counts.fromCache)),
                            ("decoded", String(decodes)), ("retries", String(retries)),
                            ("shard", JSONText.string(shard.description)),
                            ("seconds", String(format: "%.3f", seconds)),
                            ("imagesPerSecond", String(format: "%.1f", rate))
                        ])
                    )
                ]))
        }
        guard !options.quiet else { return }
        var text = "vipsload thumb: \(counts.written) written"
        if counts.fromCache > 0 { text += " (\(counts.fromCache) from the cache)" }
        text += ", \(counts.skipped) skipped, \(counts.failed) failed"
        if retries > 0 { text += ", \(retries) \(retries == 1 ? "retry" : "retries")" }
        if shard.count > 1 { text += ", shard \(shard)" }
        Terminal.err(text + String(format: ", %.2f s, %.1f images/s", seconds, rate))
    }

    /// A line on stderr that does not tear the progress line.
    private func line(_ text: String) {
        Terminal.write((drawsInPlace ? "\r\u{1B}[K" : "") + URLRedaction.redacted(text) + "\n", to: .standardError)
    }

    private func count(_ change: (inout Counts) -> Void) {
        let now = DispatchTime.now().uptimeNanoseconds
        let drawn = state.withLock { state -> Counts? in
            change(&state.counts)
            let interval: UInt64 = drawsLines ? 1_000_000_000 : 100_000_000
            guard drawsInPlace || drawsLines, now - state.lastDraw >= interval || state.counts.done == total else {
                return nil
            }
            state.lastDraw = now
            return state.counts
        }
        guard let drawn else { return }
        let text = progressText(drawn, seconds: Double(now - start) / 1e9)
        Terminal.write(drawsInPlace ? "\r\u{1B}[K" + text : text + "\n", to: .standardError)
    }

    /// "thumb: 120/400 30%, 41.2 images/s, ETA 0:07 (2 failed)".
    func progressText(_ counts: Counts, seconds: Double) -> String {
        let percent = total > 0 ? counts.done * 100 / total : 100
        let processed = counts.written + counts.failed
        let rate = seconds > 0 ? Double(processed) / seconds : 0
        var text = "thumb: \(counts.done)/\(total) \(percent)%, " + String(format: "%.1f images/s", rate)
        if rate > 0, counts.done < total {
            let eta = Int((Double(total - counts.done) / rate).rounded(.up))
            text +=
                eta >= 3600
                ? String(format: ", ETA %d:%02d:%02d", eta / 3600, eta / 60 % 60, eta % 60)
                : String(format: ", ETA %d:%02d", eta / 60, eta % 60)
        }
        if counts.failed > 0 { text += " (\(counts.failed) failed)" }
        return text
    }
}
