/// Why the HTTP layer could not start: the one error `HTTPServer` and its
/// parts throw. The server above it turns it into its own error type.
package struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    package enum Kind: Sendable {
        /// The listening address is no IPv4 or IPv6 literal.
        case invalidAddress
        /// The daemon could not listen (the port is taken, the address not this host's).
        case cannotListen
        /// A system call the server needs failed (epoll, eventfd).
        case system
    }

    package let kind: Kind
    /// A sentence for the operator (it names no more than the address).
    package let message: String

    package init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    package var description: String { message }
}
