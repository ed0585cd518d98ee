import Dispatch
import Foundation
import VipsCore
import VipsLoad

/// `vipsload thumb`: a thumbnail of every input, written to a folder, in parallel.
///
/// Every input, local file, URL or standard input, goes through one
/// `ImagePipeline` (see `ThumbEngine`): no memory cache (each image is needed
/// once), `--jobs` decodes at once, downloads through the disk cache with
/// `--cache-dir` and retried by `--retries`. Output names come from
/// `OutputNamer` (clashes are refused), writes are atomic (`OutputWriter`),
/// up-to-date outputs are skipped (`ThumbJournal`), `--shard` picks this
/// process's share (`Shard`), and `ThumbReporter` reports.
enum ThumbCommand {
    static let usage = """
        usage: vipsload thumb [-s WxH|Wx|xH|N] [--fit MODE] [--gravity G] [--background C]
                              [-f jpeg|png|webp|avif|gif] [-Q Q] [--keep-metadata] [--animated]
                              [-o DIR|-] [-n TEMPLATE] [-j N]
                              [-i FILE|-] [--cache-dir DIR] [--cache-size MB] [--retries N]
                              [--header 'NAME: VALUE']...
                              [--force] [--shard K/N] [--shard-count N] [--json] [--progress]
                              [-q] [-v] [--strict] [--max-pixels N] [--allow LIST]
                              [--isolate optin|all|none] [--timeout S] [--worker-memory MB] [INPUT...|-]

        Writes a thumbnail of each input (by default one that fits in 256×256 pixels,
        never enlarged) to DIR, named by the --name template. An input is a file, a folder (searched
        recursively for images), an http(s) URL, or '-' for one image on standard
        input. Inputs are processed in parallel; a failed input is reported on
        stderr and the rest carry on. A rerun skips outputs that are up to date.

          -o, --out DIR         output folder (default ./thumbnails); '-' writes the
                                thumbnail of a single input to standard output
          -n, --name TEMPLATE   output name without its extension (default '%d/%s'):
        \(OutputNamer.placeholderHelp)
                                An output's name depends on its own input only. Two
                                inputs with one name are a clash: neither is written.
          -j, --jobs N          images decoded at once (default: the usable CPUs)
          -i, --input-list FILE also read inputs from FILE ('-' for standard input), one
                                per line; blank lines and lines starting with # are skipped
          -c, --cache-dir DIR   keep downloaded images in a disk cache in DIR (created when
                                missing), and use what is there: fresh entries are not
                                downloaded again, stale ones revalidated; several
                                processes may share one
              --cache-size MB   the disk cache's size limit (default 512)
          -r, --retries N       retry a transient download failure (connection error,
                                timeout, 429, 5xx) up to N times (default 2), with
                                backoff, honouring Retry-After up to 30 s
          -H, --header 'N: V'   send this header field with every URL request (repeatable;
                                overrides a default field of the same name)
          -F, --force           make every thumbnail again, even when up to date
                                (by default an output newer than its source and made
                                with the same options is skipped; a URL's output is
                                kept until --force)
              --shard K/N       process only shard K of N (1 ≤ K ≤ N), chosen per input
                                by a stable hash of its path or URL; by default read from
                                JOB_COMPLETION_INDEX (Kubernetes), SLURM_ARRAY_TASK_ID
                                (Slurm) or AWS_BATCH_JOB_ARRAY_INDEX (AWS Batch)
              --shard-count N   the number of shards, with an index from the environment
                                (a Kubernetes Job's completions)
              --json            one JSON object per input on stdout, then a summary object
              --progress        show progress also when stderr is not a terminal
          -q, --quiet           no progress line, no summary (errors are still reported)
          -v, --verbose         a line for every output written or skipped
        \(ProcessingFlags.help)
        \(DecoderFlags.help)
        \(IsolationFlags.help)
                             (isolated: local files, standard input and downloads; a download
                             is fetched first, and its format decides where it is decoded)

        Exit status: 0 when every input was written or up to date, 1 when any
        failed or clashed, 2 on usage errors.
        """

    static let shortOptions: [Character: String] = [
        "s": "size", "o": "out", "f": "format", "Q": "quality", "n": "name", "j": "jobs", "i": "input-list",
        "c": "cache-dir", "r": "retries", "H": "header", "F": "force", "q": "quiet", "v": "verbose"
    ]

    /// What every job needs to make and write its thumbnail.
    private struct Settings: Sendable {
        /// Size, resize mode, output format, background, metadata and animation.
        let processing: ProcessingFlags.Settings
        /// The output folder, or nil for standard output.
        let outputFolder: URL?
        let jobs: Int
        let decodeOptions: DecodeOptions
        /// The options that change an output's pixels or bytes, as recorded in the journal.
        let fingerprint: String
    }

