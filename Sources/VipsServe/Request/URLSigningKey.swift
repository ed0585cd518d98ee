import CGLib
import Foundation
import VipsCore

/// A key and salt that sign processing URLs, as imgproxy's `IMGPROXY_KEY` and
/// `IMGPROXY_SALT` do.
///
/// The signature of a path is HMAC-SHA256, keyed with `key`, over `salt`
/// followed by the path after the signature segment (from its leading `/`),
/// encoded as URL-safe base64 without padding: 43 characters for the whole
/// digest. The digest is GLib's `GHmac` (linked through libvips). As imgproxy's
/// `IMGPROXY_SIGNATURE_SIZE`, `signatureSize` keeps only the digest's first
/// bytes (default all 32); a signature of another length is refused.
public struct URLSigningKey: Sendable, Hashable {
    /// The HMAC key.
    public let key: [UInt8]
    /// The bytes written before the path.
    public let salt: [UInt8]
    /// How many of the digest's bytes a signature carries, 1–32 (imgproxy's
    /// `IMGPROXY_SIGNATURE_SIZE`; default 32, the whole digest).
    public let signatureSize: Int

    /// A pair from raw bytes; neither may be empty.
    ///
    /// - Throws: `.invalidArgument` for an empty key or salt, or a
    ///   `signatureSize` outside 1–32.
    public init(key: [UInt8], salt: [UInt8], signatureSize: Int = 32) throws(VipsError) {
        guard !key.isEmpty, !salt.isEmpty else {
            throw VipsError(.invalidArgument, "a URL signing key and salt must not be empty")
        }
        guard (1...Self.digestLength).contains(signatureSize) else {
            throw VipsError(
                .invalidArgument, "a URL signature size is 1 to \(Self.digestLength) bytes, not \(signatureSize)")
        }
        self.key = key
        self.salt = salt
        self.signatureSize = signatureSize
    }

    /// A pair from hex text, as imgproxy's configuration gives them (`736563726574`).
    ///
    /// - Throws: `.invalidArgument` for text that is not an even number of hex
    ///   digits, or empty; a `signatureSize` outside 1–32.
    public init(hexKey: String, hexSalt: String, signatureSize: Int = 32) throws(VipsError) {
        guard let key = Self.bytes(hex: hexKey) else {
            throw VipsError(.invalidArgument, "the URL signing key is not hex")
        }
        guard let salt = Self.bytes(hex: hexSalt) else {
            throw VipsError(.invalidArgument, "the URL signing salt is not hex")
        }
        try self.init(key: key, salt: salt, signatureSize: signatureSize)
    }

    /// The signature of `path` (the part of the URL after the signature segment,
    /// starting with `/`; one is put first when it does not), as it goes in the URL.
    public func signature(forPath path: String) -> String {
        Self.base64URL(Array(digest(forPath: path).prefix(signatureSize)))
    }

    /// Whether `signature` is this key's signature of `path`, compared in
    /// constant time (the time does not depend on where the bytes differ).
    ///
    /// Only the canonical spelling verifies: base64url's last character may
    /// carry bits no byte uses, and a signature whose unused bits are not zero
    /// is refused, so one signed image has one URL (a CDN keys its cache by
    /// the URL).
    public func verifies(_ signature: String, path: String) -> Bool {
        guard let given = Self.bytes(base64URL: signature), given.count == signatureSize,
            Self.base64URL(given) == signature
        else { return false }
        let expected = digest(forPath: path)
        var difference: UInt8 = 0
        for index in 0..<signatureSize { difference |= given[index] ^ expected[index] }
        return difference == 0
    }

    static let digestLength = 32

    /// HMAC-SHA256(key, salt + path) by GHmac.
    func digest(forPath path: String) -> [UInt8] {
        var message = salt
        if !path.hasPrefix("/") { message.append(UInt8(ascii: "/")) }
        message.append(contentsOf: path.utf8)
        var digest = [UInt8](repeating: 0, count: Self.digestLength)
        key.withUnsafeBufferPointer { keyBytes in
            guard let hmac = g_hmac_new(G_CHECKSUM_SHA256, keyBytes.baseAddress, gsize(keyBytes.count)) else { return }
            defer { g_hmac_unref(hmac) }
            message.withUnsafeBufferPointer { g_hmac_update(hmac, $0.baseAddress, gssize($0.count)) }
            var length = gsize(Self.digestLength)
            digest.withUnsafeMutableBufferPointer { g_hmac_get_digest(hmac, $0.baseAddress, &length) }
        }
        return digest
    }

    /// URL-safe base64 without padding.
    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    /// Decodes URL-safe base64 without padding, strictly (no `+`, `/`, `=` or other characters).
    static func bytes(base64URL text: String) -> [UInt8]? {
        guard text.count % 4 != 1,
            text.utf8.allSatisfy({ $0.isBase64URLDigit })
        else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard).map { [UInt8]($0) }
    }

    /// Hex digits as bytes; nil for an odd count, another character, or nothing.
    static func bytes(hex text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = digits[index].hexValue, let low = digits[index + 1].hexValue else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}

extension UInt8 {
    /// Whether the byte is a letter, digit, `-` or `_`.
    var isBase64URLDigit: Bool {
        (0x41...0x5A).contains(self) || (0x61...0x7A).contains(self) || (0x30...0x39).contains(self) || self == 0x2D
            || self == 0x5F
    }

    /// The value of an ASCII hex digit, either case.
    var hexValue: UInt8? {
        switch self {
        case 0x30...0x39: return self - 0x30
        case 0x41...0x46: return self - 0x41 + 10
        case 0x61...0x66: return self - 0x61 + 10
        default: return nil
        }
    }
}
