/// What `HTTPServer` calls: the application behind the HTTP layer.
///
/// Both methods run on libmicrohttpd's thread, so they must not block:
/// anything slow is deferred (`.later`) and answered from another thread.
protocol HTTPHandler: Sendable {
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
enum HTTPHandling {
    /// Send this now; `note` goes to the access log (a cache tier, say).
    /// Nil (libmicrohttpd could not allocate a response) closes the connection.
    case respond(HTTPResponse?, note: String?)
    /// Answer later: the connection is suspended (libmicrohttpd's thread is
    /// free for other connections) and watched for the client hanging up,
    /// and `start` is called with the reply to send from any thread.
    case later(@Sendable (PendingReply) -> Void)
}

/// A finished request, for logs and metrics.
struct HTTPCompletion: Sendable {
    /// The method, or "-" when the handler never saw the request.
    var method: String
    /// The request target as sent.
    var target: String
    var clientAddress: String
    /// The status sent (0 when nothing was sent).
    var status: Int
    /// Body bytes of the response (not sent for `HEAD`).
    var bytes: Int
    /// From the request line to the end of the response.
    var seconds: Double
    /// The handler's note (cache tier), if any.
    var note: String?
    /// The client went away before the whole answer was sent.
    var clientGone: Bool
}