    /// One thumbnail to make.
    private struct Job: Sendable {
        let item: InputCollector.Item
        /// The output path relative to the output folder ("-" for standard output).
        let output: String
        /// The input's identity in the journal.
        let identity: String
        let source: ImageSource
    }

    static func run(_ arguments: [String]) async throws(ArgumentParser.UsageError) -> Int32 {
        let parser = ArgumentParser(
            valueOptions: DecoderFlags.valueOptions.union(ProcessingFlags.valueOptions).union(
                IsolationFlags.valueOptions
            )
            .union([
                "out", "jobs", "input-list", "cache-dir", "cache-size", "name", "retries", "shard", "shard-count",
                "header"
            ]),
            flagOptions: DecoderFlags.flagOptions.union(ProcessingFlags.flagOptions)
                .union(["force", "json", "progress", "quiet", "verbose"]),
            shortOptions: shortOptions)
        let parsed = try parser.parse(arguments)
        if parsed.help { Terminal.out(usage); return 0 }
        guard !parsed.positional.isEmpty || parsed.value("input-list") != nil else {
            throw ArgumentParser.UsageError(description: "no INPUT given")
        }
        let processing = try ProcessingFlags.settings(parsed)
        let jobs = try parsed.int("jobs", default: SystemResources.current.usableCPUs, in: 1...256)
        let retries = try parsed.int("retries", default: 2, in: 0...100)
        let cacheMegabytes = try parsed.int("cache-size", default: 512, in: 1...1_048_576)
        let headers = try headerFields(parsed.values("header"))
        if parsed.value("cache-size") != nil, parsed.value("cache-dir") == nil {
            throw ArgumentParser.UsageError(description: "--cache-size needs --cache-dir")
        }
        if parsed.flag("quiet"), parsed.flag("verbose") {
            throw ArgumentParser.UsageError(description: "--quiet and --verbose cannot be used together")
        }
        let format = processing.format
        let decodeOptions = try DecoderFlags.options(parsed)
        let isolation = try IsolationFlags.settings(parsed)
        let toStandardOutput = parsed.value("out") == "-"
        if toStandardOutput, parsed.flag("json") {
            throw ArgumentParser.UsageError(description: "--json and --out - both write to standard output")
        }
        let namer = try OutputNamer(
            template: parsed.value("name") ?? OutputNamer.defaultTemplate, fileExtension: format.fileExtension)
        var shard = Shard.all
        if let text = parsed.value("shard") {
            if parsed.value("shard-count") != nil {
                throw ArgumentParser.UsageError(description: "--shard K/N already gives the count; drop --shard-count")
            }
            shard = try Shard.parse(text)
        } else {
            let count = try parsed.value("shard-count").map { _ throws(ArgumentParser.UsageError) in
                try parsed.int("shard-count", default: 1, in: 1...1_000_000)
            }
            shard = try Shard.fromEnvironment(ProcessInfo.processInfo.environment, shardCount: count) ?? .all
        }

        let fingerprint =
            "\(processing.fingerprint) strict=\(decodeOptions.strict ? 1 : 0) "
            + "max-pixels=\(decodeOptions.limits.maxPixelCount) "
            + "allow=\(decodeOptions.allowedFormats.map(\.rawValue).sorted().joined(separator: ","))"
        let settings = Settings(
            processing: processing,
            outputFolder: toStandardOutput ? nil : URL(fileURLWithPath: parsed.value("out") ?? "thumbnails"),
            jobs: jobs, decodeOptions: decodeOptions, fingerprint: fingerprint)

        // The inputs, once each (the same input named twice is processed once).
        var inputs = parsed.positional
        if let list = parsed.value("input-list") {
            if list == "-", inputs.contains("-") {
                throw ArgumentParser.UsageError(
                    description: "standard input cannot be both the input list and an image ('-')")
            }
            do throws(VipsError) {
                inputs += try InputCollector.readList(list)
            } catch {
                Terminal.err("vipsload thumb: \(error.message)")
                return 1
            }
        }
        var seen: Set<String> = []
        let items = InputCollector.collect(inputs, recognisingURLs: true, skipping: settings.outputFolder)
            .filter { seen.insert($0.key).inserted }
        if items.contains(where: { if case .standardInput = $0.location { return true } else { return false } }),
            items.count > 1
        {
            throw ArgumentParser.UsageError(
                description: "'-' (an image on standard input) must be the only input; \(items.count) inputs given")
        }
        if toStandardOutput, items.count != 1 {
            throw ArgumentParser.UsageError(
                description:
                    "--out - writes the thumbnail of a single input to standard output; \(items.count) inputs given")
        }

        // Clashes are found over every input, whatever the shard, so all shards agree.
        let clashes = namer.clashes(
            items.filter { if case .invalidURL = $0.location { return false } else { return true } })
        let clashing = Dictionary(
            clashes.flatMap { clash in clash.items.map { ($0.key, clash) } }, uniquingKeysWith: { first, _ in first })
        let selected = items.filter {
            if case .standardInput = $0.location { return true } else { return shard.contains($0.key) }
        }
        if parsed.flag("verbose"), shard.count > 1 {
            Terminal.err(
                "vipsload thumb: shard \(shard) (from \(shard.origin)): \(selected.count) of \(items.count) inputs")
        }

        let reporter = ThumbReporter(
            total: selected.count,
            options: ThumbReporter.Options(
                json: parsed.flag("json"), quiet: parsed.flag("quiet"), verbose: parsed.flag("verbose"),
                progress: parsed.flag("progress")))
        let writer: OutputWriter?
        let journal: ThumbJournal?
        if let folder = settings.outputFolder {
            do throws(VipsError) {
                writer = try OutputWriter(folder: folder)
            } catch {
                Terminal.err("vipsload thumb: \(error.message)")
                return 1
            }
            journal = ThumbJournal(folder: folder)
        } else {
            writer = nil
            journal = nil
        }

        let runJobs = plan(
            selected, namer: namer, clashing: clashing, settings: settings, journal: journal,
            force: parsed.flag("force"), reporter: reporter)

        let pipeline = makePipeline(
            settings, retries: retries, headers: headers, timeoutSeconds: isolation.timeoutSeconds,
            cache: parsed.value("cache-dir").map { (folder: $0, sizeLimit: cacheMegabytes * 1_048_576) })
        var engine = ThumbEngine(pipeline: pipeline, animated: processing.animated, window: settings.jobs * 2 + 8) {
            source in
            ImageRequest(
                source: source, size: processing.size, mode: processing.mode,
                options: processing.keepMetadata ? [.keepMetadata] : [])
        }
        let workers =
            isolation.scope == .none
            ? nil
            : WorkerPool(
                capacity: settings.jobs, timeoutSeconds: isolation.timeoutSeconds, workerMemory: isolation.workerMemory,
                workerArguments: workerArguments(parsed, workerMemory: isolation.workerMemory))
        defer { workers?.shutdown() }
        if let workers {
            engine.isolation = ThumbEngine.Isolation(workers: workers) { isolation.isolates($0) }
        }
        let jobList = runJobs
        await engine.run(jobList.map(\.source)) { index, result, started in
            let job = jobList[index]
            do throws(VipsError) {
                let width: Int, height: Int, data: Data
                switch try result.get() {
                case .still(let bitmap):
                    (width, height) = (bitmap.width, bitmap.height)
                    data = try ImageEncoder().encode(
                        bitmap, as: processing.format, keepingMetadata: processing.keepMetadata,
                        background: processing.background
                    ).data
                case .animation(let animation):
                    (width, height) = (animation.frames.first?.width ?? 0, animation.frames.first?.height ?? 0)
                    data = try ImageEncoder().encode(animation, as: processing.format).data
                }
                if let writer {
                    let info = try writer.write(data, to: job.output)
                    if !job.identity.isEmpty {
                        journal?.record(
                            output: job.output, options: settings.fingerprint, input: job.identity, info: info)
                    }
                } else {
                    do {
                        try FileHandle.standardOutput.write(contentsOf: data)
                    } catch {
                        throw VipsError(.io, "cannot write to standard output: \(error.localizedDescription)")
                    }
                }
                let milliseconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
                reporter.written(
                    job.item.input, output: job.output, width: width, height: height,
                    bytes: data.count, milliseconds: milliseconds)
            } catch {
                reporter.failed(job.item.input, error)
            }
        }
        writer?.finish()
        if !clashes.isEmpty {
            let names = clashes.count == 1 ? "1 output name" : "\(clashes.count) output names"
            var advice =
                "vipsload thumb: \(clashes.reduce(0) { $0 + $1.items.count }) inputs clash on \(names); none of them was written"
            if let suggestion = namer.suggestion(for: clashes) {
                advice += ". Separate them with --name '\(suggestion)'"
            }
            Terminal.err(advice)
        }
        reporter.finish(retries: pipeline.metrics.retries, shard: shard)
        return reporter.counts.failed > 0 ? 1 : 0
    }

