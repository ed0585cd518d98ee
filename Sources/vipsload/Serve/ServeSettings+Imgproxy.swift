import Foundation
import VipsCore
import VipsServe

/// imgproxy's configuration: the `IMGPROXY_*` variables `vipsload serve`
/// reads, one row each (`imgproxyVariables`), so an imgproxy deployment's
/// environment starts `serve` unchanged. A flag given on the command line
/// wins over its variable; a variable wins over the default.
///
/// A row's target is one of: the flag the variable stands for (its text,
/// checked and converted, becomes the flag's value), a field of the
/// configurations set after the flags are read, a variable read elsewhere
/// (the signing keys), one `serve` deliberately ignores (a warning naming
/// it), or one it does not support (an error naming it). A variable that is
/// set, starts with `IMGPROXY_` and is in no row is an error naming it too:
/// `serve` never starts with a configuration it would silently not follow.
extension ServeSettings {
    typealias UsageError = ArgumentParser.UsageError

    /// One `IMGPROXY_*` variable: its name (or a prefix ending in `_` for a
    /// family of them), what it means to `serve`, and where its value goes.
    struct Variable: Sendable {
        enum Target: Sendable {
            /// The value of `--FLAG` when the flag is not given: the variable's
            /// text turned into the flag's values (none: the flag is not set).
            case flag(String, @Sendable (_ text: String, _ name: String) throws(UsageError) -> [String])
            /// A field, set after the flags are read, unless `overriddenBy` (a flag) is given.
            case field(
                overriddenBy: String?, @Sendable (inout ServeCommand.Options, _ text: String) throws(UsageError) -> Void
            )
            /// Read by another part of the settings (the signing keys).
            case readElsewhere
            /// Deliberately ignored, with a warning saying why.
            case ignored(String)
            /// Known, not supported: `serve` refuses to start, saying why.
            case unsupported(String)
        }

        let name: String
        let target: Target
        /// The documented meaning (docs/serve.md's table).
        let meaning: String

        /// Whether `variable` is this row's (a prefix row covers its family).
        func covers(_ variable: String) -> Bool {
            name.hasSuffix("_") ? variable.hasPrefix(name) : variable == name
        }
    }

    /// What the environment says: the arguments with every variable's flag
    /// filled in where the command line left it out, the field rows to
    /// apply after the flags (`apply(_:to:)`), and the warnings.
    struct Environment {
        var parsed: ArgumentParser.Parsed
        var fields: [(name: String, text: String, set: (inout ServeCommand.Options, String) throws(UsageError) -> Void)]
        var warnings: [String]

        /// Sets the field rows' fields in `options`.
        func apply(to options: inout ServeCommand.Options) throws(UsageError) {
            for field in fields { try field.set(&options, field.text) }
            options.warnings += warnings
        }
    }

    /// Reads every set `IMGPROXY_*` variable by its row.
    ///
    /// - Throws: a usage error naming each variable that is not `serve`'s
    ///   or that `serve` does not support, or whose value does not parse.
    func imgproxyEnvironment() throws(UsageError) -> Environment {
        var result = Environment(parsed: parsed, fields: [], warnings: [])
        var unknown: [String] = []
        var unsupported: [String] = []
        for name in environment.keys.sorted() where name.hasPrefix("IMGPROXY_") {
            guard let text = variable(name) else { continue }
            let rows = imgproxyVariables.filter { $0.covers(name) }
            if rows.isEmpty { unknown.append(name) }
            for row in rows {
                try read(row, name: name, text: text, into: &result, unsupported: &unsupported)
            }
        }
        if !unknown.isEmpty {
            throw UsageError(
                description: "\(unknown.joined(separator: ", ")) \(unknown.count == 1 ? "is" : "are") set but "
                    + "\(unknown.count == 1 ? "means" : "mean") nothing to vipsload serve "
                    + "(docs/serve.md lists the imgproxy variables it reads and ignores)")
        }
        if !unsupported.isEmpty {
            throw UsageError(description: "not supported by vipsload serve: \(unsupported.joined(separator: "; "))")
        }
        return result
    }

