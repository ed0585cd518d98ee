/// The one error type of VipsLoad: a kind to branch on and a message to show.
///
/// `kind` says what went wrong in terms a caller can act on (bad input, too
/// large, I/O, a network failure, cancellation, ...); `message` carries the
/// detail and names the request's source (a path or URL, never a temporary
/// or cache file). Failures with more structure carry it as fields
/// (`httpStatus` for HTTP status errors).
public struct VipsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. A closed set, so a `switch` over it can be exhaustive.
    public enum Kind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        // MARK: Input
        /// The input had no bytes at all.
        case emptyInput
        /// The bytes are not an image format VipsLoad reads, or the format is not allowed.
        case unsupportedFormat
        /// The format is known but uses a feature its loader cannot decode
        /// (for example subsampled TIFF): not damage, but not readable either.
        case unsupportedFeature
        /// The data claims a known format but cannot be decoded.
        case corruptData
        /// The data ends before the image does (strict mode, or a header cut short).
        case truncatedData
        /// The header declares more pixels, pages or bytes than the configured
        /// limits allow, or a response (header or body) exceeds its limit.
        case tooLarge

        // MARK: Files
        /// No file or folder at the given path.
        case fileNotFound
        /// The file exists but the process may not read (or write) it.
        case permissionDenied
        /// Reading or writing a file failed for another reason (a folder
        /// where a file was expected, a full disk, an I/O error).
        case io

        // MARK: Arguments and sources
        /// A caller passed an argument outside what the API accepts.
        case invalidArgument
        /// The source names a place the data loader cannot read from (for
        /// example an `http(s)` URL when no loader for it is configured, or an
        /// unknown scheme).
        case unsupportedSource
        /// The request allowed only cached data and nothing was cached.
        case notCached
        /// A policy refuses the source: its host resolves to an address the
        /// HTTP loader's address policy does not allow (loopback, private,
        /// link-local…: SSRF protection), or a server's source rules do not
        /// admit it. Not the source's fault, and not retried: an image server
        /// answers 403.
        case sourceNotAllowed

        // MARK: Network
        /// The server answered with a status other than 2xx (see `VipsError.httpStatus`).
        case httpStatus
        /// The connection could not be made, or was dropped or reset before the
        /// body was complete.
        case network
        /// The server broke the HTTP protocol (a garbage or contradictory response).
        case protocolError
        /// The body ended before the length its `Content-Length` declared.
        case incompleteBody
        /// No byte arrived within the request timeout, the whole transfer took
        /// longer than the resource timeout, or a decode ran past its deadline.
        case timedOut
        /// More redirects than allowed, or a redirect to a scheme other than http(s).
        case redirectRefused

        // MARK: Outcome
        /// The request was cancelled before it completed.
        case cancelled
        /// An isolated decode's worker process died (the message names the signal).
        case crashed
        /// Encoding a bitmap failed.
        case encodeFailed
        /// libvips failed in a way not caused by the input (start-up, out of memory).
        case `internal`

        /// The kind's name, as printed and in JSON.
        public var description: String { rawValue }
    }

    /// What went wrong, to branch on.
    public let kind: Kind
    /// What happened, for people: names the source and gives the reason.
    public let message: String
    /// The HTTP status for `.httpStatus` errors; nil otherwise.
    public let httpStatus: Int?

    /// An error of `kind` explained by `message`.
    public init(_ kind: Kind, _ message: String) {
        self.init(kind, message, httpStatus: nil)
    }

    /// An error of `kind` with an HTTP status (for `.httpStatus` errors).
    public init(_ kind: Kind, _ message: String, httpStatus: Int?) {
        self.kind = kind
        self.message = message
        self.httpStatus = httpStatus
    }

    /// `.cancelled`, naming what was cancelled.
    public static func cancelled(_ what: String) -> VipsError {
        VipsError(.cancelled, "\(what): cancelled")
    }

    /// "kind: message".
    public var description: String { "\(kind): \(message)" }
}
