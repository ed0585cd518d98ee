import Foundation
import VipsBench
import VipsLoad

/// Output helpers: stdout/stderr lines, JSON objects and a progress line that
/// is shown only when stderr is a terminal.
enum Terminal {
    static let stderrIsTerminal = isatty(STDERR_FILENO) == 1

    /// Writes `line` to stdout, with the credentials of any URL in it redacted.
    static func out(_ line: String) {
        write(URLRedaction.redacted(line) + "\n", to: .standardOutput)
    }

    /// Writes `line` to stderr, with the credentials of any URL in it redacted.
    static func err(_ line: String) {
        write(URLRedaction.redacted(line) + "\n", to: .standardError)
    }

    /// Rewrites one progress line on stderr (terminal only).
    static func progress(_ text: String) {
        guard stderrIsTerminal else { return }
        write("\r\u{1B}[K" + text, to: .standardError)
    }

    /// Ends the progress line (terminal only).
    static func endProgress() {
        guard stderrIsTerminal else { return }
        write("\r\u{1B}[K", to: .standardError)
    }

    /// Writes `text` to `stream` (stdout or stderr) with Foundation's throwing
    /// write. A stream that cannot take it (its reader gone, as in `vipsload
    /// info DIR | head` with SIGPIPE ignored for the workers; or closed) loses
    /// the text and the command carries on: the non-throwing
    /// `FileHandle.write(_:)` would stop the process with a crash report instead.
    static func write(_ text: String, to stream: FileHandle) {
        try? stream.write(contentsOf: Data(text.utf8))
    }

    /// A JSON object from ordered key/value pairs whose values are already JSON.
    static func jsonObject(_ pairs: [(String, String)]) -> String {
        "{" + pairs.map { "\(JSONText.string($0.0)): \($0.1)" }.joined(separator: ", ") + "}"
    }
}