    /// The worker's options: the decoder and geometry flags as given, and its memory cap.
    private static func workerArguments(_ parsed: ArgumentParser.Parsed, workerMemory: Int) -> [String] {
        var arguments = ["--worker-memory", String(workerMemory)]
        for name in ["max-pixels", "allow", "size", "fit", "gravity", "background", "format"] {
            if let value = parsed.value(name) { arguments += ["--\(name)", value] }
        }
        for name in ["strict", "keep-metadata", "animated"] where parsed.flag(name) { arguments.append("--\(name)") }
        return arguments
    }

    /// The jobs to run for `selected`: clashing and invalid inputs are reported
    /// as failed, up-to-date outputs as skipped (unless `force`).
    private static func plan(
        _ selected: [InputCollector.Item], namer: OutputNamer, clashing: [String: OutputNamer.Clash],
        settings: Settings, journal: ThumbJournal?, force: Bool, reporter: ThumbReporter
    ) -> [Job] {
        var runJobs: [Job] = []
        for item in selected {
            let output = settings.outputFolder == nil ? "-" : namer.name(for: item)
            if let clash = clashing[item.key] {
                let others = clash.items.filter { $0.key != item.key }.map(\.input).joined(separator: ", ")
                reporter.failed(
                    item.input, kind: "nameClash",
                    message: "\(clash.output) is also the name of \(others); neither is written")
                continue
            }
            let source: ImageSource
            var identity: String
            var sourceModified: Int64?
            switch item.location {
            case .invalidURL:
                reporter.failed(item.input, kind: VipsError.Kind.invalidArgument.rawValue, message: "not a valid URL")
                continue
            case .standardInput:
                source = .data(FileHandle.standardInput.readDataToEndOfFile(), identifier: "stdin")
                identity = ""
            case .url(let url):
                source = .url(url)
                identity = "url:" + StableHash.hex(url.absoluteString, digits: 16)
            case .file(let path):
                source = .file(path)
                identity = "file:" + StableHash.hex(URL(fileURLWithPath: path).standardizedFileURL.path, digits: 16)
                var info = stat()
                if stat(path, &info) == 0 {
                    sourceModified = ThumbJournal.nanoseconds(info.st_mtim)
                    identity += ":\(info.st_size):\(sourceModified ?? 0)"
                }
            }
            if !force, !identity.isEmpty, let journal, let folder = settings.outputFolder,
                journal.isUpToDate(
                    output: output, in: folder, options: settings.fingerprint, input: identity,
                    sourceModified: sourceModified)
            {
                reporter.skipped(item.input, output: output, reason: "up to date")
                continue
            }
            runJobs.append(Job(item: item, output: output, identity: identity, source: source))
        }
        return runJobs
    }

