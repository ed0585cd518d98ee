import Foundation
import VipsLoad

/// Reads imgproxy's processing URLs, so imgproxy's client libraries work unchanged:
///
///     /%signature/%processing_options/plain/%source_url@%extension
///     /%signature/%processing_options/%base64url_source_url.%extension
///
/// `parse(_:)` checks the signature, reads the options, decodes the source URL,
/// resolves it through the `SourcePolicy` and maps everything onto an
/// `ImageRequest` and an `OutputPlan` (a `ProcessingRequest`). Every refusal is
/// a `ProcessingURLError` carrying its HTTP status (400, 403, 404 or 415).
///
/// The path is read as received, still percent-encoded (a server must hand it
/// over undecoded), and its query, if any, is ignored, as imgproxy does. As
/// imgproxy, the parser first undoes what proxies do to such paths (`%3A` for
/// `:` in the options, `scheme:/` for `scheme://` in a plain source URL), then
/// checks the signature over the result.
public struct ProcessingURLParser: Sendable {
    /// Bounds on what a URL may ask for, beyond the options' own ranges.
    public struct Limits: Sendable, Hashable {
        /// The largest side of a result, in pixels: `width`, `height` (times the
        /// dpr) and padding over it are refused (400); a processor whose output
        /// would grow past it (extend, padding) fails with `.invalidArgument`. Default 8192.
        public var maxResultDimension: Int
        /// The largest `dpr`. Default 8.
        public var maxDPR: Double

        /// Limits; each parameter defaults as its property documents.
        public init(maxResultDimension: Int = 8192, maxDPR: Double = 8) {
            self.maxResultDimension = maxResultDimension
            self.maxDPR = maxDPR
        }
    }

    /// The key and salt pairs a signature may be made with (any one verifies it,
    /// as imgproxy's comma-separated lists allow a rotation); none: no signature
    /// check, and the signature segment may be anything (clients send `insecure`).
    public var signingKeys: [URLSigningKey]
    /// Where sources may come from.
    public var sources: SourcePolicy
    /// Bounds on sizes.
    public var limits: Limits

    /// A parser checking signatures with `signingKeys` (none: unsigned URLs),
    /// resolving sources with `sources`.
    public init(signingKeys: [URLSigningKey] = [], sources: SourcePolicy, limits: Limits = Limits()) {
        self.signingKeys = signingKeys
        self.sources = sources
        self.limits = limits
    }

    /// Parses a request target (the path, with or without a query) into the
    /// request for the pipeline and the plan for the encoder.
    ///
    /// - Throws: `ProcessingURLError`: 403 for a bad or missing signature or a
    ///   source the policy refuses, 404 for a missing file, 400 for a malformed
    ///   URL or option, 415 for an output format this server does not encode.
    public func parse(_ target: String) throws(ProcessingURLError) -> ProcessingRequest {
        let url = try parseURL(target)
        let source = try sources.resolve(url.source, encoding: url.encoding)
        return try ProcessingRequest(url: url, source: source, limits: limits)
    }

    /// The grammar alone: the signature checked and the options and source
    /// URL read, without resolving the source or mapping the options.
    ///
    /// - Throws: `ProcessingURLError` (400, 403 or 415), as `parse(_:)`.
    public func parseURL(_ target: String) throws(ProcessingURLError) -> ProcessingURL {
        var path = Substring(target)
        if let query = path.firstIndex(of: "?") { path = path[..<query] }
        guard path.first == "/" else { throw ProcessingURLError(.malformedURL, "the path does not start with /") }
        path = path.dropFirst()
        guard let slash = path.firstIndex(of: "/"), slash != path.startIndex, path.index(after: slash) != path.endIndex
        else {
            throw ProcessingURLError(.malformedURL, "the path is not /signature/options/source")
        }
        let signature = path[..<slash]
        let rest = Self.undoingProxyNormalisation(path[path.index(after: slash)...])
        let isSigned = try checkSignature(signature, path: "/" + rest)
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
        if let first = parts.first, ProcessingOptions.ResizingType(rawValue: String(first)) != nil {
            throw ProcessingURLError(.malformedURL, "the basic URL format (/\(first)/…) is not supported")
        }
        var options = ProcessingOptions()
        var index = 0
        while index < parts.count {
            let arguments = parts[index].split(separator: ":", omittingEmptySubsequences: false)
            guard arguments.count > 1 else { break }
            try options.apply(arguments[0], Array(arguments.dropFirst()))
            index += 1
        }
        let (source, encoding, fileExtension) = try Self.decodeSource(parts[index...])
        if let fileExtension {
            options.format = try ProcessingOptions.format(named: Substring(fileExtension), option: "extension")
        }
        return ProcessingURL(options: options, source: source, isSigned: isSigned, encoding: encoding)
    }

