import Foundation

/// Output helpers: stdout/stderr lines, JSON values and a progress line that
/// is shown only when stderr is a terminal.
enum Terminal {
    static let stderrIsTerminal = isatty(STDERR_FILENO) == 1

    static func out(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func err(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// Rewrites one progress line on stderr (terminal only).
    static func progress(_ text: String) {
        guard stderrIsTerminal else { return }
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + text).utf8))
    }

    /// Ends the progress line (terminal only).
    static func endProgress() {
        guard stderrIsTerminal else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }

    /// A JSON string literal.
    static func json(_ string: String) -> String {
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A JSON object from ordered key/value pairs whose values are already JSON.
    static func jsonObject(_ pairs: [(String, String)]) -> String {
        "{" + pairs.map { "\(json($0.0)): \($0.1)" }.joined(separator: ", ") + "}"
    }
}