    /// The pipeline for every input: no memory cache (each image is needed
    /// once), `--retries`, the disk cache in `cache.folder` when given and usable.
    private static func makePipeline(
        _ settings: Settings, retries: Int, headers: [String: String], timeoutSeconds: Int,
        cache: (folder: String, sizeLimit: Int)?
    ) -> ImagePipeline {
        var configuration = ImagePipeline.Configuration(
            decodeConcurrency: settings.jobs, memoryCache: nil,
            decodeOptions: settings.decodeOptions)
        // --timeout (at least 1, checked when parsed): a decode in this process is stopped cooperatively.
        try? configuration.setDecodeTimeLimit(.seconds(timeoutSeconds))
        configuration.http.retryPolicy = HTTPRetryPolicy(maxRetries: retries)
        configuration.http.headers.merge(headers) { _, given in given }
        if let cache {
            do throws(VipsError) {
                configuration.dataCache = try DiskCache(
                    directory: URL(fileURLWithPath: cache.folder), sizeLimit: cache.sizeLimit)
            } catch {
                // The images can still be downloaded: say so and carry on uncached.
                Terminal.err("vipsload thumb: not caching downloads: \(error.message)")
            }
        }
        return ImagePipeline(configuration: configuration)
    }

    /// `--header 'Name: value'` fields; a name must be an HTTP token and the
    /// value one line.
    static func headerFields(_ given: [String]) throws(ArgumentParser.UsageError) -> [String: String] {
        var fields: [String: String] = [:]
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        for field in given {
            guard let colon = field.firstIndex(of: ":") else {
                throw ArgumentParser.UsageError(description: "--header takes 'Name: value', not '\(field)'")
            }
            let name = field[..<colon].trimmingCharacters(in: .whitespaces)
            let value = field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, name.allSatisfy(token.contains) else {
                throw ArgumentParser.UsageError(description: "--header: '\(name)' is not a valid header name")
            }
            guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                throw ArgumentParser.UsageError(description: "--header: the value of \(name) must be one line")
            }
            fields[name] = value
        }
        return fields
    }
}
