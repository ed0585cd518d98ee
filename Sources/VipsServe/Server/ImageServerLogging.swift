import Foundation

/// Where an `ImageServer` reports: one entry per request, and its own events.
///
/// The server never prints. Both methods are called on the server's network
/// threads, so they must return at once: hand the entry to a queue (and
/// format it there), never write to a pipe or file inline.
public protocol ImageServerLogging: Sendable {
    /// Whether `request(_:)` is wanted at all: when false the server does
    /// not even make the entries. Default true.
    var logsRequests: Bool { get }
    /// One finished request.
    func request(_ entry: AccessLogEntry)
    /// A server event in one sentence: listening (`listening on
    /// http://ADDRESS:PORT`, once, on the thread that made the server, before
    /// `ImageServer.init` returns), draining, stopped, a message of
    /// libmicrohttpd's (a refused connection, a failed bind).
    func event(_ message: String)
}

extension ImageServerLogging {
    /// Every request is logged.
    public var logsRequests: Bool { true }
}

/// One finished request, as the access log records it.
public struct AccessLogEntry: Sendable, Hashable, Codable {
    /// When the response was finished (or the client went away).
    public var time: Date
    /// The client's address.
    public var client: String
    /// The method as sent ("-" when the request never reached the server's handler).
    public var method: String
    /// The request target as sent (credentials in it redacted).
    public var target: String
    /// The status sent; 499 when the client hung up before any answer (as nginx logs it).
    public var status: Int
    /// Body bytes of the response.
    public var bytes: Int
    /// From the request line to the end of the response.
    public var seconds: Double
    /// Where the answer came from: "memory" or "disk" (a cache of responses),
    /// "miss" (made now), "joined" (shared with an identical request in flight),
    /// "not-modified"; nil for other answers (errors, health, metrics).
    public var cache: String?

    /// An entry with every field given.
    public init(
        time: Date, client: String, method: String, target: String, status: Int, bytes: Int, seconds: Double,
        cache: String?
    ) {
        self.time = time
        self.client = client
        self.method = method
        self.target = target
        self.status = status
        self.bytes = bytes
        self.seconds = seconds
        self.cache = cache
    }

    /// One line: ISO 8601 time, client, method and target, status, bytes,
    /// milliseconds, cache tier ("-" for none).
    ///
    /// What the client sent (client address, method, target) is escaped as
    /// nginx escapes its log: `"` as `\"`, `\` as `\\`, and every byte
    /// outside printable ASCII as `\xHH`, so a request can neither forge a
    /// field nor send a terminal escape code.
    public var text: String {
        let milliseconds = String(format: "%.1f", seconds * 1000)
        let time = Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(time)
        return
            "\(time) \(Self.escaped(client)) \"\(Self.escaped(method)) \(Self.escaped(target))\" \(status) \(bytes) "
            + "\(milliseconds)ms \(cache ?? "-")"
    }

    /// `text` with `"` and `\` backslash-escaped and every byte outside
    /// printable ASCII (controls, DEL, each byte of a non-ASCII character) as `\xHH`.
    static func escaped(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes += [UInt8(ascii: "\\"), byte]
            case 0x20...0x7E:
                bytes.append(byte)
            default:
                bytes += [UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// One JSON object on one line, keys sorted.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        guard let data = try? encoder.encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}
