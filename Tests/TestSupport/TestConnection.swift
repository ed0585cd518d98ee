import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One TCP connection to a server on 127.0.0.1, speaking just enough
/// HTTP/1.1 for the tests to control it exactly: several requests on one
/// connection (keep-alive), raw bytes, hanging up mid-request, and telling
/// whether the server closed the connection. Reads time out after 30 s, so a
/// server that never answers fails the test instead of hanging it.
public final class TestConnection {
    /// A response as read: status, header fields (names lowercased), body.
    public struct Response {
        public var status: Int
        public var headers: [String: String]
        public var body: Data
        public func header(_ name: String) -> String? { headers[name.lowercased()] }
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    private let fd: Int32
    private var open = true
    private var buffer = Data()

    public init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let code = errno
            Glibc.close(fd)
            throw Failure(description: "connect to port \(port): \(String(cString: strerror(code)))")
        }
    }

    deinit { if open { Glibc.close(fd) } }

    /// Sends `bytes` as they are.
    public func send(_ bytes: String) throws {
        try send(data: Data(bytes.utf8))
    }

    /// Sends `data` as it is (bytes that are not UTF-8, too).
    public func send(data: Data) throws {
        let sent = data.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == data.count else { throw Failure(description: "send: \(sent) of \(data.count) bytes") }
    }

    /// Sends a request for `target` and reads its response.
    public func request(
        _ target: String, method: String = "GET", headers: [String: String] = [:], body: String = ""
    ) throws -> Response {
        try sendRequest(target, method: method, headers: headers, body: body)
        return try readResponse(toHEAD: method == "HEAD")
    }

    /// Sends a request without reading the response.
    public func sendRequest(
        _ target: String, method: String = "GET", headers: [String: String] = [:], body: String = ""
    )
        throws
    {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if !body.isEmpty { text += "Content-Length: \(body.utf8.count)\r\n" }
        try send(text + "\r\n" + body)
    }

    /// Reads one response (a `HEAD` response has no body).
    public func readResponse(toHEAD: Bool = false) throws -> Response {
        let separator = Data("\r\n\r\n".utf8)
        while buffer.range(of: separator) == nil {
            guard try fill() else { throw Failure(description: "the server closed the connection before a response") }
        }
        guard let end = buffer.range(of: separator) else { throw Failure(description: "no header end") }
        let head = String(decoding: buffer[buffer.startIndex..<end.lowerBound], as: UTF8.self)
        buffer = Data(buffer[end.upperBound...])
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw Failure(description: "bad status line in \(head)")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        var length = Int(headers["content-length"] ?? "0") ?? 0
        if toHEAD || status == 304 || status == 204 { length = 0 }
        while buffer.count < length {
            guard try fill() else { throw Failure(description: "the body ended after \(buffer.count) of \(length)") }
        }
        let body = Data(buffer.prefix(length))
        buffer = Data(buffer.dropFirst(length))
        return Response(status: status, headers: headers, body: body)
    }

    /// Whether the server has closed the connection (reads until the end;
    /// false when bytes arrive instead).
    public func serverClosed() throws -> Bool {
        buffer.isEmpty ? !(try fill()) : false
    }

    /// Closes the connection at once, with a reset (what a browser
    /// abandoning a request amounts to, seen from the server).
    public func reset() {
        guard open else { return }
        var lingering = linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lingering, socklen_t(MemoryLayout<linger>.size))
        Glibc.close(fd)
        open = false
    }

    /// Closes the connection in order (FIN), as a client that is done.
    public func close() {
        guard open else { return }
        Glibc.close(fd)
        open = false
    }

    /// Reads more bytes; false at the end of the stream.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == ECONNRESET { return false }
            guard count >= 0 else { throw Failure(description: "recv: \(String(cString: strerror(errno)))") }
            if count == 0 { return false }
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
    }
}