    /// Checks `signature` against `path` (from its leading `/`); whether a key checked it.
    private func checkSignature(_ signature: Substring, path: String) throws(ProcessingURLError) -> Bool {
        guard !signingKeys.isEmpty else {
            // imgproxy: a signature segment that looks like an option means the segment is missing.
            if signature.contains(":") {
                throw ProcessingURLError(
                    .badSignature, "the signature segment is missing (the first segment is an option)")
            }
            return false
        }
        guard signingKeys.contains(where: { $0.verifies(String(signature), path: path) }) else {
            throw ProcessingURLError(.badSignature, "invalid signature")
        }
        return true
    }

    /// imgproxy's `RedenormalizePath`: `%3A` back to `:` in the options, and a
    /// plain source URL's `scheme:/x` (a proxy's merged slashes) back to
    /// `scheme://x` (`local:///x` for local files).
    static func undoingProxyNormalisation(_ path: Substring) -> String {
        var options: Substring
        var plain: Substring?
        if path.hasPrefix("plain/") {
            options = ""
            plain = path.dropFirst("plain/".count)
        } else if let range = path.range(of: "/plain/") {
            options = path[..<range.lowerBound]
            plain = path[range.upperBound...]
        } else {
            options = path
        }
        let fixedOptions = options.replacingOccurrences(of: "%3A", with: ":")
        guard var source = plain.map(String.init) else { return fixedOptions }
        if let colon = source.firstIndex(of: ":") {
            let scheme = source[..<colon]
            let after = source[source.index(after: colon)...]
            if Self.isScheme(scheme), after.hasPrefix("/"), let next = after.dropFirst().first, next != "/" {
                let slashes = scheme == "local" ? ":///" : "://"
                source = String(scheme) + slashes + after.dropFirst()
            }
        }
        return (fixedOptions.isEmpty ? "" : fixedOptions + "/") + "plain/" + source
    }

    private static func isScheme(_ text: Substring) -> Bool {
        guard let first = text.utf8.first, first.isASCIILetter else { return false }
        return text.utf8.allSatisfy {
            $0.isASCIILetter || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-")
                || $0 == UInt8(ascii: ".")
        }
    }

    /// The source URL from the parts after the options: `plain/…[@ext]` or base64url parts `…[.ext]`.
    static func decodeSource(
        _ parts: ArraySlice<Substring>
    ) throws(ProcessingURLError) -> (String, ProcessingURL.SourceEncoding, String?) {
        guard let first = parts.first else { throw ProcessingURLError(.malformedURL, "the source URL is missing") }
        if first == "plain", parts.count > 1 {
            let joined = parts.dropFirst().joined(separator: "/")
            let pieces = joined.split(separator: "@", omittingEmptySubsequences: false)
            guard let raw = pieces.first, !raw.isEmpty else {
                throw ProcessingURLError(.malformedURL, "the source URL is empty")
            }
            guard pieces.count <= 2 else {
                throw ProcessingURLError(.malformedURL, "more than one extension (@) after the source URL")
            }
            guard let decoded = percentDecoded(raw) else {
                throw ProcessingURLError(.malformedURL, "the source URL has a malformed percent-escape")
            }
            let fileExtension = pieces.count == 2 && !pieces[1].isEmpty ? String(pieces[1]) : nil
            return (decoded, .plain(raw: String(raw)), fileExtension)
        }
        let joined = parts.joined()
        let pieces = joined.split(separator: ".", omittingEmptySubsequences: false)
        guard let encoded = pieces.first, !encoded.isEmpty else {
            throw ProcessingURLError(.malformedURL, "the source URL is empty")
        }
        guard pieces.count <= 2 else {
            throw ProcessingURLError(.malformedURL, "more than one extension (.) after the source URL")
        }
        // imgproxy trims `=` padding before decoding.
        var unpadded = Substring(encoded)
        while unpadded.last == "=" { unpadded = unpadded.dropLast() }
        guard !unpadded.isEmpty, let bytes = URLSigningKey.bytes(base64URL: String(unpadded)),
            let decoded = String(validating: bytes, as: UTF8.self)
        else {
            throw ProcessingURLError(.malformedURL, "the source URL is not valid base64url-encoded UTF-8")
        }
        let fileExtension = pieces.count == 2 && !pieces[1].isEmpty ? String(pieces[1]) : nil
        return (decoded, .base64, fileExtension)
    }

    /// Go's `url.PathUnescape`: `%XX` to its byte (`+` stays); nil for a bad
    /// escape or bytes that are not UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        guard text.contains("%") else { return String(text) }
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.popFirst()?.hexValue, let low = iterator.popFirst()?.hexValue else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

extension UInt8 {
    var isASCIILetter: Bool { (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) }
}
