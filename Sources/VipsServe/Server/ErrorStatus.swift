import VipsCore
import VipsHTTP

/// The one place where a failure becomes an HTTP status and the text a
/// client may see.
///
/// The text says what was wrong in the client's terms and never carries a
/// `VipsError`'s message: those name files and URLs of this machine, and
/// libvips' internals. The server logs nothing of a failure but its status.
struct ErrorStatus: Error, Sendable, Hashable {
    /// The HTTP status.
    let code: Int
    /// A short, client-safe sentence.
    let text: String

    /// The status and text for a pipeline failure: imgproxy's codes
    /// (docs/serve-url.md has the table, and the reasons where serve keeps
    /// another code).
    init(_ error: VipsError) {
        switch error.kind {
        case .emptyInput, .corruptData, .truncatedData:
            self.init(422, "the source image is corrupt or empty")
        case .crashed:
            self.init(422, "the source image could not be decoded (its decoder failed)")
        case .unsupportedFormat, .unsupportedFeature:
            self.init(422, "the source image's format is not supported or not allowed")
        case .tooLarge:
            self.init(422, "the source image is over the size or pixel limit")
        case .fileNotFound:
            self.init(404, "no such source image")
        case .permissionDenied:
            self.init(403, "the source is not allowed")
        case .unsupportedSource, .sourceNotAllowed:
            self.init(404, "the source is not allowed")
        case .invalidArgument:
            self.init(422, "the processing options do not fit this image")
        case .httpStatus:
            let status = error.httpStatus ?? 0
            if status == 404 || status == 410 {
                self.init(404, "no such source image at the origin")
            } else if (400..<500).contains(status) {
                // imgproxy answers an origin's 4xx with the same status.
                self.init(status, "the origin refused the source image")
            } else if status >= 500 {
                self.init(502, "the origin answered with an error")
            } else {
                self.init(404, "the origin did not answer with an image")
            }
        case .redirectRefused:
            self.init(404, "the origin's redirect is not followed")
        case .network, .protocolError, .incompleteBody:
            self.init(502, "the origin failed")
        case .timedOut:
            self.init(504, "the origin or the decode timed out")
        case .cancelled:
            self.init(503, "the server is shutting down")
        case .notCached:
            self.init(404, "no such source image")
        case .io, .encodeFailed, .internal:
            self.init(500, "internal error")
        }
    }

    /// The status and text of a refused URL: its own (they name the option
    /// or the rule, never a path of this machine).
    init(_ error: ProcessingURLError) {
        self.init(error.status, error.message)
    }

    init(_ code: Int, _ text: String) {
        self.code = code
        self.text = text
    }

    /// 429: the queue of images waiting to be made is full.
    static let queueFull = ErrorStatus(429, "too many images are being made; retry shortly")
    /// 503: the server is draining.
    static let draining = ErrorStatus(503, "the server is shutting down")
    /// 422: the render needs more memory than the server's whole memory
    /// budget (`ImageServer.Configuration.memoryBudget`), so it could never
    /// run. imgproxy answers 422 Unprocessable Entity for a source it will
    /// not process because of its size (`IMGPROXY_MAX_SRC_RESOLUTION`);
    /// this is the same kind of refusal, of this URL's result with this
    /// source, not a malformed request (400) nor a body too large (413).
    static let overMemoryBudget = ErrorStatus(
        422, "the image is too large to make within the server's memory budget (ask for a smaller size)")
    /// 504: the request's time ran out.
    static let timedOut = ErrorStatus(504, "the origin or the decode timed out")
    /// 499 (nginx's code, never sent): the client hung up before the answer.
    static let clientGone = ErrorStatus(499, "the client closed the connection")
    /// 405: not GET or HEAD.
    static let methodNotAllowed = ErrorStatus(405, "only GET and HEAD are served")
    /// 414: the request target is over the URL length limit.
    static let uriTooLong = ErrorStatus(414, "the URL is too long")
    /// 404: a path that is no route.
    static let noRoute = ErrorStatus(404, "no such route")

    /// The plain-text response, with `headers` added.
    func response(headers: [(String, String)] = [], closesConnection: Bool = false) -> HTTPResponse? {
        HTTPResponse.text(code, text, headers: headers, closesConnection: closesConnection)
    }
}
