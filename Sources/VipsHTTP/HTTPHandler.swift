/// What `HTTPServer` calls: the application behind the HTTP layer.
///
/// Its methods run on libmicrohttpd's thread, so they must not block:
/// anything slow is deferred (`.later`) to an async function whose task the
/// HTTP layer owns.
package protocol HTTPHandler: Sendable {
    /// Answers `request` now, or defers it.
    func handle(_ request: borrowing HTTPRequest) -> HTTPHandling
    /// One call per request that reached the handler or was answered by
    /// libmicrohttpd itself, when its connection is done with it: for the
    /// access log and the metrics.
    func completed(_ record: HTTPCompletion)
    /// A message of libmicrohttpd's own (a failed bind, a refused connection).
    func serverMessage(_ text: String)
}

/// A handler's decision for one request.
package enum HTTPHandling {
    /// Send this now; `note` goes to the access log (a cache tier, say).
    /// Nil (libmicrohttpd could not allocate a response) closes the connection.
    case respond(HTTPResponse?, note: String?)
    /// Answer later: the connection is suspended (libmicrohttpd's thread is
    /// free for other connections) and watched for the client hanging up,
    /// and the answer is what `work` returns, run in a task the HTTP layer
    /// owns. The client hanging up cancels that task, and so does a stop
    /// that cannot wait for it: `work` ends its work when it sees the
    /// cancellation, and what it returns then is dropped.
    case later(@Sendable () async -> HTTPAnswer)
}

/// What deferred work answers a request with.
package struct HTTPAnswer: Sendable {
    /// The response; nil closes the connection unanswered (no memory for a response).
    package var response: HTTPResponse?
    /// For the access log (a cache tier, say).
    package var note: String?

    package init(_ response: HTTPResponse?, note: String? = nil) {
        self.response = response
        self.note = note
    }
}

/// A finished request, for logs and metrics.
package struct HTTPCompletion: Sendable {
    /// The method, or "-" when the handler never saw the request.
    package var method: String
    /// The request target as sent.
    package var target: String
    package var clientAddress: String
    /// The status sent (0 when nothing was sent).
    package var status: Int
    /// Body bytes of the response (not sent for `HEAD`).
    package var bytes: Int
    /// From the request line to the end of the response.
    package var seconds: Double
    /// The handler's note (cache tier), if any.
    package var note: String?
    /// The client went away before the whole answer was sent.
    package var clientGone: Bool
}
