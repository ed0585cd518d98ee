import VipsCore

/// imgproxy's presets: named lists of processing options a URL applies with
/// `preset:NAME1:NAME2` (`pr:`), configured by the server
/// (`IMGPROXY_PRESETS`, `IMGPROXY_PRESETS_PATH`).
///
/// A definition is `name=option/option/…`, as imgproxy writes it
/// (`thumb=rs:fill:200:200/q:80`); blank definitions and ones starting with
/// `#` are skipped. A preset named `default` is applied to every URL before
/// its own options. A preset may name other presets; one already being
/// applied is skipped (imgproxy's rule against recursion), so
/// `a=pr:b` with `b=pr:a` ends.
///
/// What a URL's presets set is part of its options' state, so the variant's
/// identity (`ProcessingOptions.canonicalSegments`, the cache keys and ETags)
/// is the expanded options, never a preset's name.
public struct ProcessingPresets: Sendable, Hashable {
    /// One option of a preset: its name and arguments (`rs`, `["fill", "200", "200"]`).
    public struct Option: Sendable, Hashable {
        /// The option's name, as written.
        public let name: String
        /// Its arguments, as written (`w:` has one empty argument).
        public let arguments: [String]

        /// The option `name` with `arguments`.
        public init(name: String, arguments: [String]) {
            self.name = name
            self.arguments = arguments
        }
    }

    /// The presets by name.
    public private(set) var presets: [String: [Option]] = [:]

    /// No presets.
    public init() {}

    /// The presets `definitions` define, in order (a later definition of a
    /// name replaces an earlier one, as imgproxy's map does).
    ///
    /// - Throws: `.invalidArgument` naming the definition: not
    ///   `name=options`, an empty name or value, a value that is not options
    ///   only. Whether the options themselves are valid is `validated()`'s.
    public init(definitions: [String]) throws(VipsError) {
        for definition in definitions {
            let text = Self.trimmed(definition)
            if text.isEmpty || text.hasPrefix("#") { continue }
            let parts = text.split(separator: "=", omittingEmptySubsequences: false)
            guard parts.count == 2 else {
                throw VipsError(.invalidArgument, "invalid preset '\(text)' (not name=options)")
            }
            let name = Self.trimmed(parts[0])
            guard !name.isEmpty else { throw VipsError(.invalidArgument, "empty preset name in '\(text)'") }
            let value = Self.trimmed(parts[1])
            guard !value.isEmpty else { throw VipsError(.invalidArgument, "empty preset value in '\(text)'") }
            var options: [Option] = []
            for segment in value.split(separator: "/", omittingEmptySubsequences: false) {
                let arguments = segment.split(separator: ":", omittingEmptySubsequences: false)
                guard arguments.count > 1 else {
                    throw VipsError(.invalidArgument, "invalid preset value in '\(text)' ('\(segment)' is no option)")
                }
                options.append(Option(name: String(arguments[0]), arguments: arguments.dropFirst().map(String.init)))
            }
            presets[name] = options
        }
    }

    /// The options of the preset `name`, nil when there is none.
    public subscript(name: String) -> [Option]? { presets[name] }

    /// Whether there are no presets.
    public var isEmpty: Bool { presets.isEmpty }

    /// The most options one preset may expand to, the presets it names included. 1,000.
    public static let maxExpandedOptions = 1_000

    /// Whether preset `name` expands (as `apply(presetNamed:)` would) to at most `budget` options.
    private func expands(_ name: String, applying: [String], within budget: inout Int) -> Bool {
        guard let preset = presets[name], !applying.contains(name) else { return true }
        for option in preset {
            budget -= 1
            if budget < 0 { return false }
            if option.name == "preset" || option.name == "pr" {
                for inner in option.arguments where !expands(inner, applying: applying + [name], within: &budget) {
                    return false
                }
            }
        }
        return true
    }

    /// `text` without leading and trailing spaces (imgproxy's `strings.Trim(s, " ")`).
    static func trimmed(_ text: some StringProtocol) -> String {
        let bytes = text.utf8.drop { $0 == UInt8(ascii: " ") }.reversed().drop { $0 == UInt8(ascii: " ") }
        return String(decoding: bytes.reversed(), as: UTF8.self)
    }

    /// The preset names, sorted.
    public var names: [String] { presets.keys.sorted() }

    /// Checks that every preset applies to imgproxy's default options
    /// (imgproxy's `validatePresets`), as a URL would apply it with security
    /// options allowed as `allowsSecurityOptions` says.
    ///
    /// - Throws: `.invalidArgument` naming the first preset (by name order)
    ///   that does not apply, with the option's error, or that expands to
    ///   more than `maxExpandedOptions` options (presets naming presets many
    ///   times over would make every URL that names it slow).
    public func validated(allowsSecurityOptions: Bool = false) throws(VipsError) {
        let context = ProcessingOptions.Context(presets: self, allowsSecurityOptions: allowsSecurityOptions)
        for name in names {
            var budget = Self.maxExpandedOptions
            guard expands(name, applying: [], within: &budget) else {
                throw VipsError(
                    .invalidArgument,
                    "error in preset '\(name)': it expands to more than \(Self.maxExpandedOptions) options")
            }
            var options = ProcessingOptions()
            var used: [String] = []
            do throws(ProcessingURLError) {
                try options.apply(presetNamed: name, context: context, applying: [], used: &used)
            } catch {
                throw VipsError(.invalidArgument, "error in preset '\(name)': \(error.message)")
            }
        }
    }
}

extension ProcessingOptions {
    /// What applying an option may depend on besides the option: the
    /// server's presets and whether security options are allowed.
    struct Context: Sendable {
        var presets = ProcessingPresets()
        var allowsSecurityOptions = false
    }

    /// Applies one option with `context`: `preset` (`pr`) and the security
    /// options here, every other option by `apply(_:_:)`. `applying` names the
    /// presets being applied (a preset among them is skipped); `used` collects
    /// every preset applied, in order (imgproxy's `UsedPresets`).
    mutating func apply(
        _ name: Substring, _ arguments: [Substring], context: Context, applying: [String], used: inout [String]
    ) throws(ProcessingURLError) {
        switch name {
        case "preset", "pr":
            for preset in arguments {
                try apply(presetNamed: String(preset), context: context, applying: applying, used: &used)
            }
        case _ where Self.securityOptionNames.contains(String(name)):
            guard context.allowsSecurityOptions else {
                throw ProcessingURLError(
                    .securityOptionsNotAllowed, "option \(name): security options are not allowed on this server")
            }
            try security.apply(OptionArguments(name: String(name), values: arguments))
        default:
            try apply(name, arguments)
        }
    }

    /// Applies the preset `name`'s options (nothing when it is among
    /// `applying`: imgproxy skips a preset that refers back to itself).
    ///
    /// - Throws: `.invalidOption` for a name that is no preset.
    mutating func apply(
        presetNamed name: String, context: Context, applying: [String], used: inout [String]
    ) throws(ProcessingURLError) {
        guard let preset = context.presets[name] else {
            throw ProcessingURLError(.invalidOption, "preset: unknown preset \(name.isEmpty ? "''" : name)")
        }
        if applying.contains(name) { return }
        used.append(name)
        for option in preset {
            try apply(
                Substring(option.name), option.arguments.map { Substring($0) }, context: context,
                applying: applying + [name], used: &used)
        }
    }

    /// The security options' names, long and short.
    static let securityOptionNames: Set<String> = [
        "max_src_resolution", "msr", "max_src_file_size", "msfs", "max_animation_frames", "maf",
        "max_animation_frame_resolution", "mafr"
    ]
}
