import Foundation
import VipsLoad

/// Where a server's sources may come from: `local:///path` files under one
/// root folder, and `http(s)://` URLs whose host matches an allowed pattern.
/// Everything else is refused (404, as imgproxy).
///
/// A local path must stay inside the root: `..` components, NUL bytes,
/// backslashes and (in a plain source URL) the encoded slashes `%2F` and `%5C`
/// and `%00` are refused before the file system is asked; the path is then
/// resolved with `realpath` (every symbolic link followed) and must lie in the
/// root's own real path, on a component boundary (`/srv/img` does not admit
/// `/srv/images`). What is missing or not a regular file is 404. Messages
/// never contain a path of the machine.
///
/// The file is opened later, by the pipeline, by its resolved path: a link
/// swapped in between (by someone who may write under the root) is not seen.
///
/// HTTP sources must have no credentials and a host an `allowedSources`
/// pattern admits. Which addresses the host may resolve to is the HTTP
/// loader's `SourceAddressPolicy`, checked when it connects.
public struct SourcePolicy: Sendable {
    /// The real path of the folder `local://` sources are read from; nil refuses them.
    public let localRoot: String?
    /// The patterns an `http(s)` source's host must match (none: no HTTP sources).
    public let allowedSources: [SourcePattern]

    /// A policy serving files under `localRoot` (resolved now) and URLs matching `allowedSources`.
    ///
    /// - Throws: `.fileNotFound` when the root does not exist; `.invalidArgument`
    ///   when it is not a folder.
    public init(localRoot: String? = nil, allowedSources: [SourcePattern] = []) throws(VipsError) {
        if let localRoot {
            guard let resolved = Self.realPath(localRoot) else {
                throw VipsError(.fileNotFound, "\(localRoot): no such folder for local sources")
            }
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: resolved, isDirectory: &isFolder), isFolder.boolValue else {
                throw VipsError(.invalidArgument, "\(localRoot): the root of local sources is not a folder")
            }
            self.localRoot = resolved
        } else {
            self.localRoot = nil
        }
        self.allowedSources = allowedSources
    }

    /// A policy that admits no source: every image URL is refused (404).
    public static let none = SourcePolicy(resolvedRoot: nil, allowedSources: [])

    private init(resolvedRoot: String?, allowedSources: [SourcePattern]) {
        localRoot = resolvedRoot
        self.allowedSources = allowedSources
    }

    /// The source a decoded source URL names, if the policy admits it.
    ///
    /// - Throws: `.sourceNotAllowed`, `.sourceNotFound` or `.malformedURL` (all 404).
    public func source(for url: String) throws(ProcessingURLError) -> ImageSource {
        try resolve(url, encoding: .base64)
    }

    func resolve(_ url: String, encoding: ProcessingURL.SourceEncoding) throws(ProcessingURLError) -> ImageSource {
        // Bytes throughout: a path is bytes to the kernel, and Characters would join "/" or "."
        // with a combining mark after them, and compare canonically equivalent names as equal.
        let bytes = Array(url.utf8)
        let scheme = bytes.prefix { $0 != UInt8(ascii: ":") }.map { $0 | 0x20 }
        if scheme.elementsEqual("local".utf8), bytes.dropFirst(5).starts(with: "://".utf8) {
            return try localSource(bytes.dropFirst(8), encoding: encoding)
        }
        if scheme.elementsEqual("http".utf8) || scheme.elementsEqual("https".utf8) { return try httpSource(url) }
        throw ProcessingURLError(.sourceNotAllowed, "only local:// and allowed http(s):// sources are served")
    }

    // MARK: - Local files

    private func localSource(
        _ path: ArraySlice<UInt8>, encoding: ProcessingURL.SourceEncoding
    ) throws(ProcessingURLError) -> ImageSource {
        func refuse(_ why: String) -> ProcessingURLError { ProcessingURLError(.sourceNotAllowed, why) }
        guard let root = localRoot else { throw refuse("local sources are not enabled") }
        guard path.first == UInt8(ascii: "/") else { throw refuse("a local source is local:///path") }
        if case .plain(let raw) = encoding {
            let lowered = Array(raw.utf8).map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
            for escape in ["%2f", "%5c", "%00"] where Self.contains(Array(escape.utf8), in: lowered) {
                throw refuse("encoded slashes, backslashes and NUL are not allowed in a local source")
            }
        }
        guard !path.contains(0), !path.contains(UInt8(ascii: "\\")) else {
            throw refuse("backslashes and NUL are not allowed in a local source")
        }
        var components: [ArraySlice<UInt8>] = []
        for component in path.split(separator: UInt8(ascii: "/")) {
            if component.elementsEqual("..".utf8) { throw refuse("a local source may not contain ..") }
            if !component.elementsEqual(".".utf8) { components.append(component) }
        }
        guard !components.isEmpty else { throw ProcessingURLError(.sourceNotFound, "no such image") }
        var candidate = Array((root == "/" ? "" : root).utf8)
        for component in components {
            candidate.append(UInt8(ascii: "/"))
            candidate += component
        }
        let (real, code) = Self.followingLinks(String(decoding: candidate, as: UTF8.self))
        guard let resolved = real else {
            if code == EACCES { throw refuse("the image is not readable") }
            throw ProcessingURLError(.sourceNotFound, "no such image")
        }
        guard root == "/" || resolved.utf8.starts(with: (root + "/").utf8) else {
            throw refuse("the local source leaves the root folder")
        }
        var status = stat()
        guard stat(resolved, &status) == 0 else { throw ProcessingURLError(.sourceNotFound, "no such image") }
        guard status.st_mode & S_IFMT == S_IFREG else { throw ProcessingURLError(.sourceNotFound, "not an image file") }
        return .file(resolved)
    }

    private static func contains(_ needle: [UInt8], in haystack: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains {
            haystack[$0..<($0 + needle.count)].elementsEqual(needle)
        }
    }

    /// `realpath(3)`: the absolute path with every link followed, or nil and the errno.
    static func followingLinks(_ path: String) -> (String?, Int32) {
        guard let resolved = realpath(path, nil) else { return (nil, errno) }
        defer { free(resolved) }
        return (String(cString: resolved), 0)
    }

    static func realPath(_ path: String) -> String? { followingLinks(path).0 }

    // MARK: - HTTP

    /// Whether a redirect to `url` may be followed: the target passes the
    /// same check as an `http(s)` source a client names (a host, scheme and
    /// port an `allowedSources` pattern admits, no credentials), so a
    /// redirect never reaches a source a direct request could not. An
    /// `ImageServer` asks it about every redirect of every download its
    /// requests make (`ImageRequest.allowsRedirect`); a refused redirect is
    /// answered 404, as a direct request for that source is.
    public func allowsRedirect(to url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return false }
        do {
            _ = try httpSource(url.absoluteString)
            return true
        } catch {
            return false
        }
    }

    private func httpSource(_ text: String) throws(ProcessingURLError) -> ImageSource {
        func refuse(_ why: String) -> ProcessingURLError { ProcessingURLError(.sourceNotAllowed, why) }
        guard !allowedSources.isEmpty else { throw refuse("http(s) sources are not enabled") }
        guard
            !text.unicodeScalars.contains(where: {
                $0.value < 0x20 || $0.value == 0x7F || $0 == "\\" || (0x80..<0xA0).contains($0.value)
            })
        else { throw refuse("control characters and backslashes are not allowed in a source URL") }
        let bytes = Array(text.utf8)
        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes[colon...].starts(with: "://".utf8) else {
            throw refuse("not an http(s) URL")
        }
        let scheme = String(decoding: bytes[..<colon], as: UTF8.self).lowercased()
        let authorityStart = colon + 3
        let authorityEnd =
            bytes[authorityStart...].firstIndex {
                $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#")
            }
            ?? bytes.endIndex
        let authority = bytes[authorityStart..<authorityEnd]
        guard !authority.contains(UInt8(ascii: "@")) else {
            throw refuse("credentials in a source URL are not allowed")
        }
        guard !authority.contains(UInt8(ascii: "%")), !authority.contains(UInt8(ascii: " ")) else {
            throw refuse("an encoded host or a space in it is not allowed")
        }
        let encoded =
            String(decoding: bytes[..<authorityEnd], as: UTF8.self) + Self.escapingDisallowed(bytes[authorityEnd...])
        guard let url = URL(string: encoded), var host = url.host?.lowercased(), !host.isEmpty else {
            throw ProcessingURLError(.malformedURL, "the source URL is not a valid URL")
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.hasSuffix(".") { host = String(host.dropLast()) }
        guard allowedSources.contains(where: { $0.matches(scheme: scheme, host: host, port: url.port) }) else {
            throw refuse("the source host is not allowed")
        }
        return .url(url)
    }

    /// The path, query and fragment with the characters a URL cannot hold
    /// (non-ASCII, `"`, `<`, `>`, `^`, `` ` ``, `{`, `|`, `}`) percent-encoded; `%` stays as written.
    static func escapingDisallowed(_ bytes: ArraySlice<UInt8>) -> String {
        var result = ""
        for byte in bytes {
            let allowed =
                byte < 0x80 && byte > 0x20 && !"\"<>^`{|}".utf8.contains(byte)
            if allowed {
                result.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                result += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return result
    }
}
