import Foundation

/// Writes small, valid ICC v2 matrix/TRC profiles (RGB) and TRC profiles
/// (grey), so the colour tests need no profile files from a package.
enum ICCProfileWriter {
    /// Adobe RGB (1998): its D50-adapted colorants and its gamma of 563/256.
    static func adobeRGB() -> Data {
        rgb(
            description: "Adobe RGB (1998) compatible (VipsLoad tests)",
            colorants: [[0.6097, 0.3111, 0.0195], [0.2053, 0.6257, 0.0609], [0.1492, 0.0632, 0.7446]],
            gamma: 563.0 / 256)
    }

    /// A grey profile with a plain gamma curve (1.8, the old Mac grey), unlike sRGB's.
    static func grey(gamma: Double = 1.8) -> Data {
        profile(
            colourSpace: "GRAY",
            tags: [
                ("desc", description("Grey gamma \(gamma) (VipsLoad tests)")),
                ("wtpt", xyz([0.9642, 1.0, 0.8249])),
                ("kTRC", curve(gamma: gamma))
            ])
    }

    static func rgb(description text: String, colorants: [[Double]], gamma: Double) -> Data {
        let trc = curve(gamma: gamma)
        return profile(
            colourSpace: "RGB ",
            tags: [
                ("desc", description(text)),
                ("wtpt", xyz([0.9642, 1.0, 0.8249])),
                ("rXYZ", xyz(colorants[0])), ("gXYZ", xyz(colorants[1])), ("bXYZ", xyz(colorants[2])),
                ("rTRC", trc), ("gTRC", trc), ("bTRC", trc)
            ])
    }

    /// Header, tag table and tag data (each tag 4-byte aligned).
    static func profile(colourSpace: String, tags: [(String, [UInt8])]) -> Data {
        var data = [UInt8]()
        let tableSize = 4 + tags.count * 12
        var offset = 128 + tableSize
        var table = bigEndian(UInt32(tags.count))
        for (name, bytes) in tags {
            table += ascii(name) + bigEndian(UInt32(offset)) + bigEndian(UInt32(bytes.count))
            data += bytes + [UInt8](repeating: 0, count: (4 - bytes.count % 4) % 4)
            offset += bytes.count + (4 - bytes.count % 4) % 4
        }
        var header = [UInt8](repeating: 0, count: 128)
        func put(_ bytes: [UInt8], at index: Int) { header.replaceSubrange(index..<(index + bytes.count), with: bytes) }
        put(bigEndian(UInt32(128 + tableSize + data.count)), at: 0)
        put([0x02, 0x10, 0, 0], at: 8) // version 2.1
        put(ascii("mntr"), at: 12)
        put(ascii(colourSpace), at: 16)
        put(ascii("XYZ "), at: 20)
        put([0x07, 0xEA, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0], at: 24) // 2026-01-01
        put(ascii("acsp"), at: 36)
        put(Array(xyz([0.9642, 1.0, 0.8249])[8...]), at: 68) // PCS illuminant D50
        return Data(header + table + data)
    }

    static func ascii(_ text: String) -> [UInt8] { Array(text.utf8) }

    static func fixed(_ value: Double) -> [UInt8] { bigEndian(UInt32(bitPattern: Int32((value * 65536).rounded()))) }

    static func xyz(_ values: [Double]) -> [UInt8] { ascii("XYZ ") + [0, 0, 0, 0] + values.flatMap(fixed) }

    static func curve(gamma: Double) -> [UInt8] {
        ascii("curv") + [0, 0, 0, 0] + bigEndian(1) + [
            UInt8(Int(gamma)), UInt8(Int(((gamma - gamma.rounded(.down)) * 256).rounded()))
        ]
    }

    /// textDescriptionType (v2): ASCII, then empty Unicode and ScriptCode parts.
    static func description(_ text: String) -> [UInt8] {
        let bytes = ascii(text) + [0]
        return ascii("desc") + [0, 0, 0, 0] + bigEndian(UInt32(bytes.count)) + bytes + [0, 0, 0, 0, 0, 0, 0, 0]
            + [0, 0, 0] + [UInt8](repeating: 0, count: 67)
    }
}
