import Dispatch
import Foundation
import Synchronization
import VipsCore
import VipsLoad

/// `vipsload thumb`: a thumbnail of every input, written to a folder, in parallel.
///
/// Every input, local file or `http(s)` URL, goes through one `ImagePipeline`
/// (see `ThumbEngine`): no memory cache (each image is needed once),
/// `--jobs` decodes at once, downloads through the disk cache with `--cache-dir`.
enum ThumbCommand {
    static let usage = """
        usage: vipsload thumb [--size N] [--out DIR] [--format jpeg|png|webp] [--quality Q]
                              [--jobs N] [--input-list FILE|-] [--cache-dir DIR] [--cache-size MB]
                              [--strict] [--max-pixels N] [--allow LIST] [INPUT...]

        Writes a thumbnail of each input that fits in N×N pixels (never enlarged) to
        DIR as <input name without extension>.<format>. An input is a file, a folder
        (searched recursively for images; its sub-folders are kept under DIR) or an
        http(s) URL (named after the URL's last path component). Inputs are
        processed in parallel; a failed input is reported on stderr and the rest
        carry on.

          --size N           fit in N×N pixels (default 256)
          --out DIR          output folder (default ./thumbnails)
          --format F         jpeg, png or webp (default jpeg)
          --quality Q        JPEG/WebP quality 1-100 (default 80)
          --jobs N           images processed at once (default: the number of cores)
          --input-list FILE  also read inputs from FILE ('-' for standard input), one
                             per line; blank lines and lines starting with # are skipped
          --cache-dir DIR    keep downloaded images in a disk cache in DIR (created when
                             missing), and use what is there: fresh entries are not
                             downloaded again, stale ones revalidated
          --cache-size MB    the disk cache's size limit; least recently used entries
                             go first (default 512)
        \(DecoderFlags.help)

        Exit status: 0 when every input was written, 1 when any failed, 2 on usage errors.
        """

    /// One thumbnail to make: where from, and the output path relative to the output folder.
    private struct Job {
        let item: InputCollector.Item
        let output: String
    }

    /// What every job needs to make and write its thumbnail.
    private struct Settings {
        let size: Int
        let format: ImageEncoder.Format
        let outputFolder: URL
        let jobs: Int
        let decodeOptions: DecodeOptions
    }

    static func run(_ arguments: [String]) async throws(ArgumentParser.UsageError) -> Int32 {
        let parser = ArgumentParser(
            valueOptions: DecoderFlags.valueOptions.union(["size", "out", "format", "quality", "jobs", "input-list", "cache-dir",
                                                           "cache-size"]),
            flagOptions: DecoderFlags.flagOptions)
        let parsed = try parser.parse(arguments)
        if parsed.help { Terminal.out(usage); return 0 }
        guard !parsed.positional.isEmpty || parsed.value("input-list") != nil else {
            throw ArgumentParser.UsageError(description: "no INPUT given")
        }
        let size = try parsed.int("size", default: 256, in: 1...65_500)
        let quality = try parsed.int("quality", default: 80, in: 1...100)
        let jobs = try parsed.int("jobs", default: ProcessInfo.processInfo.activeProcessorCount, in: 1...256)
        let cacheMegabytes = try parsed.int("cache-size", default: 512, in: 1...1_048_576)
        if parsed.value("cache-size") != nil, parsed.value("cache-dir") == nil {
            throw ArgumentParser.UsageError(description: "--cache-size needs --cache-dir")
        }
        let format: ImageEncoder.Format
        switch try parsed.choice("format", ["jpeg", "jpg", "png", "webp"], default: "jpeg") {
        case "png": format = .png()
        case "webp": format = .webp(quality: quality)
        default: format = .jpeg(quality: quality)
        }
        let settings = Settings(size: size, format: format, outputFolder: URL(fileURLWithPath: parsed.value("out") ?? "thumbnails"),
                                jobs: jobs, decodeOptions: try DecoderFlags.options(parsed))

        var inputs = parsed.positional
        if let list = parsed.value("input-list") {
            do throws(VipsError) {
                inputs += try InputCollector.readList(list)
            } catch {
                Terminal.err("vipsload thumb: \(error.message)")
                return 1
            }
        }
        var namer = OutputNamer(fileExtension: format.fileExtension)
        let jobsList = InputCollector.collect(inputs, recognisingURLs: true)
            .map { Job(item: $0, output: namer.name(for: $0.outputStem)) }
        do {
            try FileManager.default.createDirectory(at: settings.outputFolder, withIntermediateDirectories: true)
        } catch {
            Terminal.err("vipsload thumb: cannot create \(settings.outputFolder.path): \(error.localizedDescription)")
            return 1
        }

        let progress = Progress(total: jobsList.count)
        let start = DispatchTime.now()
        var accepted: [Job] = []
        var sources: [ImageSource] = []
        for job in jobsList {
            switch job.item.location {
            case .file(let path): accepted.append(job); sources.append(.file(path))
            case .url(let url): accepted.append(job); sources.append(.url(url))
            case .invalidURL: progress.report(failure: "vipsload thumb: \(job.item.input): \(VipsError.Kind.invalidArgument): not a valid URL")
            }
        }
        let cache = parsed.value("cache-dir").map { (folder: $0, sizeLimit: cacheMegabytes * 1_048_576) }
        let engine = ThumbEngine(pipeline: makePipeline(settings, cache: cache), size: .maxPixelSize(settings.size),
                                 window: settings.jobs * 2 + 8)
        let runJobs = accepted
        await engine.run(sources) { index, result in
            let job = runJobs[index]
            do throws(VipsError) {
                let bitmap = try result.get()
                try write(ImageEncoder().encode(bitmap, as: settings.format), to: settings.outputFolder.appendingPathComponent(job.output))
                progress.finished(failed: false)
            } catch {
                progress.report(failure: "vipsload thumb: \(job.item.input): \(error.kind): \(error.message(about: job.item.input))")
            }
        }
        Terminal.endProgress()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
        let (done, failed) = progress.counts
        Terminal.err(String(format: "vipsload thumb: %d written, %d failed, %.2f s, %.1f images/s",
                            done, failed, seconds, seconds > 0 ? Double(done + failed) / seconds : 0))
        return failed > 0 ? 1 : 0
    }

    /// The pipeline for every input: no memory cache (each image is needed
    /// once), the disk cache in `cache.folder` when given and usable.
    private static func makePipeline(_ settings: Settings, cache: (folder: String, sizeLimit: Int)?) -> ImagePipeline {
        var configuration = ImagePipeline.Configuration(decodeConcurrency: settings.jobs, memoryCache: nil,
                                                        decodeOptions: settings.decodeOptions)
        if let cache {
            do throws(VipsError) {
                configuration.diskCache = try DiskCache(directory: URL(fileURLWithPath: cache.folder), sizeLimit: cache.sizeLimit)
            } catch {
                // The images can still be downloaded: say so and carry on uncached.
                Terminal.err("vipsload thumb: not caching downloads: \(error.message)")
            }
        }
        return ImagePipeline(configuration: configuration)
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
