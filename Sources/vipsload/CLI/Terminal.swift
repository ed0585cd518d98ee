import Foundation
import VipsBench
import VipsLoad

/// Output helpers: stdout/stderr lines, JSON objects and a progress line that
/// is shown only when stderr is a terminal.
enum Terminal {
    static let stderrIsTerminal = isatty(STDERR_FILENO) == 1

    /// Writes `line` to stdout, with the credentials of any URL in it redacted.
    static func out(_ line: String) {
        write(URLRedaction.redacted(line) + "\n", to: STDOUT_FILENO)
    }

    /// Writes `line` to stderr, with the credentials of any URL in it redacted.
    static func err(_ line: String) {
        write(URLRedaction.redacted(line) + "\n", to: STDERR_FILENO)
    }

    /// Rewrites one progress line on stderr (terminal only).
    static func progress(_ text: String) {
        guard stderrIsTerminal else { return }
        write("\r\u{1B}[K" + text, to: STDERR_FILENO)
    }

    /// Ends the progress line (terminal only).
    static func endProgress() {
        guard stderrIsTerminal else { return }
        write("\r\u{1B}[K", to: STDERR_FILENO)
    }

    /// Writes `text` whole to `descriptor` (stdout or stderr). A stream that
    /// cannot take it (its reader gone, as in `vipsload info DIR | head`, with
    /// SIGPIPE ignored for the workers; or closed) loses the text and the
    /// command carries on: Foundation's `FileHandle.write(_:)` would stop the
    /// process with a crash report instead.
    static func write(_ text: String, to descriptor: Int32) {
        var text = text
        text.withUTF8 { bytes in
            guard var next = bytes.baseAddress else { return }
            var left = bytes.count
            while left > 0 {
                let written = Glibc.write(descriptor, next, left)
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { return }
                next += written
                left -= written
            }
        }
    }

    /// A JSON object from ordered key/value pairs whose values are already JSON.
    static func jsonObject(_ pairs: [(String, String)]) -> String {
        "{" + pairs.map { "\(JSONText.string($0.0)): \($0.1)" }.joined(separator: ", ") + "}"
    }
}
