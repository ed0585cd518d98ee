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
/// a `ProcessingURLError` carrying its HTTP status (403, 404 or 422).
///
/// The path is read as received, still percent-encoded (a server must hand it
/// over undecoded). A raw control byte or `#` anywhere in the target is refused
/// (404; encoded ones in a source URL are the `SourcePolicy`'s 404). With
/// signing keys, everything the client sent must be covered by the signature:
/// a query is refused (403); without keys a query is ignored,
/// as imgproxy does. As imgproxy, the parser first undoes what proxies do to such paths (`%3A` for
/// `:` in the options, `scheme:/` for `scheme://` in a plain source URL), then
/// checks the signature over the result.
public struct ProcessingURLParser: Sendable {
    /// Bounds on what a URL may ask for, beyond the options' own ranges.
    public struct Limits: Sendable, Hashable {
        /// The largest side of a result, in pixels: `width`, `height` (times the
        /// dpr) and padding over it are refused (404); a processor whose output
        /// would grow past it (extend, padding) fails with `.invalidArgument`.
        /// 1–16384 (so one result is at most 1 GiB of RGBA); default 8192.
        public let maxResultDimension: Int
        /// The largest `dpr`, 1–100. Default 8.
        public let maxDPR: Double

        /// Limits; each parameter defaults as its property documents, and is
        /// clamped to the property's range.
        public init(maxResultDimension: Int = 8192, maxDPR: Double = 8) {
            self.maxResultDimension = min(16_384, max(1, maxResultDimension))
            self.maxDPR = maxDPR.isFinite ? min(100, max(1, maxDPR)) : 8
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
    /// imgproxy's `IMGPROXY_PATH_PREFIX`: every image URL's path starts with
    /// it (`/img` serves `/img/%signature/…`); it is not part of what a
    /// signature signs. A path without it is 404. Set it with a leading `/`
    /// and no trailing one. Default "" (none).
    public var pathPrefix = ""
    /// The state every URL's options start from: imgproxy's defaults, with
    /// the server's own where it configures them (`IMGPROXY_STRIP_METADATA`).
    /// Default `ProcessingOptions()`.
    public var defaults = ProcessingOptions()
    /// The presets `preset:NAME` (`pr:`) applies; one named `default` is
    /// applied to every URL before its options. Default none.
    public var presets = ProcessingPresets()
    /// imgproxy's `IMGPROXY_ONLY_PRESETS`: the options segment of a URL is
    /// preset names only (`/sig/thumb:small/plain/…`), separated by `:`.
    /// Default false.
    public var onlyPresets = false
    /// imgproxy's `IMGPROXY_ALLOW_SECURITY_OPTIONS`: whether a URL may set
    /// its own `SecurityLimits` (`msr`, `msfs`, `maf`, `mafr`); otherwise
    /// they are refused with 403. Default false.
    public var allowsSecurityOptions = false
    /// imgproxy's `IMGPROXY_ALLOWED_PROCESSING_OPTIONS`: the option names
    /// (as written: `w` and `width` are two names) a URL's options segment
    /// may use, others refused (`.forbiddenOption`); the options inside
    /// presets are not checked. nil (the default) allows every option.
    public var allowedOptions: Set<String>?
    /// The server's `SecurityLimits`, which a URL's security options replace
    /// for that URL. Default: none set.
    public var security = SecurityLimits()
    /// The image the `watermark` (`wm`) option draws (imgproxy's
    /// `IMGPROXY_WATERMARK_*`); nil (the default) for none, when the option
    /// draws nothing, as in imgproxy.
    public var watermark: WatermarkImage?

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
    /// - Throws: `ProcessingURLError`: 403 for a bad or missing signature, 404
    ///   for a source the policy refuses, a missing file, a malformed URL or
    ///   option, 422 for an output format this server does not encode.
    public func parse(_ target: String) throws(ProcessingURLError) -> ProcessingRequest {
        try parse(target, defaults: ProcessingOptions())
    }

    /// `parse(_:)`, the URL's options applied over `defaults` (the state
    /// before the first option: imgproxy's client hints set `dpr` and `width` there).
    public func parse(_ target: String, defaults: ProcessingOptions) throws(ProcessingURLError) -> ProcessingRequest {
        let url = try parseURL(target, defaults: defaults)
        let source = try sources.resolve(url.source, encoding: url.encoding)
        // Every redirect of the source's download must pass the policy the source passed.
        let policy = sources
        var request = try ProcessingRequest(
            url: url, source: source, limits: limits,
            allowsRedirect: { policy.allowsRedirect(to: $0) }, watermark: watermark)
        request.securityLimits = security.overridden(by: url.options.security)
        return request
    }

    /// The grammar alone: the signature checked and the options and source
    /// URL read, without resolving the source or mapping the options.
    ///
    /// - Throws: `ProcessingURLError` (403, 404 or 422), as `parse(_:)`.
    public func parseURL(_ target: String) throws(ProcessingURLError) -> ProcessingURL {
        try parseURL(target, defaults: ProcessingOptions())
    }

    /// `parseURL(_:)`, the options applied over `defaults`.
    public func parseURL(
        _ target: String, defaults: ProcessingOptions
    ) throws(ProcessingURLError) -> ProcessingURL {
        // Bytes, as imgproxy (Go) reads the path: `/`, `:`, `@`, `.` and `?` split wherever
        // they are, whatever follows them (a Character-wise split would keep "/" with a
        // combining mark after it whole).
        var path = Array(target.utf8)[...]
        guard !path.contains(where: \.isASCIIControl) else {
            throw ProcessingURLError(.malformedURL, "the URL has a control character")
        }
        // A request target never carries a fragment (RFC 9112 §3.2; clients strip it), so a raw `#`
        // is refused in every mode: it would otherwise be read as part of an option or a source.
        guard !path.contains(UInt8(ascii: "#")) else {
            throw ProcessingURLError(
                .malformedURL, "the URL has a raw '#' (a fragment is never sent; encode it as %23)")
        }
        if !signingKeys.isEmpty, path.contains(UInt8(ascii: "?")) {
            throw ProcessingURLError(.badSignature, "a query is not covered by the signature")
        }
        if let query = path.firstIndex(of: UInt8(ascii: "?")) { path = path[..<query] }
        if !pathPrefix.isEmpty {
            guard path.starts(with: pathPrefix.utf8) else {
                throw ProcessingURLError(.malformedURL, "the path does not start with the server's prefix")
            }
            path = path.dropFirst(pathPrefix.utf8.count)
        }
        guard path.first == UInt8(ascii: "/") else {
            throw ProcessingURLError(.malformedURL, "the path does not start with /")
        }
        path = path.dropFirst()
        guard let slash = path.firstIndex(of: UInt8(ascii: "/")), slash != path.startIndex, slash + 1 != path.endIndex
        else {
            throw ProcessingURLError(.malformedURL, "the path is not /signature/options/source")
        }
        let signature = Self.text(path[..<slash])
        let rest = Self.undoingProxyNormalisation(path[(slash + 1)...])
        let isSigned = try checkSignature(signature, path: "/" + Self.text(rest[...]))
        let parts = rest.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        if !onlyPresets, let first = parts.first, ProcessingOptions.ResizingType(rawValue: Self.text(first)) != nil {
            throw ProcessingURLError(.malformedURL, "the basic URL format (/\(Self.text(first))/…) is not supported")
        }
        let context = ProcessingOptions.Context(presets: presets, allowsSecurityOptions: allowsSecurityOptions)
        var options = defaults
        var usedPresets: [String] = []
        if presets["default"] != nil {
            try options.apply(presetNamed: "default", context: context, applying: [], used: &usedPresets)
        }
        var index = 0
        if onlyPresets {
            // imgproxy's only-presets mode: the first segment names presets, whatever it looks like.
            for name in parts[0].split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false) {
                try options.apply(presetNamed: Self.text(name), context: context, applying: [], used: &usedPresets)
            }
            index = 1
        }
        while !onlyPresets, index < parts.count {
            let arguments = parts[index].split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            guard arguments.count > 1 else { break }
            if let allowedOptions, !allowedOptions.contains(Self.text(arguments[0])) {
                throw ProcessingURLError(
                    .forbiddenOption, "option \(Self.text(arguments[0])) is not allowed on this server")
            }
            try options.apply(
                Substring(Self.text(arguments[0])), arguments.dropFirst().map { Substring(Self.text($0)) },
                context: context, applying: [], used: &usedPresets)
            index += 1
        }
        let (source, encoding, fileExtension) = try Self.decodeSource(parts[index...])
        if let fileExtension {
            options.format = try ProcessingOptions.format(named: Substring(fileExtension), option: "extension")
        }
        var url = ProcessingURL(options: options, source: source, isSigned: isSigned, encoding: encoding)
        url.usedPresets = usedPresets
        return url
    }

