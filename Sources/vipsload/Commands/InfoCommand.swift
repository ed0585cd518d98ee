import Foundation
import VipsBench
import VipsCore
import VipsLoad

/// `vipsload info [--json] INPUT...`: one line per input, from a header probe.
///
/// Files are probed where they are; `http(s)` URLs are loaded through an
/// `ImagePipeline` first, as `thumb` loads them (`DownloadFlags`: disk cache,
/// retries, header fields), and their bytes are probed.
enum InfoCommand {
    static let usage = """
        usage: vipsload info [--json] [--placeholder] [--strict] [--max-pixels N] [--allow LIST]
                             [-c DIR] [--cache-size MB] [-r N] [-H 'NAME: VALUE']...
                             [--isolate optin|all|none] [--timeout S] [--worker-memory MB] INPUT...|-
               vipsload info --system [--json]

        Prints each image's size (after EXIF orientation), format, bands, alpha,
        orientation and page count without decoding pixels. An input is a file, a
        folder (searched recursively for images), an http(s) URL (downloaded as
        'thumb' downloads it), or '-' for one image on standard input. Errors are
        reported on stderr, as 'vipsload info: INPUT: KIND: MESSAGE' (and as a
        JSON object with --json).

          --json             one JSON object per line on stdout
          --placeholder      also decode each image small (at most 100 pixels a side)
                             and print its BlurHash (4x3 components), ThumbHash
                             (base64) and average colour (linear light, #rrggbb[aa])
          --system           the CPUs and memory this process may use (affinity,
                             cgroup CPU quota and memory limit, memory pressure),
                             where each was read, and the defaults derived from them
        \(DownloadFlags.help)
        \(DecoderFlags.help)
        \(IsolationFlags.help)

        Exit status: 0 when every input was read, 1 when any failed, 2 on usage errors.
        """

    /// What probing one input needs.
    private struct Prober {
        let decoder: ImageDecoder
        let isolation: IsolationFlags.Settings
        let workers: WorkerPool?
        /// Loads URLs (nil when no input is one).
        let pipeline: ImagePipeline?
        /// Whether to read an animation's timing (a decode) too.
        let timing: Bool
        /// Whether to make a placeholder from a small decode too.
        let placeholder: Bool

        typealias Probe = (
            info: ImageInfo, timing: (delays: [Int], loopCount: Int)?, placeholder: ImagePlaceholder?
        )

        func probe(_ item: InputCollector.Item) async throws(VipsError) -> Probe {
            switch item.location {
            case .file(let path):
                return try await probe(.file(path), format: IsolationFlags.sniff(path: path))
            case .standardInput:
                let data = FileHandle.standardInput.readDataToEndOfFile()
                return try await probe(.data(data), format: ImageFormat.sniff(data.prefix(64)))
            case .invalidURL:
                throw VipsError(.invalidArgument, "not a valid URL")
            case .url(let url):
                let source = ImageSource.url(url)
                guard let pipeline else { throw VipsError(.internal, "no pipeline for \(source)") }
                let data = try await pipeline.data(for: ImageRequest(source: source))
                switch data.input {
                // A download's file is a temporary or cache file: messages name the URL instead.
                case .file(let path):
                    defer { withExtendedLifetime(data) {} }
                    return try await probe(
                        .file(path), format: IsolationFlags.sniff(path: path), name: source.description)
                case .data(let bytes):
                    return try await probe(
                        .data(bytes), format: ImageFormat.sniff(bytes.prefix(64)), name: source.description)
                }
            }
        }

        /// A header probe in a worker when `isolation` takes `format` (the
        /// animation timing, a decode, is left out there; the placeholder's
        /// small decode is the worker's too), else here. Messages call the
        /// input `name` when given (a download's URL).
        private func probe(
            _ input: ImageInput, format: ImageFormat?, name: String? = nil
        ) async throws(VipsError)
            -> Probe
        {
            if let workers, isolation.isolates(format) {
                let (path, data): (String?, Data)
                switch input {
                case .file(let file): (path, data) = (file, Data())
                case .data(let bytes): (path, data) = (nil, bytes)
                }
                let info = try workers.info(path: path, data: data, name: name).get()
                guard placeholder else { return (info, nil, nil) }
                let geometry = WorkerProtocol.Geometry(
                    size: Self.placeholderSize, mode: .fit, scale: 1, allowUpscale: false, keepMetadata: false)
                let bitmap: Bitmap
                switch try await workers.decode(path: path, data: data, name: name, geometry: geometry).get() {
                case .still(let still): bitmap = still
                case .animation(let animation):
                    guard let first = animation.frames.first else {
                        throw VipsError(.internal, "the worker sent an animation without frames")
                    }
                    bitmap = first
                }
                return (info, nil, try ImagePlaceholder(bitmap))
            }
            var decoder = decoder
            decoder.inputName = name
            do throws(VipsError) {
                let info = try decoder.info(input)
                let small = placeholder ? try decoder.decode(input, size: Self.placeholderSize, mode: .fit) : nil
                return (
                    info, timing ? try decoder.animationTiming(input) : nil, try small.map(ImagePlaceholder.init)
                )
            } catch {
                throw name.map { error.decodeError(naming: $0) } ?? error
            }
        }

        /// The small decode a placeholder is made from.
        static let placeholderSize = TargetSize.maxPixelSize(ImagePlaceholder.side)
    }

