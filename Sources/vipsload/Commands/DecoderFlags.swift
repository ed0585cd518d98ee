import VipsCore

/// The decoder options shared by every command: `--strict`, `--max-pixels`.
enum DecoderFlags {
    static let valueOptions: Set<String> = ["max-pixels"]
    static let flagOptions: Set<String> = ["strict"]
    static let help = """
          --strict           fail on truncated or corrupt data instead of decoding what is there
          --max-pixels N     refuse images whose header declares more than N pixels (default 100000000)
        """

    static func options(_ parsed: ArgumentParser.Parsed) throws(ArgumentParser.UsageError) -> DecodeOptions {
        var options = DecodeOptions()
        options.strict = parsed.flag("strict")
        options.limits.maxPixelCount = try parsed.int("max-pixels", default: options.limits.maxPixelCount, in: 1...Int(Int32.max))
        return options
    }
}
