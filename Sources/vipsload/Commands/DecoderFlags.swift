import VipsCore

/// The decoder options shared by every command: `--strict`, `--max-pixels`, `--allow`.
enum DecoderFlags {
    static let valueOptions: Set<String> = ["max-pixels", "allow"]
    static let flagOptions: Set<String> = ["strict"]
    static let help = """
          --strict           fail on truncated or corrupt data instead of decoding what is there
          --max-pixels N     refuse images whose header declares more than N pixels (default 100000000)
          --allow LIST       also decode these formats, comma-separated: svg, pdf, jp2k, jxl, ppm
                             (off by default: libvips marks most of their loaders untrusted)
        """

    /// Formats `--allow` accepts beyond `ImageFormat.defaultAllowed`.
    static let optional: [ImageFormat] = [.svg, .pdf, .jp2k, .jxl, .ppm]

    static func options(_ parsed: ArgumentParser.Parsed) throws(ArgumentParser.UsageError) -> DecodeOptions {
        var options = DecodeOptions()
        options.strict = parsed.flag("strict")
        options.limits.maxPixelCount = try parsed.int(
            "max-pixels", default: options.limits.maxPixelCount, in: 1...Int(Int32.max))
        if let list = parsed.value("allow") {
            let known = Set(optional + ImageFormat.defaultAllowed)
            for name in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() })
            where !name.isEmpty {
                let format = ImageFormat(rawValue: name)
                guard known.contains(format) else {
                    throw ArgumentParser.UsageError(
                        description:
                            "--allow: unknown format '\(name)' (choose from \(optional.map(\.rawValue).joined(separator: ", ")))"
                    )
                }
                options.allowedFormats.insert(format)
            }
            // Safe to unblock process-wide: VipsCore calls the sniffed format's own
            // loader by name, so no other untrusted loader (ImageMagick's) can run.
            if !options.allowedFormats.isSubset(of: ImageFormat.defaultAllowed) {
                do {
                    try VipsRuntime.setUntrustedLoadersAllowed(true)
                } catch {
                    throw ArgumentParser.UsageError(description: "--allow: \(error.message)")
                }
            }
        }
        return options
    }
}
