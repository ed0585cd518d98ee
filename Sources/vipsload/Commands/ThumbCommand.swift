import Dispatch
import Foundation
import VipsCore
import VipsLoad

/// `vipsload thumb`: a thumbnail of every input, written to a folder, in parallel.
///
/// Every input, local file, URL or standard input, goes through one
/// `ImagePipeline` (see `ThumbEngine`): no memory cache (each image is needed
/// once), `--jobs` decodes at once, downloads through the disk cache with
/// `--cache-dir` (which keeps the finished thumbnails too, `ThumbCache`) and
/// retried by `--retries`. Output names come from
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
                              [--force] [--shard K/N] [--shard-count N] [--json] [--placeholder] [--progress]
                              [-q] [-v] [--strict] [--max-pixels N] [--allow LIST]
                              [--isolate optin|all|none] [--timeout S] [--worker-memory MB] [INPUT...|-]

        Writes a thumbnail of each input (by default one that fits in 256×256 pixels,
        never enlarged) to DIR, named by the --name template. An input is a file, a folder (searched
        recursively for images), an http(s) URL, or '-' for one image on standard
        input. In a folder, a file named like an image (.jpg, .png, ...) is an input
        (one that is not an image fails), other files are skipped (-v lists them).
        Inputs are processed in parallel; a failed input is reported on stderr and
        the rest carry on. A rerun skips outputs that are up to date.

          -o, --out DIR         output folder (default ./thumbnails, made at the first
                                thumbnail written); '-' writes the thumbnail of a
                                single input to standard output
          -n, --name TEMPLATE   output name without its extension (default '%d/%s'):
        \(OutputNamer.placeholderHelp)
                                An output's name depends on its own input only. Two
                                inputs with one name are a clash: neither is written.
          -j, --jobs N          images decoded at once (default: the usable CPUs)
          -i, --input-list FILE also read inputs from FILE ('-' for standard input), one
                                per line; blank lines and lines starting with # are skipped
        \(DownloadFlags.help)
                                thumb keeps its finished thumbnails in --cache-dir too, keyed
                                by the source (a file's inode, size and time; a URL's
                                validators, after revalidating a stale original) and every
                                output option, so a run into a new --out decodes nothing
                                it made before (--force makes them again)
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
              --placeholder     (with --json) each object also has the thumbnail's BlurHash
                                (4x3 components), ThumbHash (base64) and average colour
                                (linear light, #rrggbb[aa]), from the thumbnail downscaled to
                                at most 100 pixels a side (an up-to-date output: from its file)
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

    static let shortOptions: [Character: String] = DownloadFlags.shortOptions.merging([
        "s": "size", "o": "out", "f": "format", "Q": "quality", "n": "name", "j": "jobs", "i": "input-list",
        "F": "force", "q": "quiet", "v": "verbose"
    ]) { own, _ in own }

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
        /// Whether each JSON object carries the thumbnail's placeholder (`--placeholder`).
        let placeholder: Bool
    }

    /// Every option of a run, checked.
    private struct Options {
        let settings: Settings
        let downloads: DownloadFlags.Settings
        let isolation: IsolationFlags.Settings
        let namer: OutputNamer
        let shard: Shard
        let reporting: ThumbReporter.Options
        let force: Bool
        /// `--input-list`, if given.
        let inputList: String?

        init(_ parsed: ArgumentParser.Parsed) throws(ArgumentParser.UsageError) {
            guard !parsed.positional.isEmpty || parsed.value("input-list") != nil else {
                throw ArgumentParser.UsageError(description: "no INPUT given")
            }
            let processing = try ProcessingFlags.settings(parsed)
            let jobs = try parsed.int("jobs", default: SystemResources.current.usableCPUs, in: 1...256)
            downloads = try DownloadFlags.settings(parsed)
            if parsed.flag("quiet"), parsed.flag("verbose") {
                throw ArgumentParser.UsageError(description: "--quiet and --verbose cannot be used together")
            }
            let decodeOptions = try DecoderFlags.options(parsed)
            isolation = try IsolationFlags.settings(parsed)
            let toStandardOutput = parsed.value("out") == "-"
            if toStandardOutput, parsed.flag("json") {
                throw ArgumentParser.UsageError(description: "--json and --out - both write to standard output")
            }
            if parsed.flag("placeholder"), !parsed.flag("json") {
                throw ArgumentParser.UsageError(description: "--placeholder is printed in --json objects: add --json")
            }
            namer = try OutputNamer(
                template: parsed.value("name") ?? OutputNamer.defaultTemplate,
                fileExtension: processing.format.fileExtension)
            shard = try Self.shard(parsed)
            inputList = parsed.value("input-list")
            if inputList == "-", parsed.positional.contains("-") {
                throw ArgumentParser.UsageError(
                    description: "standard input cannot be both the input list and an image ('-')")
            }
            force = parsed.flag("force")
            reporting = ThumbReporter.Options(
                json: parsed.flag("json"), quiet: parsed.flag("quiet"), verbose: parsed.flag("verbose"),
                progress: parsed.flag("progress"))
            let fingerprint =
                "\(processing.fingerprint) strict=\(decodeOptions.strict ? 1 : 0) "
                + "max-pixels=\(decodeOptions.limits.maxPixelCount) "
                + "allow=\(decodeOptions.allowedFormats.map(\.rawValue).sorted().joined(separator: ","))"
            settings = Settings(
                processing: processing,
                outputFolder: toStandardOutput ? nil : URL(fileURLWithPath: parsed.value("out") ?? "thumbnails"),
                jobs: jobs, decodeOptions: decodeOptions, fingerprint: fingerprint,
                placeholder: parsed.flag("placeholder"))
        }

        /// `--shard K/N`, or the shard the environment assigns (with `--shard-count`), or all.
        private static func shard(_ parsed: ArgumentParser.Parsed) throws(ArgumentParser.UsageError) -> Shard {
            if let text = parsed.value("shard") {
                if parsed.value("shard-count") != nil {
                    throw ArgumentParser.UsageError(
                        description: "--shard K/N already gives the count; drop --shard-count")
                }
                return try Shard.parse(text)
            }
            let count = try parsed.value("shard-count").map { _ throws(ArgumentParser.UsageError) in
                try parsed.int("shard-count", default: 1, in: 1...1_000_000)
            }
            return try Shard.fromEnvironment(ProcessInfo.processInfo.environment, shardCount: count) ?? .all
        }
    }

    /// The inputs of a run, once each, and the shard of them this process makes.
    private struct Selection {
        /// Every input (the same input named twice is processed once).
        let items: [InputCollector.Item]
        /// The inputs of this shard.
        let selected: [InputCollector.Item]
        /// Files found in folders that are not inputs.
        let skipped: [(path: String, reason: String)]
        /// Inputs that share an output name, over every input whatever the shard, so all shards agree.
        let clashes: [OutputNamer.Clash]
        /// Each clashing input's clash, by key.
        let clashing: [String: OutputNamer.Clash]
    }

    /// One thumbnail to make.
    private struct Job: Sendable {
        let item: InputCollector.Item
        /// The output path relative to the output folder ("-" for standard output).
        let output: String
        /// The input's identity in the journal.
        let identity: String
        let source: ImageSource
        /// A local file's identity for its thumbnail's key in the cache (see `ThumbCache`).
        var fileIdentity: String?
    }

    /// Where thumbnails go: a folder (written atomically, with a journal), or standard output.
    private struct Destination: Sendable {
        let writer: OutputWriter?
        let journal: ThumbJournal?
    }

    static func run(_ arguments: [String]) async throws(ArgumentParser.UsageError) -> Int32 {
        let parser = ArgumentParser(
            valueOptions: DecoderFlags.valueOptions.union(ProcessingFlags.valueOptions).union(
                IsolationFlags.valueOptions
            )
            .union(DownloadFlags.valueOptions)
            .union(["out", "jobs", "input-list", "name", "shard", "shard-count"]),
            flagOptions: DecoderFlags.flagOptions.union(ProcessingFlags.flagOptions)
                .union(["force", "json", "placeholder", "progress", "quiet", "verbose"]),
            shortOptions: shortOptions)
        let parsed = try parser.parse(arguments)
        if parsed.help { Terminal.out(usage); return 0 }
        let options = try Options(parsed)
        guard let selection = try select(parsed.positional, options) else { return 1 }
        let reporter = ThumbReporter(total: selection.selected.count, options: options.reporting)
        for (path, reason) in selection.skipped { reporter.ignored(path, reason: reason) }
        if options.reporting.verbose, options.shard.count > 1 {
            Terminal.err(
                "vipsload thumb: shard \(options.shard) (from \(options.shard.origin)): "
                    + "\(selection.selected.count) of \(selection.items.count) inputs")
        }
        let destination: Destination
        do throws(VipsError) {
            destination = try makeDestination(options.settings)
        } catch {
            Terminal.err("vipsload thumb: \(error.message)")
            return 1
        }
        let jobs = plan(selection, options, journal: destination.journal, reporter: reporter)
        let pipeline = makePipeline(options)
        let cache = (pipeline.configuration.dataCache as? DiskCache).map {
            ThumbCache(disk: $0, fingerprint: options.settings.fingerprint, reads: !options.force)
        }
        let workers =
            options.isolation.scope == .none
            ? nil
            : WorkerPool(
                capacity: options.settings.jobs, timeoutSeconds: options.isolation.timeoutSeconds,
                workerMemory: options.isolation.workerMemory,
                workerArguments: workerArguments(parsed, workerMemory: options.isolation.workerMemory))
        defer { workers?.shutdown() }
        var engine = makeEngine(pipeline, options, workers: workers)
        engine.cache = cache
        let inputs = jobs.map { job in
            ThumbEngine.Input(source: job.source, cacheKey: job.fileIdentity.flatMap { cache?.key(fileIdentity: $0) })
        }
        await engine.run(inputs) { [settings = options.settings] index, made, started in
            finish(
                jobs[index], made, started: started, settings: settings, into: destination, cache: cache,
                reporter: reporter)
        }
        destination.writer?.finish()
        reportClashes(selection.clashes, namer: options.namer)
        reporter.finish(retries: pipeline.metrics.retries, decodes: engine.decodeCount, shard: options.shard)
        return reporter.counts.failed > 0 ? 1 : 0
    }

    /// The inputs named on the command line and in `--input-list`, collected
    /// and sharded; nil (reported) when the input list cannot be read.
    private static func select(
        _ positional: [String], _ options: Options
    ) throws(ArgumentParser.UsageError) -> Selection? {
        var inputs = positional
        if let list = options.inputList {
            do throws(VipsError) {
                inputs += try InputCollector.readList(list)
            } catch {
                Terminal.err("vipsload thumb: \(error.message)")
                return nil
            }
        }
        var seen: Set<String> = []
        let collection = InputCollector.collect(
            inputs, recognisingURLs: true, skipping: options.settings.outputFolder)
        let items = collection.items.filter { seen.insert($0.key).inserted }
        if items.contains(where: { if case .standardInput = $0.location { true } else { false } }), items.count > 1 {
            throw ArgumentParser.UsageError(
                description: "'-' (an image on standard input) must be the only input; \(items.count) inputs given")
        }
        if options.settings.outputFolder == nil, items.count != 1 {
            throw ArgumentParser.UsageError(
                description:
                    "--out - writes the thumbnail of a single input to standard output; \(items.count) inputs given")
        }
        let clashes = options.namer.clashes(
            items.filter { if case .invalidURL = $0.location { false } else { true } })
        return Selection(
            items: items,
            selected: items.filter {
                if case .standardInput = $0.location { true } else { options.shard.contains($0.key) }
            },
            skipped: collection.skipped, clashes: clashes,
            clashing: Dictionary(
                clashes.flatMap { clash in clash.items.map { ($0.key, clash) } },
                uniquingKeysWith: { first, _ in first }))
    }

    /// The output folder's writer and journal; neither for standard output.
    private static func makeDestination(_ settings: Settings) throws(VipsError) -> Destination {
        guard let folder = settings.outputFolder else { return Destination(writer: nil, journal: nil) }
        return Destination(writer: try OutputWriter(folder: folder), journal: ThumbJournal(folder: folder))
    }

    /// Encodes one input's result (a stored thumbnail is written as it is)
    /// and writes it (folder or standard output), then reports it; an encoded
    /// thumbnail is stored in `cache` when it has a key there.
    private static func finish(
        _ job: Job, _ made: ThumbEngine.Made, started: UInt64, settings: Settings,
        into destination: Destination, cache: ThumbCache?, reporter: ThumbReporter
    ) {
        let processing = settings.processing
        do throws(VipsError) {
            let width: Int, height: Int, data: Data
            var fromCache = false
            // With --placeholder: the decoded thumbnail's, or a stored one's from its bytes decoded small.
            var placeholder: ImagePlaceholder?
            switch made {
            case .stored(let stored):
                // Its header is read (no pixels are decoded) for the report.
                let info = try? ImageDecoder().info(.data(stored))
                (width, height, data, fromCache) = (info?.width ?? 0, info?.height ?? 0, stored, true)
                if settings.placeholder { placeholder = storedPlaceholder(.data(stored)) }
            case .decoded(let result, let storeKey):
                let output = try result.get()
                (width, height, data) = try encode(output, processing)
                // Only an encoded thumbnail is stored: an error never is.
                if let storeKey { cache?.store(data, for: storeKey) }
                if settings.placeholder {
                    switch output {
                    case .still(let bitmap): placeholder = try ImagePlaceholder(bitmap)
                    case .animation(let animation): placeholder = try animation.frames.first.map(ImagePlaceholder.init)
                    }
                }
            }
            if let writer = destination.writer {
                let info = try writer.write(data, to: job.output)
                if !job.identity.isEmpty {
                    destination.journal?.record(
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
                bytes: data.count, milliseconds: milliseconds, fromCache: fromCache, placeholder: placeholder)
        } catch {
            reporter.failed(job.item.input, error)
        }
    }

    /// A decoded thumbnail's size and bytes, encoded as the options say.
    private static func encode(
        _ output: ThumbEngine.Output, _ processing: ProcessingFlags.Settings
    ) throws(VipsError) -> (width: Int, height: Int, data: Data) {
        switch output {
        case .still(let bitmap):
            let data = try ImageEncoder().encode(
                bitmap, as: processing.format, keepingMetadata: processing.keepMetadata,
                background: processing.background
            ).data
            return (bitmap.width, bitmap.height, data)
        case .animation(let animation):
            let data = try ImageEncoder().encode(animation, as: processing.format).data
            return (animation.frames.first?.width ?? 0, animation.frames.first?.height ?? 0, data)
        }
    }

    /// After the run: how many inputs clashed, and a template that separates them.
    private static func reportClashes(_ clashes: [OutputNamer.Clash], namer: OutputNamer) {
        guard !clashes.isEmpty else { return }
        let names = clashes.count == 1 ? "1 output name" : "\(clashes.count) output names"
        var advice =
            "vipsload thumb: \(clashes.reduce(0) { $0 + $1.items.count }) inputs clash on \(names); none of them was written"
        if let suggestion = namer.suggestion(for: clashes) {
            advice += ". Separate them with --name '\(suggestion)'"
        }
        Terminal.err(advice)
    }

    /// The worker's options: the decoder and geometry flags as given, and its
    /// memory cap (`--animated` and `--keep-metadata` travel in each request).
    private static func workerArguments(_ parsed: ArgumentParser.Parsed, workerMemory: Int) -> [String] {
        var arguments = ["--worker-memory", String(workerMemory)]
        for name in ["max-pixels", "allow", "size", "fit", "gravity", "background", "format"] {
            if let value = parsed.value(name) { arguments += ["--\(name)", value] }
        }
        if parsed.flag("strict") { arguments.append("--strict") }
        return arguments
    }

    /// The jobs to run for the selected inputs: clashing and invalid inputs
    /// are reported as failed, up-to-date outputs as skipped (unless `--force`).
    private static func plan(
        _ selection: Selection, _ options: Options, journal: ThumbJournal?, reporter: ThumbReporter
    ) -> [Job] {
        let settings = options.settings
        var runJobs: [Job] = []
        for item in selection.selected {
            let output = settings.outputFolder == nil ? "-" : options.namer.name(for: item)
            if let clash = selection.clashing[item.key] {
                let others = clash.items.filter { $0.key != item.key }.map(\.input).joined(separator: ", ")
                reporter.failed(
                    item.input, kind: "nameClash",
                    message: "\(clash.output) is also the name of \(others); neither is written")
                continue
            }
            let source: ImageSource
            var identity: String
            var sourceModified: Int64?
            var fileIdentity: String?
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
                    fileIdentity = ThumbCache.identity(ofFile: path, info)
                }
            }
            if !options.force, !identity.isEmpty, let journal, let folder = settings.outputFolder,
                journal.isUpToDate(
                    output: output, in: folder, options: settings.fingerprint, input: identity,
                    sourceModified: sourceModified)
            {
                reporter.skipped(
                    item.input, output: output, reason: "up to date",
                    placeholder: settings.placeholder
                        ? storedPlaceholder(.file(folder.appendingPathComponent(output).path)) : nil)
                continue
            }
            runJobs.append(
                Job(item: item, output: output, identity: identity, source: source, fileIdentity: fileIdentity))
        }
        return runJobs
    }

    /// The placeholder of a thumbnail already made (an up-to-date output's
    /// file, or bytes from the `--cache-dir` cache), decoded small; nil when
    /// it cannot be read (the output stays good: the placeholder is extra
    /// information, not the job). The thumbnail is VipsLoad's own, so the
    /// default decoder reads it (`--allow` restricts inputs, not outputs).
    private static func storedPlaceholder(_ thumbnail: ImageInput) -> ImagePlaceholder? {
        try? ImagePlaceholder(
            ImageDecoder().decode(thumbnail, size: .maxPixelSize(ImagePlaceholder.side), mode: .fit))
    }

    /// The pipeline for every input: no memory cache (each image is needed
    /// once), `--jobs` decodes at once, `--timeout`, and the download flags.
    private static func makePipeline(_ options: Options) -> ImagePipeline {
        var configuration = ImagePipeline.Configuration(
            decodeConcurrency: options.settings.jobs, memoryCache: nil,
            decodeOptions: options.settings.decodeOptions)
        // --timeout (at least 1, checked when parsed): a decode in this process is stopped cooperatively.
        try? configuration.setDecodeTimeLimit(.seconds(options.isolation.timeoutSeconds))
        DownloadFlags.apply(options.downloads, to: &configuration, command: "thumb")
        return ImagePipeline(configuration: configuration)
    }

    /// The engine that loads every job's source: the request each gets
    /// (size, mode, metadata), and the workers that take the isolated ones.
    private static func makeEngine(_ pipeline: ImagePipeline, _ options: Options, workers: WorkerPool?) -> ThumbEngine {
        let processing = options.settings.processing
        var engine = ThumbEngine(
            pipeline: pipeline, animated: processing.animated, keepsMetadata: processing.keepMetadata,
            window: options.settings.jobs * 2 + 8
        ) { source in
            ImageRequest(
                source: source, size: processing.size, mode: processing.mode,
                options: processing.keepMetadata ? [.keepMetadata] : [])
        }
        if let workers {
            let isolation = options.isolation
            engine.isolation = ThumbEngine.Isolation(workers: workers) { isolation.isolates($0) }
        }
        return engine
    }
}
