import Dispatch
import Foundation
import VipsBench
import VipsServe

/// `vipsload serve`'s log: one access-log line per request and the server's
/// events on stderr, as text or (`--log-format json`) one JSON object per
/// line. The server calls it on its network threads; lines are formatted and
/// written on a serial queue of their own, so a slow stderr never holds up a
/// network thread.
final class ServeLog: ImageServerLogging {
    enum Format: String {
        case text
        case json
    }

    let format: Format
    /// Whether each request gets a line (`--quiet` leaves only the events).
    let logsRequests: Bool
    private let queue = DispatchQueue(label: "vipsload-serve-log", qos: .utility)

    init(format: Format, logsRequests: Bool) {
        self.format = format
        self.logsRequests = logsRequests
    }

    func request(_ entry: AccessLogEntry) {
        let format = format
        queue.async {
            Self.write(format == .json ? entry.json : entry.text)
        }
    }

    func event(_ message: String) {
        // The server's "listening on http://…" line, as it is and now, in either format (`writeNow`).
        if message.hasPrefix("listening on ") { return writeNow(message) }
        let format = format
        let time = Date()
        queue.async {
            switch format {
            case .text:
                Self.write("vipsload serve: \(message)")
            case .json:
                Self.write(
                    Terminal.jsonObject([
                        (
                            "time",
                            JSONText.string(Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(time))
                        ),
                        ("event", JSONText.string(message))
                    ]))
            }
        }
    }

    /// A line written now, bypassing the queue (the "listening on" line, which
    /// scripts wait for before the first request).
    func writeNow(_ line: String) {
        queue.sync { Self.write(line) }
    }

    /// Waits until every line so far is written.
    func flush() {
        queue.sync {}
    }

    private static func write(_ line: String) {
        Terminal.write(line + "\n", to: .standardError)
    }
}
