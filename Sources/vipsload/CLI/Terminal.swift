import Foundation
import VipsBench
import VipsLoad

/// Output helpers: stdout/stderr lines, JSON objects and a progress line that
/// is shown only when stderr is a terminal.
enum Terminal {
    static let stderrIsTerminal = isatty(STDERR_FILENO) == 1

    /// Writes `line` to stdout, with the credentials of any URL in it redacted.
    static func out(_ line: String) {
        FileHandle.standardOutput.write(Data((URLRedaction.redacted(line) + "\n").utf8))
    }

    /// Writes `line` to stderr, with the credentials of any URL in it redacted.
    static func err(_ line: String) {
        FileHandle.standardError.write(Data((URLRedaction.redacted(line) + "\n").utf8))
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

    /// A JSON object from ordered key/value pairs whose values are already JSON.
    static func jsonObject(_ pairs: [(String, String)]) -> String {
        "{" + pairs.map { "\(JSONText.string($0.0)): \($0.1)" }.joined(separator: ", ") + "}"
    }
}
