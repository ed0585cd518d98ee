import CMicroHTTPD
import Foundation

/// One HTTP response, ready to send: a libmicrohttpd response object (status
/// line, header fields, body bytes copied in once).
///
/// libmicrohttpd counts references to its responses and queues one response
/// on any number of connections, from any of its threads, so a response made
/// once (a cached thumbnail, a fixed error) is sent again and again without
/// another copy. `Content-Length` and `Date` are added by libmicrohttpd; a
/// `HEAD` request gets the same header fields and no body.
package final class HTTPResponse: @unchecked Sendable {
    // @unchecked: the pointer is only read after init; libmicrohttpd locks its
    // own reference count when the response is queued or destroyed.
    package let pointer: OpaquePointer
    /// The status code sent.
    package let status: Int
    /// The body's length in bytes (also sent for `HEAD`, as `Content-Length`).
    package let bodyCount: Int
    /// Whether the connection closes after this response (`Connection: close`).
    package let closesConnection: Bool

    /// A response of `status` with `body` and `headers` (names and values
    /// made by this program: one line each, no control characters); nil
    /// only when libmicrohttpd cannot allocate it.
    package init?(status: Int, body: Data = Data(), headers: [(String, String)] = [], closesConnection: Bool = false) {
        let made = body.withUnsafeBytes { bytes -> OpaquePointer? in
            // MUST_COPY: the bytes are copied now, so `body` need not outlive the response.
            MHD_create_response_from_buffer(
                bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let made else { return nil }
        for (name, value) in headers {
            _ = MHD_add_response_header(made, name, value)
        }
        if closesConnection {
            _ = MHD_add_response_header(made, "Connection", "close")
        }
        pointer = made
        self.status = status
        bodyCount = body.count
        self.closesConnection = closesConnection
    }

    deinit {
        // Connections still sending it keep their own reference.
        MHD_destroy_response(pointer)
    }

    /// A short plain-text response (errors, health): `text` and a newline.
    package static func text(
        _ status: Int, _ text: String, headers: [(String, String)] = [], closesConnection: Bool = false
    ) -> HTTPResponse? {
        HTTPResponse(
            status: status, body: Data((text + "\n").utf8),
            headers: [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")] + headers,
            closesConnection: closesConnection)
    }
}
