/// A small command-line parser: `--name value`, `--name=value`, flags, `--`,
/// and positional arguments, with usage errors that name the problem.
struct ArgumentParser {
    /// A usage error: printed with the command's usage line, exit status 2.
    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }

    /// The parsed arguments of one command.
    struct Parsed {
        var values: [String: String] = [:]
        var flags: Set<String> = []
        var positional: [String] = []
        var help = false

        func value(_ name: String) -> String? { values[name] }
        func flag(_ name: String) -> Bool { flags.contains(name) }

        /// An integer option within `range`, or `defaultValue` when absent.
        func int(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>) throws(UsageError) -> Int {
            guard let text = values[name] else { return defaultValue }
            guard let value = Int(text), range.contains(value) else {
                throw UsageError(description: "--\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
            }
            return value
        }

        /// An option restricted to `choices`, or `defaultValue` when absent.
        func choice(_ name: String, _ choices: [String], default defaultValue: String) throws(UsageError) -> String {
            guard let text = values[name] else { return defaultValue }
            guard choices.contains(text) else {
                throw UsageError(description: "--\(name) takes one of \(choices.joined(separator: ", ")), not '\(text)'")
            }
            return text
        }
    }

    /// Options that take a value.
    let valueOptions: Set<String>
    /// Options that are on/off.
    let flagOptions: Set<String>

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
            guard argument.hasPrefix("--") else { throw UsageError(description: "unknown option '\(argument)'") }
            var name = String(argument.dropFirst(2))
            var inlineValue: String?
            if let equals = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if valueOptions.contains(name) {
                if let inlineValue {
                    parsed.values[name] = inlineValue
                } else {
                    guard index < arguments.count else { throw UsageError(description: "--\(name) needs a value") }
                    parsed.values[name] = arguments[index]
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
}