    static func run(_ arguments: [String]) async throws(ArgumentParser.UsageError) -> Int32 {
        let parser = ArgumentParser(
            valueOptions: DecoderFlags.valueOptions.union(IsolationFlags.valueOptions).union(
                DownloadFlags.valueOptions),
            flagOptions: DecoderFlags.flagOptions.union(["json", "system", "placeholder"]),
            shortOptions: DownloadFlags.shortOptions)
        let parsed = try parser.parse(arguments)
        if parsed.help { Terminal.out(usage); return 0 }
        if parsed.flag("system") {
            Terminal.out(SystemReport.text(json: parsed.flag("json")))
            if parsed.positional.isEmpty { return 0 }
        }
        guard !parsed.positional.isEmpty else { throw ArgumentParser.UsageError(description: "no INPUT given") }
        let decodeOptions = try DecoderFlags.options(parsed)
        let downloads = try DownloadFlags.settings(parsed)
        let isolation = try IsolationFlags.settings(parsed)
        let items = InputCollector.collect(parsed.positional, recognisingURLs: true).items
        if items.contains(where: { if case .standardInput = $0.location { true } else { false } }), items.count > 1 {
            throw ArgumentParser.UsageError(
                description: "'-' (an image on standard input) must be the only input; \(items.count) inputs given")
        }
        // One worker: `info` reads its inputs one after another.
        let workers =
            isolation.scope == .none
            ? nil
            : WorkerPool(
                capacity: 1, timeoutSeconds: isolation.timeoutSeconds, workerMemory: isolation.workerMemory,
                workerArguments: workerArguments(parsed, workerMemory: isolation.workerMemory))
        defer { workers?.shutdown() }
        var pipeline: ImagePipeline?
        if items.contains(where: { if case .url = $0.location { true } else { false } }) {
            var configuration = ImagePipeline.Configuration(
                decodeConcurrency: 1, memoryCache: nil, decodeOptions: decodeOptions)
            DownloadFlags.apply(downloads, to: &configuration, command: "info")
            pipeline = ImagePipeline(configuration: configuration)
        }
        let json = parsed.flag("json")
        let prober = Prober(
            decoder: ImageDecoder(options: decodeOptions), isolation: isolation, workers: workers,
            pipeline: pipeline, timing: json, placeholder: parsed.flag("placeholder"))
        var failed = false
        for item in items {
            do throws(VipsError) {
                let probe = try await prober.probe(item)
                Terminal.out(
                    json
                        ? jsonLine(item.input, probe.info, timing: probe.timing, placeholder: probe.placeholder)
                        : textLine(item.input, probe.info, placeholder: probe.placeholder))
            } catch {
                failed = true
                if json {
                    Terminal.out(
                        Terminal.jsonObject([
                            ("input", JSONText.string(item.input)), ("status", JSONText.string("failed")),
                            (
                                "error",
                                Terminal.jsonObject([
                                    ("kind", JSONText.string(error.kind.rawValue)),
                                    ("message", JSONText.string(error.message(about: item.input)))
                                ])
                            )
                        ]))
                }
                // As `thumb` does: every error on stderr, naming its input once.
                Terminal.err("vipsload info: \(item.input): \(error.kind): \(error.message(about: item.input))")
            }
        }
        return failed ? 1 : 0
    }

    /// The worker's options: the decoder flags as given, and its memory cap.
    private static func workerArguments(_ parsed: ArgumentParser.Parsed, workerMemory: Int) -> [String] {
        var arguments = ["--worker-memory", String(workerMemory)]
        for name in ["max-pixels", "allow"] {
            if let value = parsed.value(name) { arguments += ["--\(name)", value] }
        }
        if parsed.flag("strict") { arguments.append("--strict") }
        return arguments
    }

    static func textLine(_ path: String, _ info: ImageInfo, placeholder: ImagePlaceholder? = nil) -> String {
        "\(path): \(info.width)x\(info.height) \(info.format), \(info.bands) bands, "
            + "\(info.hasAlpha ? "alpha" : "no alpha"), orientation \(info.orientation), "
            + "\(info.pages) page\(info.pages == 1 ? "" : "s")"
            + (placeholder.map {
                ", blurhash \($0.blurHash), thumbhash \($0.thumbHashBase64), average \($0.averageColourHex)"
            } ?? "")
    }

    /// An animation adds "frames", "delays" (ms) and "loop" (0 = forever);
    /// a placeholder adds "placeholder" (`ImagePlaceholder.jsonObject`).
    static func jsonLine(
        _ path: String, _ info: ImageInfo, timing: (delays: [Int], loopCount: Int)? = nil,
        placeholder: ImagePlaceholder? = nil
    ) -> String {
        var fields: [(String, String)] = [
            ("input", JSONText.string(path)),
            ("width", String(info.width)),
            ("height", String(info.height)),
            ("format", JSONText.string(info.format.rawValue)),
            ("bands", String(info.bands)),
            ("hasAlpha", String(info.hasAlpha)),
            ("orientation", String(info.orientation)),
            ("pages", String(info.pages))
        ]
        if let timing {
            fields += [
                ("frames", String(timing.delays.count)),
                ("delays", "[" + timing.delays.map(String.init).joined(separator: ",") + "]"),
                ("loop", String(timing.loopCount))
            ]
        }
        if let placeholder { fields.append(("placeholder", placeholder.jsonObject)) }
        return Terminal.jsonObject(fields)
    }
}
