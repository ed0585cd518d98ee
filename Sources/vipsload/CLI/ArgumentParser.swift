/// A small command-line parser: `--name value`, `--name=value`, short
/// aliases (`-s 256`, `-s256`, `-qv` for flags), `--`, and positional
/// arguments (`-` alone is one: standard input), with usage errors that name
/// the problem.
struct ArgumentParser {
    /// A usage error: printed with the command's usage line, exit status 2.
    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }

    /// The parsed arguments of one command.
    struct Parsed {
        var values: [String: String] = [:]
        /// Every value of each option, in order (for repeatable options; `values` keeps the last).
        var allValues: [String: [String]] = [:]
        var flags: Set<String> = []
        var positional: [String] = []
        var help = false

        func value(_ name: String) -> String? { values[name] }
        /// Every value given for a repeatable option, in order.
        func values(_ name: String) -> [String] { allValues[name] ?? [] }
        func flag(_ name: String) -> Bool { flags.contains(name) }

        mutating func set(_ name: String, _ value: String) {
            values[name] = value
            allValues[name, default: []].append(value)
        }

        /// An integer option within `range`, or `defaultValue` when absent.
        func int(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>) throws(UsageError) -> Int {
            guard let text = values[name] else { return defaultValue }
            guard let value = Int(text), range.contains(value) else {
                throw UsageError(
                    description:
                        "--\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
            }
            return value
        }

        /// An option restricted to `choices`, or `defaultValue` when absent.
        func choice(_ name: String, _ choices: [String], default defaultValue: String) throws(UsageError) -> String {
            guard let text = values[name] else { return defaultValue }
            guard choices.contains(text) else {
                throw UsageError(
                    description: "--\(name) takes one of \(choices.joined(separator: ", ")), not '\(text)'")
            }
            return text
        }
    }

    /// Options that take a value.
    let valueOptions: Set<String>
    /// Options that are on/off.
    let flagOptions: Set<String>
    /// Single-letter aliases of long options (`"s": "size"`).
    var shortOptions: [Character: String] = [:]

    init(valueOptions: Set<String>, flagOptions: Set<String>, shortOptions: [Character: String] = [:]) {
        self.valueOptions = valueOptions
        self.flagOptions = flagOptions
        self.shortOptions = shortOptions
    }

    func parse(_ arguments: [String]) throws(UsageError) -> Parsed {
        var parsed = Parsed()
        var index = 0
        var onlyPositional = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositional || !argument.hasPrefix("-") || argument == "-" {
                parsed.positional.append(argument)
                continue
            }
            if argument == "--" { onlyPositional = true; continue }
            if argument == "-h" || argument == "--help" { parsed.help = true; continue }
            guard argument.hasPrefix("--") else {
                index = try parseShort(argument, arguments, index, into: &parsed)
                continue
            }
            var name = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if valueOptions.contains(name) {
                if let inlineValue {
                    parsed.set(name, inlineValue)
                } else {
                    guard index < arguments.count else { throw UsageError(description: "--\(name) needs a value") }
                    parsed.set(name, arguments[index])
                    index += 1
                }
            } else if flagOptions.contains(name) {
                guard inlineValue == nil else { throw UsageError(description: "--\(name) takes no value") }
                parsed.flags.insert(name)
            } else {
                throw UsageError(description: "unknown option '--\(name)'")
            }
        }
        return parsed
    }

    /// `-x VALUE`, `-xVALUE` or a cluster of flags (`-qv`); returns the next index.
    private func parseShort(
        _ argument: String, _ arguments: [String], _ start: Int,
        into parsed: inout Parsed
    ) throws(UsageError) -> Int {
        var index = start
        var letters = Substring(argument.dropFirst())
        while let letter = letters.first {
            letters = letters.dropFirst()
            guard let name = shortOptions[letter] else { throw UsageError(description: "unknown option '-\(letter)'") }
            if valueOptions.contains(name) {
                if !letters.isEmpty {
                    parsed.set(name, String(letters.hasPrefix("=") ? letters.dropFirst() : letters))
                } else {
                    guard index < arguments.count else {
                        throw UsageError(description: "-\(letter) (--\(name)) needs a value")
                    }
                    parsed.set(name, arguments[index])
                    index += 1
                }
                return index
            }
            parsed.flags.insert(name)
        }
        return index
    }
}
