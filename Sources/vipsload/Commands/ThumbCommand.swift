import Dispatch
import Foundation
import Synchronization
import VipsCore

/// `vipsload thumb`: a thumbnail of every input, written to a folder, in parallel.
enum ThumbCommand {
    static let usage = """
        usage: vipsload thumb [--size N] [--out DIR] [--format jpeg|png|webp] [--quality Q]
                              [--jobs N] [--strict] [--max-pixels N] INPUT...

        Writes a thumbnail of each input that fits in N×N pixels (never enlarged) to
        DIR as <input name without extension>.<format>. Folders are searched
        recursively for images; their sub-folders are kept under DIR. Inputs are
        processed in parallel; a failed input is reported on stderr and the rest
        carry on.

          --size N           fit in N×N pixels (default 256)
          --out DIR          output folder (default ./thumbnails)
          --format F         jpeg, png or webp (default jpeg)
          --quality Q        JPEG/WebP quality 1-100 (default 80)
          --jobs N           images processed at once (default: the number of cores)
        \(DecoderFlags.help)

        Exit status: 0 when every input was written, 1 when any failed, 2 on usage errors.
        """

    static func run(_ arguments: [String]) throws(ArgumentParser.UsageError) -> Int32 {
        let parser = ArgumentParser(valueOptions: DecoderFlags.valueOptions.union(["size", "out", "format", "quality", "jobs"]),
                                    flagOptions: DecoderFlags.flagOptions)
        let parsed = try parser.parse(arguments)
        if parsed.help { Terminal.out(usage); return 0 }
        guard !parsed.positional.isEmpty else { throw ArgumentParser.UsageError(description: "no INPUT given") }
        let size = try parsed.int("size", default: 256, in: 1...65_500)
        let quality = try parsed.int("quality", default: 80, in: 1...100)
        let jobs = try parsed.int("jobs", default: ProcessInfo.processInfo.activeProcessorCount, in: 1...256)
        let format: ImageEncoder.Format
        switch try parsed.choice("format", ["jpeg", "jpg", "png", "webp"], default: "jpeg") {
        case "png": format = .png()
        case "webp": format = .webp(quality: quality)
        default: format = .jpeg(quality: quality)
        }
        let outputFolder = URL(fileURLWithPath: parsed.value("out") ?? "thumbnails")
        let decoder = ImageDecoder(options: try DecoderFlags.options(parsed))

        let items = InputCollector.collect(parsed.positional)
        var namer = OutputNamer(fileExtension: format.fileExtension)
        let jobsList = items.map { (input: $0.path, output: namer.name(for: $0.outputStem)) }
        do {
            try FileManager.default.createDirectory(at: outputFolder, withIntermediateDirectories: true)
        } catch {
            Terminal.err("vipsload thumb: cannot create \(outputFolder.path): \(error.localizedDescription)")
            return 1
        }

        let progress = Progress(total: jobsList.count)
        let next = Atomic<Int>(0)
        let start = DispatchTime.now()
        DispatchQueue.concurrentPerform(iterations: min(jobs, max(1, jobsList.count))) { _ in
            while true {
                let index = next.add(1, ordering: .relaxed).oldValue
                guard index < jobsList.count else { return }
                let job = jobsList[index]
                do throws(VipsError) {
                    let bitmap = try decoder.decode(.file(job.input), size: .maxPixelSize(size))
                    let data = try ImageEncoder().encode(bitmap, as: format)
                    try write(data, to: outputFolder.appendingPathComponent(job.output))
                    progress.finished(failed: false)
                } catch {
                    progress.report(failure: "vipsload thumb: \(job.input): \(error.kind): \(error.message)")
                }
            }
        }
        Terminal.endProgress()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
        let (done, failed) = progress.counts
        Terminal.err(String(format: "vipsload thumb: %d written, %d failed, %.2f s, %.1f images/s",
                            done, failed, seconds, seconds > 0 ? Double(done + failed) / seconds : 0))
        return failed > 0 ? 1 : 0
    }

    /// Writes atomically (temporary file, then rename) so no half-written thumbnail is ever seen.
    private static func write(_ data: Data, to url: URL) throws(VipsError) {
        do {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: url, options: .atomic)
        } catch {
            throw VipsError(.io, "cannot write \(url.path): \(error.localizedDescription)")
        }
    }

    /// Counts results and keeps the terminal's progress line current.
    final class Progress: Sendable {
        private struct State { var done = 0, failed = 0, lastDraw: UInt64 = 0 }
        private let state = Mutex(State())
        private let total: Int

        init(total: Int) { self.total = total }

        var counts: (done: Int, failed: Int) { state.withLock { ($0.done, $0.failed) } }

        func finished(failed: Bool) {
            state.withLock { state in
                if failed { state.failed += 1 } else { state.done += 1 }
                let now = DispatchTime.now().uptimeNanoseconds
                if now - state.lastDraw > 100_000_000 || state.done + state.failed == total {
                    state.lastDraw = now
                    Terminal.progress("thumb: \(state.done + state.failed)/\(total)\(state.failed > 0 ? " (\(state.failed) failed)" : "")")
                }
            }
        }

        func report(failure line: String) {
            state.withLock { _ in
                Terminal.endProgress()
                Terminal.err(line)
            }
            finished(failed: true)
        }
    }
}