    /// Checks `signature` against `path` (from its leading `/`); whether a key checked it.
    private func checkSignature(_ signature: String, path: String) throws(ProcessingURLError) -> Bool {
        guard !signingKeys.isEmpty else {
            // imgproxy: a signature segment that looks like an option means the segment is missing.
            if signature.utf8.contains(UInt8(ascii: ":")) {
                throw ProcessingURLError(
                    .badSignature, "the signature segment is missing (the first segment is an option)")
            }
            return false
        }
        guard signingKeys.contains(where: { $0.verifies(signature, path: path) }) else {
            throw ProcessingURLError(.badSignature, "invalid signature")
        }
        return true
    }

    /// UTF-8 bytes as text (the input was a String, and every split is at an ASCII byte, so they are valid).
    static func text(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

    /// imgproxy's `RedenormalizePath`: `%3A` back to `:` in the options, and a
    /// plain source URL's `scheme:/x` (a proxy's merged slashes) back to
    /// `scheme://x` (`local:///x` for local files).
    static func undoingProxyNormalisation(_ path: ArraySlice<UInt8>) -> [UInt8] {
        let marker = Array("/plain/".utf8)
        var options: ArraySlice<UInt8> = path
        var plain: ArraySlice<UInt8>?
        if path.starts(with: marker.dropFirst()) {
            options = []
            plain = path.dropFirst(marker.count - 1)
        } else if let start = firstRange(of: marker, in: path) {
            options = path[..<start]
            plain = path[(start + marker.count)...]
        }
        var result = replacing(Array("%3A".utf8), with: [UInt8(ascii: ":")], in: options)
        guard var source = plain.map(Array.init) else { return result }
        if let colon = source.firstIndex(of: UInt8(ascii: ":")) {
            let scheme = source[..<colon]
            if Self.isScheme(scheme), colon + 2 < source.count, source[colon + 1] == UInt8(ascii: "/"),
                source[colon + 2] != UInt8(ascii: "/")
            {
                let slashes = Array((scheme.elementsEqual("local".utf8) ? ":///" : "://").utf8)
                source = Array(scheme) + slashes + source[(colon + 2)...]
            }
        }
        if !result.isEmpty { result.append(UInt8(ascii: "/")) }
        return result + Array("plain/".utf8) + source
    }

    private static func firstRange(of needle: [UInt8], in haystack: ArraySlice<UInt8>) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        var index = haystack.startIndex
        while index + needle.count <= haystack.endIndex {
            if haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
            index += 1
        }
        return nil
    }

