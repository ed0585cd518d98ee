import Foundation

/// Keeps the credentials of URLs (`http://user:password@host/…`) out of
/// everything VipsLoad prints or stores: error messages, labels and the disk
/// cache's metadata.
public enum URLRedaction {
    /// What replaces the userinfo of a URL in text meant for people.
    static let placeholder = "***"

    /// `text` with the userinfo (`user:password@`) of every URL in it
    /// replaced by `***@`: `http://u:p@host/a.jpg` becomes `http://***@host/a.jpg`.
    /// Text without credentials is returned unchanged.
    public static func redacted(_ text: String) -> String {
        replacingUserinfo(in: text) { _ in placeholder }
    }

    /// `url`'s text with its userinfo replaced by `***@`.
    public static func redacted(_ url: URL) -> String {
        redacted(url.absoluteString)
    }

    /// The form of a source key that is stored (the disk cache's key, written
    /// into its metadata): the userinfo is replaced by its SHA-256 digest, so
    /// entries for different credentials stay apart and no secret reaches
    /// the disk. Keys without credentials are returned unchanged. For keys a
    /// tool stores beside the pipeline's (a thumbnail made from a URL).
    public static func storageKey(_ key: String) -> String {
        replacingUserinfo(in: key) { userinfo in "sha256-" + SHA256.hexDigest(of: Array(userinfo.utf8)) }
    }

    /// Replaces the userinfo of each `scheme://userinfo@host` in `text` by `replacement(userinfo)`.
    private static func replacingUserinfo(in text: String, with replacement: (Substring) -> String) -> String {
        guard text.contains("@"), text.contains("://") else { return text }
        let scalars = Array(text.unicodeScalars)
        var output = String.UnicodeScalarView()
        var index = 0
        var changed = false
        while index < scalars.count {
            // "://" after at least one scheme character starts an authority.
            if index + 2 < scalars.count, scalars[index] == ":", scalars[index + 1] == "/", scalars[index + 2] == "/",
                index > 0, isSchemeCharacter(scalars[index - 1])
            {
                output.append(contentsOf: scalars[index...index + 2])
                let start = index + 3
                var end = start
                while end < scalars.count, !endsAuthority(scalars[end]) { end += 1 }
                // The userinfo ends at the authority's last "@".
                if let at = scalars[start..<end].lastIndex(of: "@") {
                    var userinfo = String.UnicodeScalarView()
                    userinfo.append(contentsOf: scalars[start..<at])
                    output.append(contentsOf: replacement(Substring(String(userinfo))).unicodeScalars)
                    output.append(contentsOf: scalars[at..<end])
                    changed = true
                } else {
                    output.append(contentsOf: scalars[start..<end])
                }
                index = end
                continue
            }
            output.append(scalars[index])
            index += 1
        }
        return changed ? String(output) : text
    }

    private static func isSchemeCharacter(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
            || scalar == "+" || scalar == "-" || scalar == "."
    }

    /// The characters after which an authority cannot go on: its delimiters
    /// (RFC 3986 §3.2), and the white space and quotes around a URL in text.
    private static func endsAuthority(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "/", "?", "#", " ", "\t", "\n", "\r", "\"", "'", "<", ">", "(", ")": return true
        default: return false
        }
    }
}

/// SHA-256 (FIPS 180-4), for the digests of credentials in stored keys:
/// Foundation on Linux has no digest API and no package outside the
/// toolchain may be used. Not on any hot path.
enum SHA256 {
    private static let roundConstants: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
    ]

    /// The digest of `message` as 64 lowercase hex digits.
    static func hexDigest(of message: [UInt8]) -> String {
        digest(of: message).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// The 32-byte digest of `message`.
    static func digest(of message: [UInt8]) -> [UInt8] {
        var hash: [UInt32] = [
            0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
        ]
        // Padding: a 1 bit, zeros to 56 mod 64 bytes, then the bit length, big-endian.
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bitLength = UInt64(message.count) &* 8
        for shift in stride(from: 56, through: 0, by: -8) {
            padded.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift)))
        }

        var schedule = [UInt32](repeating: 0, count: 64)
        for block in stride(from: 0, to: padded.count, by: 64) {
            for t in 0..<16 {
                let i = block + 4 * t
                schedule[t] =
                    UInt32(padded[i]) << 24 | UInt32(padded[i + 1]) << 16 | UInt32(padded[i + 2]) << 8
                    | UInt32(padded[i + 3])
            }
            for t in 16..<64 {
                let s0 = rotr(schedule[t - 15], 7) ^ rotr(schedule[t - 15], 18) ^ (schedule[t - 15] >> 3)
                let s1 = rotr(schedule[t - 2], 17) ^ rotr(schedule[t - 2], 19) ^ (schedule[t - 2] >> 10)
                schedule[t] = schedule[t - 16] &+ s0 &+ schedule[t - 7] &+ s1
            }
            var a = hash[0], b = hash[1], c = hash[2], d = hash[3], e = hash[4], f = hash[5], g = hash[6], h = hash[7]
            for t in 0..<64 {
                let sum1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
                let choice = (e & f) ^ (~e & g)
                let temp1 = h &+ sum1 &+ choice &+ roundConstants[t] &+ schedule[t]
                let sum0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
                let majority = (a & b) ^ (a & c) ^ (b & c)
                let temp2 = sum0 &+ majority
                h = g; g = f; f = e; e = d &+ temp1
                d = c; c = b; b = a; a = temp1 &+ temp2
            }
            hash[0] = hash[0] &+ a; hash[1] = hash[1] &+ b; hash[2] = hash[2] &+ c; hash[3] = hash[3] &+ d
            hash[4] = hash[4] &+ e; hash[5] = hash[5] &+ f; hash[6] = hash[6] &+ g; hash[7] = hash[7] &+ h
        }
        return hash.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> UInt32(24 - 8 * $0)) } }
    }

    private static func rotr(_ value: UInt32, _ count: UInt32) -> UInt32 {
        (value >> count) | (value << (32 - count))
    }
}