    /// Reads one row of a set variable into `result`.
    private func read(
        _ row: Variable, name: String, text: String, into result: inout Environment, unsupported: inout [String]
    ) throws(UsageError) {
        switch row.target {
        case .flag(let flag, let convert):
            guard parsed.value(flag) == nil, !parsed.flag(flag) else { return }
            for value in try convert(text, name) {
                if value.isEmpty { result.parsed.flags.insert(flag) } else { result.parsed.set(flag, value) }
            }
        case .field(let flag, let set):
            if let flag, parsed.value(flag) != nil || parsed.flag(flag) { return }
            result.fields.append((name, text, set))
        case .readElsewhere:
            return
        case .ignored(let why):
            result.warnings.append("\(name) is ignored: \(why)")
        case .unsupported(let why):
            unsupported.append("\(name) (\(why))")
        }
    }

    // MARK: - The processing flags

    /// The presets and security options the flags give, into `urls`:
    /// `--preset`, `--presets-file`, `--only-presets`,
    /// `--allow-security-options`, and the server's security limits.
    static func applyProcessingFlags(
        _ parsed: ArgumentParser.Parsed, to urls: inout ProcessingURLParser
    ) throws(UsageError) {
        var definitions = parsed.values("preset")
        for path in parsed.values("presets-file") {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw UsageError(description: "--presets-file \(path): cannot be read")
            }
            definitions += String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).map(String.init)
        }
        if var prefix = parsed.value("path-prefix") {
            while prefix.hasSuffix("/") { prefix.removeLast() }
            guard prefix.isEmpty || prefix.hasPrefix("/"),
                !prefix.utf8.contains(where: { $0 < 0x21 || $0 == 0x7F || $0 == 0x3F || $0 == 0x23 })
            else {
                throw UsageError(description: "--path-prefix takes a path such as /img, not '\(prefix)'")
            }
            urls.pathPrefix = prefix
        }
        if let list = parsed.value("allowed-options") { urls.allowedOptions = Set(Self.list(list)) }
        urls.allowsSecurityOptions = parsed.flag("allow-security-options")
        urls.onlyPresets = parsed.flag("only-presets")
        do throws(VipsError) {
            urls.presets = try ProcessingPresets(definitions: definitions)
            try urls.presets.validated(allowsSecurityOptions: urls.allowsSecurityOptions)
        } catch {
            throw UsageError(description: "--preset: \(error.message)")
        }
        var limits = SecurityLimits()
        limits.maxSourceResolution = try megapixels(parsed, "max-src-resolution")
        if parsed.value("max-src-file-size") != nil {
            limits.maxSourceFileSize = try parsed.int("max-src-file-size", default: 0, in: 0...(1 << 50))
        }
        if parsed.value("max-animation-frames") != nil {
            limits.maxAnimationFrames = try parsed.int("max-animation-frames", default: 1, in: 1...1_000_000)
        }
        limits.maxAnimationFrameResolution = try megapixels(parsed, "max-animation-frame-resolution")
        urls.security = limits
    }

    /// `--FLAG MP`: a number of megapixels, 0 or more; nil when not given.
    private static func megapixels(_ parsed: ArgumentParser.Parsed, _ flag: String) throws(UsageError) -> Double? {
        guard let text = parsed.value(flag) else { return nil }
        guard let value = Double(text), value.isFinite, value >= 0, value <= 1e9 else {
            throw UsageError(description: "--\(flag) takes megapixels (a number, 0 or more), not '\(text)'")
        }
        return value
    }

    // MARK: - Converters

    /// The text as the flag's one value.
    static let same: @Sendable (String, String) throws(UsageError) -> [String] = {
        (text: String, _: String) throws(UsageError) -> [String] in [text]
    }

    /// Go's `strconv.ParseBool`, as imgproxy reads a boolean.
    static func bool(_ text: String, _ name: String) throws(UsageError) -> Bool {
        switch text.trimmingCharacters(in: .whitespaces) {
        case "1", "t", "T", "TRUE", "true", "True": return true
        case "0", "f", "F", "FALSE", "false", "False": return false
        default: throw UsageError(description: "\(name) takes a boolean (true or false), not '\(text)'")
        }
    }

    /// A boolean variable for a flag without a value: set when true.
    static let switchFlag: @Sendable (String, String) throws(UsageError) -> [String] = {
        (text: String, name: String) throws(UsageError) -> [String] in
        try bool(text, name) ? [""] : []
    }

    /// A whole number within `range`, as text for the flag (the flag checks its own range too).
    static func number(_ range: ClosedRange<Int>) -> @Sendable (String, String) throws(UsageError) -> [String] {
        { (text: String, name: String) throws(UsageError) -> [String] in [String(try int(text, name, range))] }
    }

    static func int(_ text: String, _ name: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
            throw UsageError(
                description:
                    "\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return value
    }

    /// A comma-separated list, each item trimmed, empty ones dropped.
    static func list(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// imgproxy's `IMGPROXY_BIND` (`host:port`, `:port` for every interface) as `--bind`'s half, or `--port`'s.
    static func bindPart(port: Bool) -> @Sendable (String, String) throws(UsageError) -> [String] {
        { (text: String, name: String) throws(UsageError) -> [String] in
            guard let colon = text.lastIndex(of: ":"), let number = Int(text[text.index(after: colon)...]),
                (0...65_535).contains(number)
            else {
                throw UsageError(description: "\(name) takes host:port (':8080' for every interface), not '\(text)'")
            }
            if port { return [String(number)] }
            var host = String(text[..<colon])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            return [host.isEmpty ? "0.0.0.0" : host]
        }
    }

    /// imgproxy's `IMGPROXY_ALLOWED_SOURCES` (URL prefixes such as
    /// `https://img.example.com/`) as `--allow-source` patterns; `local://`
    /// is dropped (the root allows local sources).
    static let allowedSources: @Sendable (String, String) throws(UsageError) -> [String] = {
        (text: String, name: String) throws(UsageError) -> [String] in
        var patterns: [String] = []
        for item in list(text) where !item.hasPrefix("local://") {
            do throws(VipsError) {
                _ = try SourcePattern(item)
            } catch {
                throw UsageError(
                    description: "\(name): '\(item)' is not a source pattern serve can follow "
                        + "([http[s]://][*.]host[:port][/], no path): \(error.message)")
            }
            patterns.append(item)
        }
        return patterns
    }

    /// A path to a readable file (the error names the variable, not the flag).
    static let readableFile: @Sendable (String, String) throws(UsageError) -> [String] = {
        (text: String, name: String) throws(UsageError) -> [String] in
        guard FileManager.default.isReadableFile(atPath: text) else {
            throw UsageError(description: "\(name): '\(text)' cannot be read")
        }
        return [text]
    }

    /// A folder's path.
    static let folder: @Sendable (String, String) throws(UsageError) -> [String] = {
        (text: String, name: String) throws(UsageError) -> [String] in
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: text, isDirectory: &isFolder), isFolder.boolValue else {
            throw UsageError(description: "\(name): '\(text)' is not a folder")
        }
        return [text]
    }

    /// Megapixels, 0 or more (imgproxy's `MegaInt` variables).
    static let megapixelText: @Sendable (String, String) throws(UsageError) -> [String] = {
        (text: String, name: String) throws(UsageError) -> [String] in
        guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite, value >= 0, value <= 1e9
        else { throw UsageError(description: "\(name) takes megapixels (a number, 0 or more), not '\(text)'") }
        return [String(value)]
    }

    /// imgproxy's log formats (pretty, structured, json, gcp) as `--log-format`'s.
    static let logFormat: @Sendable (String, String) throws(UsageError) -> [String] = {
        (text: String, name: String) throws(UsageError) -> [String] in
        switch text {
        case "pretty", "structured": return ["text"]
        case "json", "gcp": return ["json"]
        default: throw UsageError(description: "\(name) takes pretty, structured, json or gcp, not '\(text)'")
        }
    }

    // MARK: - The table

    /// Every `IMGPROXY_*` variable `serve` knows. docs/serve.md's table lists them.
    var imgproxyVariables: [Variable] {
        let environment = environment
        return [
            // Signing
            Variable(name: "IMGPROXY_KEY", target: .readElsewhere, meaning: "hex keys, comma-separated (--key)"),
            Variable(name: "IMGPROXY_SALT", target: .readElsewhere, meaning: "hex salts, comma-separated (--salt)"),
            Variable(
                name: "IMGPROXY_SIGNATURE_SIZE", target: .readElsewhere, meaning: "signature bytes (--signature-size)"),
            // Server
            Variable(
                name: "IMGPROXY_BIND", target: .flag("bind", Self.bindPart(port: false)),
                meaning: "host:port to listen on"),
            Variable(
                name: "IMGPROXY_BIND", target: .flag("port", Self.bindPart(port: true)), meaning: "(its port: --port)"),
            Variable(
                name: "IMGPROXY_NETWORK",
                target: .field(overriddenBy: nil) { (_: inout ServeCommand.Options, text: String) throws(UsageError) in
                    guard ["tcp", "tcp4", "tcp6"].contains(text) else {
                        throw UsageError(description: "IMGPROXY_NETWORK: serve listens on TCP only, not '\(text)'")
                    }
                }, meaning: "tcp only"),
            Variable(
                name: "IMGPROXY_TIMEOUT", target: .flag("timeout", Self.number(1...86_400)),
                meaning: "request deadline, s"),
            Variable(
                name: "IMGPROXY_DOWNLOAD_TIMEOUT", target: .flag("download-timeout", Self.number(1...86_400)),
                meaning: "source download deadline, s"),
            Variable(
                name: "IMGPROXY_READ_REQUEST_TIMEOUT", target: .flag("header-timeout", Self.number(0...86_400)),
                meaning: "request header deadline, s"),
            Variable(
                name: "IMGPROXY_KEEP_ALIVE_TIMEOUT", target: .flag("connection-timeout", Self.number(0...86_400)),
                meaning: "idle connection timeout, s"),
            Variable(
                name: "IMGPROXY_GRACEFUL_STOP_TIMEOUT", target: .flag("drain-timeout", Self.number(0...86_400)),
                meaning: "drain time after SIGTERM, s"),
            Variable(
                name: "IMGPROXY_WORKERS", target: .flag("jobs", Self.number(1...256)),
                meaning: "images processed at once"),
            Variable(
                name: "IMGPROXY_REQUESTS_QUEUE_SIZE",
                target: .field(overriddenBy: "queue") {
                    (options: inout ServeCommand.Options, text: String) throws(UsageError) in
                    let waiting = try Self.int(text, "IMGPROXY_REQUESTS_QUEUE_SIZE", 0...1_000_000)
                    // imgproxy: requests waiting beyond the workers, 0 for no limit (serve keeps its default then).
                    if waiting > 0 { options.server.queueLimit = options.pipeline.decodeConcurrency + waiting }
                }, meaning: "requests waiting beyond the workers (0: serve's default)"),
            Variable(
                name: "IMGPROXY_MAX_CLIENTS",
                target: .flag("max-connections") { (text: String, name: String) throws(UsageError) -> [String] in
                    let clients = try Self.int(text, name, 0...1_000_000)
                    return [String(clients == 0 ? 1_000_000 : clients)]
                }, meaning: "open connections at most (0: 1,000,000)"),
            Variable(
                name: "IMGPROXY_TTL", target: .flag("max-age", Self.number(0...315_360_000)), meaning: "max-age, s"),
            Variable(
                name: "IMGPROXY_USE_ETAG",
                target: .field(overriddenBy: nil) {
                    (options: inout ServeCommand.Options, text: String) throws(UsageError) in
                    if !(try Self.bool(text, "IMGPROXY_USE_ETAG")) {
                        // No origin revalidation by the client's tag; serve's own strong ETag stays (a warning says so).
                        options.server.forwardsEntityTagConditions = false
                        options.warnings.append(
                            "IMGPROXY_USE_ETAG=false: If-None-Match is not forwarded to origins, but serve still sends its strong ETag"
                        )
                    }
                }, meaning: "false: If-None-Match not forwarded to origins (serve always sends ETags)"),
            Variable(
                name: "IMGPROXY_LOG_FORMAT", target: .flag("log-format", Self.logFormat),
                meaning: "pretty, structured (text); json, gcp (json)"),
            Variable(
                name: "IMGPROXY_LOG_LEVEL",
                target: .flag("quiet") { (text: String, _: String) throws(UsageError) -> [String] in
                    ["error", "warn", "warning"].contains(text.lowercased()) ? [""] : []
                },
                meaning: "error or warn: no access log (--quiet)"),
            Variable(
                name: "IMGPROXY_PATH_PREFIX", target: .flag("path-prefix", Self.same), meaning: "URLs' path prefix"),
            Variable(
                name: "IMGPROXY_ALLOW_ORIGIN", target: .flag("allow-origin", Self.same),
                meaning: "Access-Control-Allow-Origin"),
            // Sources
            Variable(
                name: "IMGPROXY_LOCAL_FILESYSTEM_ROOT", target: .flag("root", Self.folder),
                meaning: "root of local:/// sources"),
            Variable(
                name: "IMGPROXY_ALLOWED_SOURCES", target: .flag("allow-source", Self.allowedSources),
                meaning: "allowed source hosts (without it, remote sources get 403)"),
            Variable(
                name: "IMGPROXY_ALLOW_PRIVATE_SOURCE_ADDRESSES",
                target: .flag("allow-private-sources", Self.switchFlag),
                meaning: "true: --allow-private-sources"),
            Variable(
                name: "IMGPROXY_ALLOW_LOOPBACK_SOURCE_ADDRESSES",
                target: .flag("allow-private-sources", Self.switchFlag),
                meaning: "true: --allow-private-sources"),
            Variable(
                name: "IMGPROXY_ALLOW_LINK_LOCAL_SOURCE_ADDRESSES",
                target: .flag("allow-private-sources", Self.switchFlag),
                meaning: "true: --allow-private-sources"),
            Variable(
                name: "IMGPROXY_MAX_REDIRECTS",
                target: .field(overriddenBy: nil) {
                    (options: inout ServeCommand.Options, text: String) throws(UsageError) in
                    options.pipeline.http.maxRedirects = try Self.int(text, "IMGPROXY_MAX_REDIRECTS", 0...100)
                }, meaning: "redirects a download follows"),
            Variable(
                name: "IMGPROXY_USER_AGENT",
                target: .field(overriddenBy: nil) { options, text in options.pipeline.http.headers["User-Agent"] = text
                },
                meaning: "User-Agent of downloads"),
            // Security
            Variable(
                name: "IMGPROXY_MAX_SRC_RESOLUTION", target: .flag("max-src-resolution", Self.megapixelText),
                meaning: "largest source, megapixels (422)"),
            Variable(
                name: "IMGPROXY_MAX_SRC_FILE_SIZE", target: .flag("max-src-file-size", Self.number(0...(1 << 50))),
                meaning: "largest source file, bytes (422; 0: none)"),
            Variable(
                name: "IMGPROXY_MAX_ANIMATION_FRAMES",
                target: .flag("max-animation-frames", Self.number(1...1_000_000)),
                meaning: "animation frames processed"),
            Variable(
                name: "IMGPROXY_MAX_ANIMATION_FRAME_RESOLUTION",
                target: .flag("max-animation-frame-resolution", Self.megapixelText),
                meaning: "largest animation frame, megapixels"),
            Variable(
                name: "IMGPROXY_ALLOW_SECURITY_OPTIONS", target: .flag("allow-security-options", Self.switchFlag),
                meaning: "URLs may set msr, msfs, maf, mafr"),
            // Presets
            Variable(
                name: "IMGPROXY_PRESETS",
                target: .flag("preset") { (text: String, _: String) throws(UsageError) -> [String] in
                    let separator = environment["IMGPROXY_PRESETS_SEPARATOR"].flatMap {
                        $0.isEmpty ? nil : $0
                    }
                    return text.components(separatedBy: separator ?? ",").filter {
                        !$0.trimmingCharacters(in: .whitespaces).isEmpty
                    }
                }, meaning: "presets, name=options, comma-separated"),
            Variable(
                name: "IMGPROXY_PRESETS_SEPARATOR", target: .readElsewhere, meaning: "IMGPROXY_PRESETS' separator (,)"),
            Variable(
                name: "IMGPROXY_PRESETS_PATH", target: .flag("presets-file", Self.readableFile),
                meaning: "a file of presets, one a line"),
            Variable(
                name: "IMGPROXY_ONLY_PRESETS", target: .flag("only-presets", Self.switchFlag),
                meaning: "URLs name presets only"),
            // Processing defaults
            Variable(
                name: "IMGPROXY_STRIP_METADATA",
                target: .field(overriddenBy: nil) {
                    (options: inout ServeCommand.Options, text: String) throws(UsageError) in
                    options.server.urls.defaults.stripMetadata = try Self.bool(text, "IMGPROXY_STRIP_METADATA")
                }, meaning: "strip_metadata's default (true)"),
            Variable(
                name: "IMGPROXY_QUALITY", target: .flag("quality", Self.same), meaning: "default quality (80)"),
            Variable(
                name: "IMGPROXY_FORMAT_QUALITY", target: .flag("format-quality", Self.same),
                meaning: "per-format qualities, jpeg=70,avif=40"),
            Variable(
                name: "IMGPROXY_PREFERRED_FORMATS", target: .flag("preferred-formats", Self.same),
                meaning: "formats kept or fallen back to (jpeg,png,gif)"),
            Variable(
                name: "IMGPROXY_AUTO_WEBP", target: .flag("auto-webp", Self.switchFlag), meaning: "WebP from Accept"),
            Variable(
                name: "IMGPROXY_ENFORCE_WEBP", target: .flag("enforce-webp", Self.switchFlag),
                meaning: "WebP from Accept, over the URL's format"),
            Variable(
                name: "IMGPROXY_AUTO_AVIF", target: .flag("auto-avif", Self.switchFlag), meaning: "AVIF from Accept"),
            Variable(
                name: "IMGPROXY_ENFORCE_AVIF", target: .flag("enforce-avif", Self.switchFlag),
                meaning: "AVIF from Accept, over the URL's format"),
            Variable(
                name: "IMGPROXY_AUTO_JXL", target: .flag("auto-jxl", Self.switchFlag), meaning: "JPEG XL from Accept"),
            Variable(
                name: "IMGPROXY_ENFORCE_JXL", target: .flag("enforce-jxl", Self.switchFlag),
                meaning: "JPEG XL from Accept, over the URL's format"),
            Variable(
                name: "IMGPROXY_ENABLE_CLIENT_HINTS", target: .flag("client-hints", Self.switchFlag),
                meaning: "DPR and Width client hints"),
            Variable(
                name: "IMGPROXY_STRIP_COLOR_PROFILE",
                target: .field(overriddenBy: nil) {
                    (options: inout ServeCommand.Options, text: String) throws(UsageError) in
                    options.server.output.stripColorProfile = try Self.bool(text, "IMGPROXY_STRIP_COLOR_PROFILE")
                }, meaning: "strip_color_profile's default (true)"),
            Variable(
                name: "IMGPROXY_KEEP_COPYRIGHT",
                target: .field(overriddenBy: nil) {
                    (options: inout ServeCommand.Options, text: String) throws(UsageError) in
                    options.server.output.keepCopyright = try Self.bool(text, "IMGPROXY_KEEP_COPYRIGHT")
                }, meaning: "keep_copyright's default (true)"),
            Variable(
                name: "IMGPROXY_WATERMARK_DATA", target: .readElsewhere, meaning: "the watermark, base64"),
            Variable(name: "IMGPROXY_WATERMARK_PATH", target: .readElsewhere, meaning: "the watermark's file"),
            Variable(name: "IMGPROXY_WATERMARK_URL", target: .readElsewhere, meaning: "the watermark's source URL"),
            Variable(
                name: "IMGPROXY_WATERMARK_OPACITY", target: .readElsewhere, meaning: "the watermark's opacity"),
            Variable(
                name: "IMGPROXY_USE_LAST_MODIFIED",
                target: .field(overriddenBy: nil) {
                    (options: inout ServeCommand.Options, text: String) throws(UsageError) in
                    options.server.usesLastModified = try Self.bool(text, "IMGPROXY_USE_LAST_MODIFIED")
                }, meaning: "Last-Modified and If-Modified-Since (serve: on unless false)"),
            Variable(
                name: "IMGPROXY_AUTO_ROTATE",
                target: .field(overriddenBy: nil) { (_: inout ServeCommand.Options, text: String) throws(UsageError) in
                    guard try Self.bool(text, "IMGPROXY_AUTO_ROTATE") else {
                        throw UsageError(
                            description:
                                "IMGPROXY_AUTO_ROTATE=false is not supported: serve always applies the EXIF orientation"
                        )
                    }
                }, meaning: "true only: serve always auto-rotates"),
            // Deliberately ignored: observability, tuning and debugging knobs that change no answer.
            Variable(
                name: "IMGPROXY_DEVELOPMENT_ERRORS_MODE",
                target: .ignored("serve's error bodies never carry internals"),
                meaning: "ignored"),
            Variable(
                name: "IMGPROXY_ENABLE_DEBUG_HEADERS", target: .ignored("serve sends no debug headers"),
                meaning: "ignored"),
            Variable(
                name: "IMGPROXY_PROMETHEUS_BIND", target: .ignored("serve's metrics are at /metrics on its own port"),
                meaning: "ignored"),
            Variable(
                name: "IMGPROXY_PROMETHEUS_NAMESPACE", target: .ignored("metrics are vipsload_*"), meaning: "ignored"),
            Variable(name: "IMGPROXY_SO_REUSEPORT", target: .ignored("one process listens"), meaning: "ignored"),
            Variable(name: "IMGPROXY_FREE_MEMORY_INTERVAL", target: .ignored("a Go runtime knob"), meaning: "ignored"),
            Variable(name: "IMGPROXY_LOG_MEM_STATS", target: .ignored("a Go runtime knob"), meaning: "ignored"),
            Variable(name: "IMGPROXY_VIPS_LEAK_CHECK", target: .ignored("a debugging knob"), meaning: "ignored"),
            Variable(name: "IMGPROXY_VIPS_CACHE_TRACE", target: .ignored("a debugging knob"), meaning: "ignored"),
            Variable(
                name: "IMGPROXY_CLIENT_KEEP_ALIVE_TIMEOUT", target: .ignored("the download client's own"),
                meaning: "ignored"),
            Variable(
                name: "IMGPROXY_WRITE_RESPONSE_TIMEOUT", target: .ignored("responses are sent within --timeout's work"),
                meaning: "ignored"),
            Variable(
                name: "IMGPROXY_DISABLE_SHRINK_ON_LOAD",
                target: .ignored("serve's shrink-on-load keeps the output exact"),
                meaning: "ignored"),
            Variable(
                name: "IMGPROXY_FAIL_ON_DEPRECATION", target: .ignored("nothing is deprecated"), meaning: "ignored"),
            Variable(
                name: "IMGPROXY_REPORT_DOWNLOADING_ERRORS", target: .ignored("no error reporter"), meaning: "ignored"),
            Variable(name: "IMGPROXY_REPORT_IO_ERRORS", target: .ignored("no error reporter"), meaning: "ignored"),
            Variable(name: "IMGPROXY_SENTRY_", target: .ignored("no error reporter"), meaning: "ignored"),
            Variable(name: "IMGPROXY_AIRBRAKE_", target: .ignored("no error reporter"), meaning: "ignored"),
            Variable(name: "IMGPROXY_BUGSNAG_", target: .ignored("no error reporter"), meaning: "ignored"),
            Variable(name: "IMGPROXY_HONEYBADGER_", target: .ignored("no error reporter"), meaning: "ignored"),
            Variable(name: "IMGPROXY_NEW_RELIC_", target: .ignored("no tracing"), meaning: "ignored"),
            Variable(name: "IMGPROXY_DATADOG_", target: .ignored("no tracing"), meaning: "ignored"),
            Variable(name: "IMGPROXY_OPEN_TELEMETRY_", target: .ignored("no tracing"), meaning: "ignored"),
            Variable(name: "IMGPROXY_CLOUD_WATCH_", target: .ignored("no tracing"), meaning: "ignored"),
            Variable(name: "IMGPROXY_SYSLOG_", target: .ignored("the log goes to stderr"), meaning: "ignored"),
            // Known and not supported: following them would change the URLs or the security answered.
            Variable(
                name: "IMGPROXY_MAX_RESULT_DIMENSION",
                target: .unsupported("results are refused over 8192 px a side, not scaled down"),
                meaning: "not supported"),
            Variable(
                name: "IMGPROXY_SECRET", target: .unsupported("no Authorization check"), meaning: "not supported"),
            Variable(
                name: "IMGPROXY_TRUSTED_SIGNATURES", target: .unsupported("every signature is checked"),
                meaning: "not supported"),
            Variable(
                name: "IMGPROXY_IGNORE_SSL_VERIFICATION", target: .unsupported("TLS is always verified"),
                meaning: "not supported"),
            Variable(
                name: "IMGPROXY_BASE_URL", target: .unsupported("source URLs are taken whole"), meaning: "not supported"
            ),
            Variable(
                name: "IMGPROXY_URL_REPLACEMENTS", target: .unsupported("source URLs are taken whole"),
                meaning: "not supported"),
            Variable(
                name: "IMGPROXY_BASE64_URL_INCLUDES_FILENAME", target: .unsupported("a base64 source is the URL only"),
                meaning: "not supported"),
            Variable(
                name: "IMGPROXY_ARGUMENTS_SEPARATOR",
                target: .field(overriddenBy: nil) { (_: inout ServeCommand.Options, text: String) throws(UsageError) in
                    guard text == ":" else {
                        throw UsageError(
                            description: "IMGPROXY_ARGUMENTS_SEPARATOR: serve's separator is ':', not '\(text)'")
                    }
                }, meaning: "':' only"),
            Variable(
                name: "IMGPROXY_ALLOWED_PROCESSING_OPTIONS", target: .flag("allowed-options", Self.same),
                meaning: "the option names URLs may use"),
            Variable(name: "IMGPROXY_ENV_", target: .unsupported("secrets are not fetched"), meaning: "not supported")
        ]
    }
}