    private static func replacing(_ needle: [UInt8], with replacement: [UInt8], in bytes: ArraySlice<UInt8>) -> [UInt8]
    {
        var result: [UInt8] = []
        result.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            if index + needle.count <= bytes.endIndex, bytes[index..<(index + needle.count)].elementsEqual(needle) {
                result += replacement
                index += needle.count
            } else {
                result.append(bytes[index])
                index += 1
            }
        }
        return result
    }

    private static func isScheme(_ bytes: ArraySlice<UInt8>) -> Bool {
        guard let first = bytes.first, first.isASCIILetter else { return false }
        return bytes.allSatisfy {
            $0.isASCIILetter || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-")
                || $0 == UInt8(ascii: ".")
        }
    }

    /// The source URL from the parts after the options: `plain/…[@ext]` or base64url parts `…[.ext]`.
    static func decodeSource(
        _ parts: ArraySlice<ArraySlice<UInt8>>
    ) throws(ProcessingURLError) -> (String, ProcessingURL.SourceEncoding, String?) {
        guard let first = parts.first else { throw ProcessingURLError(.malformedURL, "the source URL is missing") }
        if first.elementsEqual("plain".utf8), parts.count > 1 {
            let joined = Array(parts.dropFirst().joined(separator: [UInt8(ascii: "/")]))
            let pieces = joined.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false)
            guard let raw = pieces.first, !raw.isEmpty else {
                throw ProcessingURLError(.malformedURL, "the source URL is empty")
            }
            guard pieces.count <= 2 else {
                throw ProcessingURLError(.malformedURL, "more than one extension (@) after the source URL")
            }
            guard let decoded = percentDecoded(raw) else {
                throw ProcessingURLError(.malformedURL, "the source URL has a malformed percent-escape")
            }
            let fileExtension = pieces.count == 2 && !pieces[1].isEmpty ? text(pieces[1]) : nil
            return (decoded, .plain(raw: text(raw)), fileExtension)
        }
        // imgproxy Pro's encrypted source URL (`/enc/%encrypted_source_url`): named, not read as base64.
        if first.elementsEqual("enc".utf8), parts.count > 1 {
            throw ProcessingURLError(
                .unsupportedOption, "encrypted source URLs (/enc/, imgproxy Pro) are not supported")
        }
        let joined = Array(parts.joined())
        let pieces = joined.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard var encoded = pieces.first, !encoded.isEmpty else {
            throw ProcessingURLError(.malformedURL, "the source URL is empty")
        }
        guard pieces.count <= 2 else {
            throw ProcessingURLError(.malformedURL, "more than one extension (.) after the source URL")
        }
        // imgproxy trims `=` padding before decoding.
        while encoded.last == UInt8(ascii: "=") { encoded = encoded.dropLast() }
        guard !encoded.isEmpty, let bytes = URLSigningKey.bytes(base64URL: text(encoded)),
            let decoded = String(validating: bytes, as: UTF8.self)
        else {
            throw ProcessingURLError(.malformedURL, "the source URL is not valid base64url-encoded UTF-8")
        }
        let fileExtension = pieces.count == 2 && !pieces[1].isEmpty ? text(pieces[1]) : nil
        return (decoded, .base64, fileExtension)
    }

    /// Go's `url.PathUnescape`: `%XX` to its byte (`+` stays); nil for a bad
    /// escape or bytes that are not UTF-8.
    static func percentDecoded(_ text: ArraySlice<UInt8>) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count)
        var iterator = text
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
    /// C0 controls (NUL, ESC, CR, LF…) and DEL.
    var isASCIIControl: Bool { self < 0x20 || self == 0x7F }
}
