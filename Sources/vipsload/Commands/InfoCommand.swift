import VipsBench
import VipsCore
import VipsLoad

/// `vipsload info [--json] INPUT...`: one line per input, from a header probe.
enum InfoCommand {
    static let usage = """
        usage: vipsload info [--json] [--strict] [--max-pixels N] [--allow LIST]
                             [--isolate optin|all|none] [--timeout S] [--worker-memory MB] INPUT...
               vipsload info --system [--json]

        Prints each image's size (after EXIF orientation), format, bands, alpha,
        orientation and page count without decoding pixels. Folders are searched
        recursively for images. Errors are reported on stderr, as
        'vipsload info: INPUT: KIND: MESSAGE' (and as a JSON object with --json).

          --json             one JSON object per line on stdout
          --system           the CPUs and memory this process may use (affinity,
                             cgroup CPU quota and memory limit, memory pressure),
                             where each was read, and the defaults derived from them
        \(DecoderFlags.help)
        \(IsolationFlags.help)

        Exit status: 0 when every input was read, 1 when any failed, 2 on usage errors.
        """

    static func run(_ arguments: [String]) throws(ArgumentParser.UsageError) -> Int32 {
        let parser = ArgumentParser(
            valueOptions: DecoderFlags.valueOptions.union(IsolationFlags.valueOptions),
            flagOptions: DecoderFlags.flagOptions.union(["json", "system"]))
        let parsed = try parser.parse(arguments)
        if parsed.help { Terminal.out(usage); return 0 }
        if parsed.flag("system") {
            Terminal.out(SystemReport.text(json: parsed.flag("json")))
            if parsed.positional.isEmpty { return 0 }
        }
        guard !parsed.positional.isEmpty else { throw ArgumentParser.UsageError(description: "no INPUT given") }
        let decoder = ImageDecoder(options: try DecoderFlags.options(parsed))
        let isolation = try IsolationFlags.settings(parsed)
        // One worker: `info` reads its inputs one after another.
        let workers =
            isolation.scope == .none
            ? nil
            : WorkerPool(
                capacity: 1, timeoutSeconds: isolation.timeoutSeconds, workerMemory: isolation.workerMemory,
                workerArguments: workerArguments(parsed, workerMemory: isolation.workerMemory))
        defer { workers?.shutdown() }
        let json = parsed.flag("json")
        var failed = false
        for item in InputCollector.collect(parsed.positional).items {
            do {
                let info: ImageInfo
                let timing: (delays: [Int], loopCount: Int)?
                if let workers, isolation.isolates(IsolationFlags.sniff(path: item.input)) {
                    // A header probe in a worker; the animation timing (a decode) is left out.
                    info = try workers.info(path: item.input).get()
                    timing = nil
                } else {
                    info = try decoder.info(.file(item.input))
                    timing = json ? try decoder.animationTiming(.file(item.input)) : nil
                }
                Terminal.out(json ? jsonLine(item.input, info, timing: timing) : textLine(item.input, info))
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

    static func textLine(_ path: String, _ info: ImageInfo) -> String {
        "\(path): \(info.width)x\(info.height) \(info.format), \(info.bands) bands, "
            + "\(info.hasAlpha ? "alpha" : "no alpha"), orientation \(info.orientation), "
            + "\(info.pages) page\(info.pages == 1 ? "" : "s")"
    }

    /// An animation adds "frames", "delays" (ms) and "loop" (0 = forever).
    static func jsonLine(_ path: String, _ info: ImageInfo, timing: (delays: [Int], loopCount: Int)? = nil) -> String {
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
        return Terminal.jsonObject(fields)
    }
}
