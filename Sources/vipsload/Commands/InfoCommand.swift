import VipsBench
import VipsCore

/// `vipsload info [--json] INPUT...`: one line per input, from a header probe.
enum InfoCommand {
    static let usage = """
        usage: vipsload info [--json] [--strict] [--max-pixels N] [--allow LIST] INPUT...

        Prints each image's size (after EXIF orientation), format, bands, alpha,
        orientation and page count without decoding pixels. Folders are searched
        recursively for images.

          --json             one JSON object per line
        \(DecoderFlags.help)

        Exit status: 0 when every input was read, 1 when any failed, 2 on usage errors.
        """

    static func run(_ arguments: [String]) throws(ArgumentParser.UsageError) -> Int32 {
        let parser = ArgumentParser(valueOptions: DecoderFlags.valueOptions, flagOptions: DecoderFlags.flagOptions.union(["json"]))
        let parsed = try parser.parse(arguments)
        if parsed.help { Terminal.out(usage); return 0 }
        guard !parsed.positional.isEmpty else { throw ArgumentParser.UsageError(description: "no INPUT given") }
        let decoder = ImageDecoder(options: try DecoderFlags.options(parsed))
        let json = parsed.flag("json")
        var failed = false
        for item in InputCollector.collect(parsed.positional) {
            do {
                let info = try decoder.info(.file(item.input))
                let timing = json ? try decoder.animationTiming(.file(item.input)) : nil
                Terminal.out(json ? jsonLine(item.input, info, timing: timing) : textLine(item.input, info))
            } catch {
                failed = true
                if json {
                    Terminal.out(Terminal.jsonObject([
                        ("input", JSONText.string(item.input)),
                        ("error", Terminal.jsonObject([("kind", JSONText.string(error.kind.rawValue)),
                                                       ("message", JSONText.string(error.message(about: item.input)))])),
                    ]))
                } else {
                    Terminal.out("\(item.input): error: \(error.kind): \(error.message(about: item.input))")
                }
            }
        }
        return failed ? 1 : 0
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
            ("pages", String(info.pages)),
        ]
        if let timing {
            fields += [("frames", String(timing.delays.count)),
                       ("delays", "[" + timing.delays.map(String.init).joined(separator: ",") + "]"),
                       ("loop", String(timing.loopCount))]
        }
        return Terminal.jsonObject(fields)
    }
}
