import Foundation
import VipsCore

#if canImport(Glibc)
    import Glibc
#endif

/// A real HTTP/1.1 server on 127.0.0.1 for the network tests: POSIX sockets,
/// an ephemeral port, one thread per connection, scripted per-path behaviour.
///
/// Every response closes its connection (`Connection: close`), so a request
/// is always a new connection and the server can tell, per path, how many
/// requests arrived and whether the client hung up before the body was sent.
public final class TestHTTPServer: Sendable {
    /// A parsed request: method, path (without query), header names lowercased.
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var headers: [String: String]
        public func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    /// Where a response body comes from.
    public enum Body: Sendable {
        case data(Data)
        /// Streamed from a file in chunks: the server never holds it in memory.
        case file(String)
        /// `count` bytes of a repeating pattern, generated while sending.
        case pattern(count: Int)

        public var count: Int {
            switch self {
            case .data(let data): return data.count
            case .file(let path): return ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? Int) ?? 0
            case .pattern(let count): return count
            }
        }
    }

    /// How the connection ends after the bytes that are sent.
    public enum Ending: Sendable {
        /// An orderly close (FIN).
        case close
        /// An abortive close (RST): SO_LINGER with a zero timeout.
        case reset
    }

    /// A scripted response.
    public struct Response: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: Body
        /// The Content-Length sent: nil sends the real length; `.some(nil)` sends
        /// none (the body ends when the connection closes).
        public var declaredLength: Int??
        /// Bytes per write.
        public var chunkSize: Int
        /// Pause before the status line.
        public var headerDelay: TimeInterval
        /// Pause between body chunks.
        public var chunkDelay: TimeInterval
        /// Stop sending after this many body bytes (a body cut short).
        public var cutAfter: Int?
        public var ending: Ending
        /// Interim (1xx) responses sent before the status line, each a status
        /// line and an empty line (a `103` also carries a `Link` field).
        public var interim: [Int]
        /// Bytes sent verbatim instead of the status line and header fields
        /// (the body follows as usual): a response that is not HTTP, or any
        /// head `headers` cannot express.
        public var rawHead: Data?
        /// The first body byte sent (a range's start); the real length is counted from here.
        public var bodyOffset = 0

        public init(
            status: Int = 200, headers: [(String, String)] = [], body: Body = .data(Data()),
            declaredLength: Int?? = nil, chunkSize: Int = 64 * 1024, headerDelay: TimeInterval = 0,
            chunkDelay: TimeInterval = 0, cutAfter: Int? = nil, ending: Ending = .close,
            interim: [Int] = [], rawHead: Data? = nil
        ) {
            self.status = status
            self.headers = headers
            self.body = body
            self.declaredLength = declaredLength
            self.chunkSize = chunkSize
            self.headerDelay = headerDelay
            self.chunkDelay = chunkDelay
            self.cutAfter = cutAfter
            self.ending = ending
            self.interim = interim
            self.rawHead = rawHead
        }

        /// `bytes` verbatim and nothing else, then the connection closes.
        public static func raw(_ bytes: Data) -> Response {
            Response(body: .data(Data()), rawHead: bytes)
        }

        public static func ok(
            _ data: Data, contentType: String = "image/jpeg", headers: [(String, String)] = []
        ) -> Response {
            Response(status: 200, headers: [("Content-Type", contentType)] + headers, body: .data(data))
        }

        public static func status(_ code: Int, body: String = "") -> Response {
            Response(status: code, headers: [("Content-Type", "text/plain")], body: .data(Data(body.utf8)))
        }

        public static func redirect(to location: String, status: Int = 302) -> Response {
            Response(status: status, headers: [("Location", location)])
        }

        /// Sends the body at about `bytesPerSecond` (chunks of a tenth of it, 0.1 s apart).
        public mutating func drip(bytesPerSecond: Int) {
            chunkSize = max(1, bytesPerSecond / 10)
            chunkDelay = 0.1
        }

        /// `body` as a server that supports ranges answers `request`: with
        /// `Accept-Ranges: bytes` and the validators given, a `206` with
        /// `Content-Range` for `Range: bytes=N-` (when `If-Range`, if sent,
        /// matches the `etag` or `lastModified`), a `416` for a start past the
        /// end, a `200` with the whole body otherwise. `cutAfter` cuts what is sent.
        public static func ranged(
            _ body: Body, for request: Request, etag: String? = nil, lastModified: String? = nil,
            contentType: String = "image/jpeg", cutAfter: Int? = nil
        ) -> Response {
            var headers: [(String, String)] = [("Content-Type", contentType), ("Accept-Ranges", "bytes")]
            if let etag { headers.append(("ETag", etag)) }
            if let lastModified { headers.append(("Last-Modified", lastModified)) }
            let total = body.count
            var response = Response(status: 200, headers: headers, body: body, cutAfter: cutAfter)
            guard let range = request.header("Range"), range.hasPrefix("bytes="), range.hasSuffix("-"),
                let start = Int(range.dropFirst(6).dropLast())
            else { return response }
            if let condition = request.header("If-Range"), condition != etag, condition != lastModified {
                return response
            }
            guard start < total else {
                return Response(
                    status: 416, headers: [("Content-Range", "bytes */\(total)")] + headers, body: .data(Data()))
            }
            response.status = 206
            response.headers.append(("Content-Range", "bytes \(start)-\(total - 1)/\(total)"))
            response.bodyOffset = start
            return response
        }
    }

    public typealias Handler = @Sendable (Request) -> Response

    private struct State {
        var routes: [String: Handler] = [:]
        var requests: [String: [Request]] = [:]
        var clientCloses: [String: Int] = [:]
        var completedResponses: [String: Int] = [:]
        var openConnections: [Int32: String] = [:]
        var acceptedConnections = 0
        var bodyBytesSent: [String: Int] = [:]
        var stopped = false
    }

    private let state = LockedState(State())
    private let listener: Int32
    /// The port the server listens on (chosen by the kernel).
    public let port: UInt16
    /// The IPv4 address the server listens on (127.0.0.1 unless another was given).
    public let host: String

    /// Binds `host` (an IPv4 address; any of 127.0.0.0/8 is this machine's loopback)
    /// on an ephemeral port and starts accepting.
    public init(host: String = "127.0.0.1") throws {
        self.host = host
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr(host)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 512) == 0 else {
            let code = errno
            close(fd)
            throw POSIXError(.init(rawValue: code) ?? .EIO)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = UInt16(bigEndian: actual.sin_port)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { stop() }

    /// The URL of `path` on this server.
    public func url(_ path: String) -> URL {
        URL(string: "http://\(host):\(port)\(path)")!
    }

    /// The URL of `path` with credentials in it: `http://user:password@127.0.0.1:port/path`.
    public func url(_ path: String, user: String, password: String) -> URL {
        URL(string: "http://\(user):\(password)@\(host):\(port)\(path)")!
    }

    /// Scripts `path` (exact match, query ignored).
    public func route(_ path: String, _ handler: @escaping Handler) {
        state.withLock { $0.routes[path] = handler }
    }

    /// Scripts `path` with a fixed response.
    public func route(_ path: String, _ response: Response) {
        route(path) { _ in response }
    }

    /// Requests received for `path` so far.
    public func requests(_ path: String) -> [Request] {
        state.withLock { $0.requests[path] ?? [] }
    }

    public func requestCount(_ path: String) -> Int { requests(path).count }

    /// Connections accepted so far (whether or not a request came on them).
    public var connectionCount: Int { state.withLock { $0.acceptedConnections } }

    public var totalRequestCount: Int { state.withLock { $0.requests.values.reduce(0) { $0 + $1.count } } }

    /// Body bytes written to the sockets of requests for `path` so far (every response, every range).
    public func bodyBytesSent(_ path: String) -> Int { state.withLock { $0.bodyBytesSent[path] ?? 0 } }

    /// How often the client hung up on `path` before the whole response was sent.
    public func clientCloseCount(_ path: String) -> Int { state.withLock { $0.clientCloses[path] ?? 0 } }

    /// Waits (polling) until `condition` holds or `timeout` passes.
    public func wait(timeout: TimeInterval = 30, until condition: (TestHTTPServer) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition(self) { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return condition(self)
    }

    /// Stops accepting, aborts open connections and waits (bounded) for their threads.
    public func stop() {
        let open: [Int32]? = state.withLock { state in
            guard !state.stopped else { return nil }
            state.stopped = true
            return Array(state.openConnections.keys)
        }
        // Stopped already (tearDown, then deinit): the listener may be closed by now and its
        // number reused by another server's socket, which a second shutdown would kill.
        guard let open else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        for fd in open { shutdown(fd, Int32(SHUT_RDWR)) }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, state.withLock({ !$0.openConnections.isEmpty }) {
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    // MARK: - Serving

    private var isStopped: Bool { state.withLock { $0.stopped } }

    private func acceptLoop() {
        defer { close(listener) }
        while !isStopped {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            let admitted = state.withLock { state -> Bool in
                guard !state.stopped else { return false }
                state.openConnections[client] = ""
                state.acceptedConnections += 1
                return true
            }
            guard admitted else { close(client); return }
            Thread.detachNewThread { [self] in serve(client) }
        }
    }

    private func serve(_ fd: Int32) {
        var ending = Ending.close
        defer {
            if ending == .reset {
                var lingering = linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &lingering, socklen_t(MemoryLayout<linger>.size))
            } else {
                shutdown(fd, Int32(SHUT_WR))
            }
            _ = state.withLock { $0.openConnections.removeValue(forKey: fd) }
            close(fd)
        }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let request = readRequest(fd) else { return }
        let handler: Handler? = state.withLock { state in
            state.requests[request.path, default: []].append(request)
            state.openConnections[fd] = request.path
            return state.routes[request.path]
        }
        let response = handler?(request) ?? .status(404, body: "no route for \(request.path)")
        ending = response.ending
        if send(response, on: fd, path: request.path) {
            state.withLock { $0.completedResponses[request.path, default: 0] += 1 }
        }
    }

    private func readRequest(_ fd: Int32) -> Request? {
        var buffer = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        let terminator: [UInt8] = [13, 10, 13, 10]
        while buffer.count < 64 * 1024 {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return nil }
            buffer.append(contentsOf: chunk[0..<n])
            if let end = find(terminator, in: buffer) {
                let text = String(decoding: buffer[0..<end], as: UTF8.self)
                var lines = text.components(separatedBy: "\r\n")
                let parts = lines.removeFirst().split(separator: " ")
                guard parts.count >= 2 else { return nil }
                var headers: [String: String] = [:]
                for line in lines {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
                    headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                let target = String(parts[1])
                let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
                return Request(method: String(parts[0]), path: path, headers: headers)
            }
        }
        return nil
    }

    private func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if Array(haystack[i..<i + needle.count]) == needle { return i }
        }
        return nil
    }

    /// Sends the response; false when the client closed the connection first.
    private func send(_ response: Response, on fd: Int32, path: String) -> Bool {
        if response.headerDelay > 0, !sleep(response.headerDelay, fd: fd) {
            recordClientClose(path)
            return false
        }
        let offset = min(max(0, response.bodyOffset), response.body.count)
        let length = response.declaredLength ?? .some(response.body.count - offset)
        var head = ""
        for code in response.interim {
            head += "HTTP/1.1 \(code) \(Self.reason(code))\r\n"
            if code == 103 { head += "Link: </style.css>; rel=preload; as=style\r\n" }
            head += "\r\n"
        }
        head += "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\nConnection: close\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        if let length { head += "Content-Length: \(length)\r\n" }
        head += "\r\n"
        let headBytes = response.rawHead.map { [UInt8]($0) } ?? Array(head.utf8)
        guard write(headBytes[...], to: fd) else {
            recordClientClose(path)
            return false
        }
        // `sent` counts from the body's first byte; a range starts at `offset`.
        let limit = offset + min(response.cutAfter ?? Int.max, response.body.count - offset)
        var sent = offset
        var file: FileHandle?
        if case .file(let filePath) = response.body {
            file = FileHandle(forReadingAtPath: filePath)
            try? file?.seek(toOffset: UInt64(offset))
        }
        defer { try? file?.close() }
        while sent < limit {
            if isStopped { return false }
            let count = min(response.chunkSize, limit - sent)
            let bytes: [UInt8]
            switch response.body {
            case .data(let data):
                bytes = Array(data[data.startIndex + sent..<data.startIndex + sent + count])
            case .file:
                bytes = [UInt8]((try? file?.read(upToCount: count)) ?? Data())
                if bytes.isEmpty { return false }
            case .pattern:
                bytes = (0..<count).map { UInt8(truncatingIfNeeded: (sent + $0) &* 31) }
            }
            guard write(bytes[...], to: fd) else {
                recordClientClose(path)
                return false
            }
            state.withLock { $0.bodyBytesSent[path, default: 0] += bytes.count }
            sent += bytes.count
            if response.chunkDelay > 0, sent < limit, !sleep(response.chunkDelay, fd: fd) {
                recordClientClose(path)
                return false
            }
        }
        return true
    }

    /// Sleeps, watching the connection: false when the client hung up meanwhile.
    private func sleep(_ interval: TimeInterval, fd: Int32) -> Bool {
        let deadline = Date().addingTimeInterval(interval)
        while Date() < deadline {
            if isStopped || peerClosed(fd) { return false }
            Thread.sleep(forTimeInterval: min(0.01, max(0, deadline.timeIntervalSinceNow)))
        }
        return !peerClosed(fd)
    }

    /// True when the peer closed its side (a readable socket with no data, or an error).
    private func peerClosed(_ fd: Int32) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 0) > 0 else { return false }
        if poller.revents & Int16(POLLERR | POLLHUP) != 0 { return true }
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    }

    private func write(_ bytes: ArraySlice<UInt8>, to fd: Int32) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    private func recordClientClose(_ path: String) {
        guard !isStopped else { return }
        state.withLock { $0.clientCloses[path, default: 0] += 1 }
    }

    private static func reason(_ status: Int) -> String {
        switch status {
        case 100: return "Continue"
        case 103: return "Early Hints"
        case 200: return "OK"
        case 206: return "Partial Content"
        case 416: return "Range Not Satisfiable"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 404: return "Not Found"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        default: return "Status"
        }
    }
}
