/// Why a processing URL was refused, and the HTTP status a server answers it with.
///
/// `message` is meant for the client: it names the offending option, argument
/// or part of the URL, and never a path or address of the machine.
public struct ProcessingURLError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong with the URL.
    public enum Reason: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// The path is not `/signature/options/source`, or the source URL's
        /// encoding is broken (bad percent-escape or base64, no URL, two
        /// extensions). 404, as imgproxy's "Invalid URL".
        case malformedURL
        /// A processing option imgproxy does not have. 404.
        case unknownOption
        /// An option with the wrong number of arguments, an argument that does
        /// not parse, or a value out of range. 404.
        case invalidOption
        /// An imgproxy option (or combination of options) this server does not
        /// implement. 404, as imgproxy's own unknown options.
        case unsupportedOption
        /// An option the server does not allow in URLs
        /// (`ProcessingURLParser.allowedOptions`, imgproxy's
        /// `IMGPROXY_ALLOWED_PROCESSING_OPTIONS`). 404, as imgproxy.
        case forbiddenOption
        /// An output format imgproxy knows that this server does not encode.
        /// 422, as imgproxy's format it cannot save.
        case unsupportedFormat
        /// The signature is missing, malformed or wrong. 403.
        case badSignature
        /// A security option (`max_src_resolution`…) on a server that does
        /// not allow them (`ProcessingURLParser.allowsSecurityOptions`). 403, as imgproxy.
        case securityOptionsNotAllowed
        /// The source is outside what the server may read (a path leaving the
        /// root, a host no `--allow-source` pattern admits, another scheme).
        /// 404, as imgproxy's source URL that is not allowed.
        case sourceNotAllowed
        /// The source file does not exist (or is not a regular file). 404.
        case sourceNotFound

        /// The reason's name.
        public var description: String { rawValue }
    }

    /// What was wrong.
    public let reason: Reason
    /// What to tell the client: names the option or the part of the URL.
    public let message: String

    /// An error of `reason` explained by `message`.
    public init(_ reason: Reason, _ message: String) {
        self.reason = reason
        self.message = message
    }

    /// The HTTP status to answer with, imgproxy's: 403 for a signature,
    /// 422 for an output format, 404 for everything else.
    public var status: Int {
        switch reason {
        case .malformedURL, .unknownOption, .invalidOption, .unsupportedOption, .forbiddenOption: return 404
        case .unsupportedFormat: return 422
        case .badSignature, .securityOptionsNotAllowed: return 403
        case .sourceNotAllowed, .sourceNotFound: return 404
        }
    }

    /// "status reason: message".
    public var description: String { "\(status) \(reason): \(message)" }
}
