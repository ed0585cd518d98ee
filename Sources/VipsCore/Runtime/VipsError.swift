/// The one error type of VipsLoad: a kind to branch on and a message to show.
///
/// `kind` says what went wrong in terms a caller can act on (bad input, too
/// large, I/O, ...); `message` carries the detail, usually libvips' own text.
public struct VipsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. Extensible: later layers (HTTP loading) add their own kinds.
    public struct Kind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The input had no bytes at all.
        public static let emptyInput = Kind(rawValue: "emptyInput")
        /// The bytes are not an image format VipsLoad reads, or the format is not allowed.
        public static let unsupportedFormat = Kind(rawValue: "unsupportedFormat")
        /// The data claims a known format but cannot be decoded.
        public static let corruptData = Kind(rawValue: "corruptData")
        /// The data ends before the image does (strict mode, or a header cut short).
        public static let truncatedData = Kind(rawValue: "truncatedData")
        /// The header declares more pixels, pages or bytes than the configured limits allow.
        public static let tooLarge = Kind(rawValue: "tooLarge")
        /// Reading or writing a file failed.
        public static let io = Kind(rawValue: "io")
        /// Encoding a bitmap failed.
        public static let encodeFailed = Kind(rawValue: "encodeFailed")
        /// A caller passed an argument outside what the API accepts.
        public static let invalidArgument = Kind(rawValue: "invalidArgument")
        /// libvips failed in a way not caused by the input (start-up, out of memory).
        public static let `internal` = Kind(rawValue: "internal")
    }

    public let kind: Kind
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind): \(message)" }
}
