import CMicroHTTPD
import Foundation

/// A request as the handler sees it, on libmicrohttpd's thread, while the
/// handler runs: the method, the request target exactly as the client sent
/// it, and its header fields.
///
/// Not `Sendable`, and only valid during `HTTPHandler.handle(_:)`: header
/// fields are read from the connection, which libmicrohttpd owns. Copy what
/// later work needs into values of its own.
package struct HTTPRequest: ~Copyable {
    /// The method as sent (`GET`, `HEAD`, ...).
    package let method: String
    /// The request target as sent: path and query, not percent-decoded.
    package let target: String
    /// The client's address, for logs ("127.0.0.1", "::1").
    package let clientAddress: String
    let connection: OpaquePointer

    /// The value of the header field `name` (case-insensitive), or nil.
    package func header(_ name: String) -> String? {
        MHD_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
    }

    /// The target's path: the part before any `?`.
    package var path: Substring {
        target.firstIndex(of: "?").map { target[..<$0] } ?? target[...]
    }
}
