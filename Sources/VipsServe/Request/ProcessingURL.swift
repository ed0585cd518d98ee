/// A processing URL parsed by its grammar alone: the signature checked, the
/// options read, the source URL decoded, nothing resolved yet
/// (`ProcessingURLParser.parseURL(_:)`).
public struct ProcessingURL: Sendable, Hashable {
    /// The processing options, the URL's extension included (as `format`).
    public let options: ProcessingOptions
    /// The source URL, decoded: percent-escapes of a plain URL resolved once, a
    /// base64 URL decoded.
    public let source: String
    /// Whether the signature was checked against a key (false when the parser has no key).
    public let isSigned: Bool
    /// How the source was written in the URL.
    let encoding: SourceEncoding
    /// The presets applied, in order (`default` first when the server has
    /// one; a preset named again inside one being applied is not): imgproxy's
    /// `UsedPresets`. Not part of the variant's identity, which is `options`.
    public internal(set) var usedPresets: [String] = []

    /// How a source URL is written in a processing URL.
    enum SourceEncoding: Sendable, Hashable {
        /// `/plain/%source_url@%extension`, with the URL's text as written (before percent-decoding).
        case plain(raw: String)
        /// `/%base64url_source_url.%extension`.
        case base64
    }

    /// An unsigned path (signature `_`) that parses to the same options and
    /// source: the canonical options, then the source as a plain URL with every
    /// character but the unreserved ones and `/` percent-encoded. It parses
    /// back to the same options with a parser of no presets and no
    /// `defaults` of its own (a `default` preset or configured defaults are
    /// applied again on the way back, and in only-presets mode the options
    /// segment names presets); the variant's identity is
    /// `ProcessingOptions.canonicalSegments`, which does not depend on that.
    public var canonicalPath: String {
        "/_/" + canonicalPathAfterSignature.dropFirst()
    }

    /// The canonical path without its signature segment, from its leading `/`: what a signature signs.
    public var canonicalPathAfterSignature: String {
        var options = self.options
        let format = options.format
        options.format = nil
        let segments = options.canonicalSegments
        return "/" + (segments.isEmpty ? "" : segments.joined(separator: "/") + "/") + "plain/"
            + Self.percentEncoded(source) + (format.map { "@" + $0.rawValue } ?? "")
    }

    /// `text` with every byte but the unreserved characters and `/` percent-encoded
    /// (`:` too, so no `scheme:/` is rewritten on the way back).
    static func percentEncoded(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "/"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                encoded += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return encoded
    }
}
