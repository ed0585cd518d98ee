import Dispatch
import Foundation
import Synchronization
import VipsCore
import VipsLoad

/// `vipsload thumb`: a thumbnail of every input, written to a folder, in parallel.
///
/// Local files are decoded straight by `ImageDecoder` on
/// `DispatchQueue.concurrentPerform` threads (nothing to coalesce or cache,
/// and the fastest path measured); `http(s)` URLs go through an
/// `ImagePipeline`, which downloads them (through the disk cache with
/// `--cache-dir`) while the files are being decoded.
enum ThumbCommand {
    static let usage = """
        usage: vipsload thumb [--size S] [--fit MODE] [--gravity G] [--background C]
                              [--format jpeg|png|webp|avif|gif] [--quality Q] [--keep-metadata]
                              [--out DIR] [--jobs N] [--input-list FILE|-] [--cache-dir DIR] [--cache-size MB]
                              [--strict] [--max-pixels N] [--allow LIST] [INPUT...]

        Writes a thumbnail of each input sized by --size and --fit (never enlarged) to
        DIR as <input name without extension>.<format>. An input is a file, a folder
        (searched recursively for images; its sub-folders are kept under DIR) or an
        http(s) URL (named after the URL's last path component). Inputs are
        processed in parallel; a failed input is reported on stderr and the rest
        carry on.

        \(ProcessingFlags.help)
          --out DIR          output folder (default ./thumbnails)
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
        let processing: ProcessingFlags.Settings
        var format: OutputFormat { processing.format }
        let outputFolder: URL
        let jobs: Int
        let decodeOptions: DecodeOptions
    }

    static func run(_ arguments: [String]) async throws(ArgumentParser.UsageError) -> Int32 {
        let parser = ArgumentParser(
            valueOptions: DecoderFlags.valueOptions.union(ProcessingFlags.valueOptions)
                .union(["out", "jobs", "input-list", "cache-dir", "cache-size"]),
            flagOptions: DecoderFlags.flagOptions.union(ProcessingFlags.flagOptions))
        let parsed = try parser.parse(arguments)
        if parsed.help { Terminal.out(usage); return 0 }
        guard !parsed.positional.isEmpty || parsed.value("input-list") != nil else {
            throw ArgumentParser.UsageError(description: "no INPUT given")
        }
        let processing = try ProcessingFlags.settings(parsed)
        let jobs = try parsed.int("jobs", default: ProcessInfo.processInfo.activeProcessorCount, in: 1...256)
        let cacheMegabytes = try parsed.int("cache-size", default: 512, in: 1...1_048_576)
        if parsed.value("cache-size") != nil, parsed.value("cache-dir") == nil {
            throw ArgumentParser.UsageError(description: "--cache-size needs --cache-dir")
        }
        let format = processing.format
        let settings = Settings(processing: processing, outputFolder: URL(fileURLWithPath: parsed.value("out") ?? "thumbnails"),
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
        var files: [Job] = []
        var downloads: [(Job, URL)] = []
        for job in jobsList {
            switch job.item.location {
            case .file: files.append(job)
            case .url(let url): downloads.append((job, url))
            case .invalidURL: progress.report(failure: "vipsload thumb: \(job.item.input): \(VipsError.Kind.invalidArgument): not a valid URL")
            }
        }
        // Downloads (and their results) proceed while the files are decoded.
        let cache = parsed.value("cache-dir").map { (folder: $0, sizeLimit: cacheMegabytes * 1_048_576) }
        async let downloaded: Void = thumbnailURLs(downloads, settings, cache: cache, progress)
        await thumbnailFiles(files, settings, progress)
        await downloaded
        Terminal.endProgress()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
        let (done, failed) = progress.counts
        Terminal.err(String(format: "vipsload thumb: %d written, %d failed, %.2f s, %.1f images/s",
                            done, failed, seconds, seconds > 0 ? Double(done + failed) / seconds : 0))
        return failed > 0 ? 1 : 0
    }

    /// Decodes, encodes and writes every file on `settings.jobs` threads; returns when all are done.
    private static func thumbnailFiles(_ files: [Job], _ settings: Settings, _ progress: Progress) async {
        guard !files.isEmpty else { return }
        let decoder = ImageDecoder(options: settings.decodeOptions)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // A GCD thread, not the Swift concurrency pool: concurrentPerform blocks until the last file.
            DispatchQueue.global().async {
                let next = Atomic<Int>(0)
                DispatchQueue.concurrentPerform(iterations: min(settings.jobs, files.count)) { _ in
                    while true {
                        let index = next.add(1, ordering: .relaxed).oldValue
                        guard index < files.count else { return }
                        let job = files[index]
                        guard case .file(let path) = job.item.location else { continue }
                        do throws(VipsError) {
                            let data: Data
                            if settings.processing.animated {
                                let animation = try decoder.decodeAnimation(.file(path), size: settings.processing.size)
                                data = try ImageEncoder().encode(animation, as: settings.format).data
                            } else {
                                let bitmap = try decoder.decode(.file(path), size: settings.processing.size, mode: settings.processing.mode,
                                                                keepingMetadata: settings.processing.keepMetadata)
                                data = try encode(bitmap, settings)
                            }
                            try write(data, to: settings.outputFolder.appendingPathComponent(job.output))
                            progress.finished(failed: false)
                        } catch {
                            progress.report(failure: "vipsload thumb: \(job.item.input): \(error.kind): \(error.message(about: job.item.input))")
                        }
                    }
                }
                continuation.resume()
            }
        }
    }

    /// Downloads and decodes every URL through a pipeline, and encodes and
    /// writes each thumbnail as its bitmap arrives; returns when all are done.
    private static func thumbnailURLs(_ downloads: [(Job, URL)], _ settings: Settings, cache: (folder: String, sizeLimit: Int)?,
                                      _ progress: Progress) async {
        guard !downloads.isEmpty else { return }
        let pipeline = makePipeline(settings, cache: cache)
        let processing = settings.processing
        let requests = downloads.map {
            ImageRequest(url: $0.1, size: processing.size, mode: processing.mode,
                         options: processing.keepMetadata ? [.keepMetadata] : [])
        }
        for await result in pipeline.images(for: requests) {
            let job = downloads[result.index].0
            do throws(VipsError) {
                let bitmap: Bitmap
                switch result.result {
                case .success(let decoded): bitmap = decoded
                case .failure(let error): throw error
                }
                try write(encode(bitmap, settings), to: settings.outputFolder.appendingPathComponent(job.output))
                progress.finished(failed: false)
            } catch {
                progress.report(failure: "vipsload thumb: \(job.item.input): \(error.kind): \(error.message(about: job.item.input))")
            }
        }
    }

    /// The pipeline for URL inputs: no memory cache (each image is needed
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

    /// The encoded thumbnail, as the processing flags ask.
    private static func encode(_ bitmap: Bitmap, _ settings: Settings) throws(VipsError) -> Data {
        try ImageEncoder().encode(bitmap, as: settings.format, keepingMetadata: settings.processing.keepMetadata,
                                  background: settings.processing.background).data
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
