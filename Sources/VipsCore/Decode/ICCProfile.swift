import Foundation

/// What the decoder needs to know about an embedded ICC profile: its colour
/// space, and whether it describes sRGB closely enough that its pixels can be
/// used as they are (no colour transform).
///
/// A hardened reader of untrusted bytes: every offset and length is checked
/// against the buffer, nothing is allocated from a declared size, and any
/// malformed profile is reported as `nil` (the decoder then lets libvips,
/// which uses Little CMS, decide whether it can use it).
struct ICCProfile: Equatable {
    /// The profile's data colour space (header bytes 16–19).
    enum ColourSpace: Equatable {
        case rgb, grey, cmyk, other
    }

    let colourSpace: ColourSpace
    /// True for an RGB profile with sRGB's primaries (D50-adapted, as every
    /// ICC v2/v4 profile stores them) and sRGB's tone curve on all three
    /// channels, or a grey profile with sRGB's tone curve.
    let isSRGB: Bool

    /// Parses the header and the tags this type looks at; nil when the bytes are no ICC profile.
    init?(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 132, bytes.count <= 64 << 20 else { return nil }
        let reader = Reader(bytes: bytes)
        guard reader.tag(at: 36) == Self.signature("acsp") else { return nil }
        switch reader.tag(at: 16) {
        case Self.signature("RGB "): colourSpace = .rgb
        case Self.signature("GRAY"): colourSpace = .grey
        case Self.signature("CMYK"): colourSpace = .cmyk
        default: colourSpace = .other
        }
        guard let count = reader.uint32(at: 128), count <= 1024, 132 + Int(count) * 12 <= bytes.count else {
            return nil
        }
        var tags: [UInt32: (offset: Int, size: Int)] = [:]
        for index in 0..<Int(count) {
            let entry = 132 + index * 12
            guard let signature = reader.uint32(at: entry), let offset = reader.uint32(at: entry + 4),
                let size = reader.uint32(at: entry + 8)
            else { return nil }
            let (end, overflow) = Int(offset).addingReportingOverflow(Int(size))
            guard !overflow, end <= bytes.count, size >= 8 else { continue }
            tags[signature] = (Int(offset), Int(size))
        }
        func curve(_ name: String) -> ToneCurve? {
            tags[Self.signature(name)].flatMap { ToneCurve(reader, offset: $0.offset, size: $0.size) }
        }
        switch colourSpace {
        case .rgb:
            let colorants = ["rXYZ", "gXYZ", "bXYZ"].map { name in
                tags[Self.signature(name)].flatMap { reader.xyz(at: $0.offset) }
            }
            let primariesMatch = zip(colorants, Self.srgbColorants).allSatisfy { found, expected in
                guard let found else { return false }
                return zip(found, expected).allSatisfy { abs($0 - $1) < 0.01 }
            }
            isSRGB = primariesMatch && ["rTRC", "gTRC", "bTRC"].allSatisfy { curve($0)?.isSRGB == true }
        case .grey:
            isSRGB = curve("kTRC")?.isSRGB == true
        case .cmyk, .other:
            isSRGB = false
        }
    }

    /// sRGB's red, green and blue colorants adapted to D50 (IEC 61966-2-1 via Bradford).
    static let srgbColorants: [[Double]] = [
        [0.4361, 0.2225, 0.0139], [0.3851, 0.7169, 0.0971], [0.1431, 0.0606, 0.7141]
    ]

    static func signature(_ text: String) -> UInt32 {
        text.utf8.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Bounds-checked big-endian reads.
    struct Reader {
        let bytes: UnsafeRawBufferPointer

        func uint32(at offset: Int) -> UInt32? {
            guard offset >= 0, offset <= bytes.count - 4 else { return nil }
            return (0..<4).reduce(UInt32(0)) { $0 << 8 | UInt32(bytes[offset + $1]) }
        }

        func uint16(at offset: Int) -> UInt16? {
            guard offset >= 0, offset <= bytes.count - 2 else { return nil }
            return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
        }

        func tag(at offset: Int) -> UInt32? { uint32(at: offset) }

        /// An s15Fixed16Number.
        func fixed(at offset: Int) -> Double? {
            uint32(at: offset).map { Double(Int32(bitPattern: $0)) / 65536 }
        }

        /// The three numbers of an XYZType tag.
        func xyz(at offset: Int) -> [Double]? {
            guard tag(at: offset) == ICCProfile.signature("XYZ "),
                let x = fixed(at: offset + 8), let y = fixed(at: offset + 12), let z = fixed(at: offset + 16)
            else { return nil }
            return [x, y, z]
        }
    }

    /// A 'curv' or 'para' tone curve, evaluated where it matters.
    struct ToneCurve {
        let evaluate: (Double) -> Double

        init?(_ reader: Reader, offset: Int, size: Int) {
            let kind = reader.tag(at: offset)
            if kind == ICCProfile.signature("curv") {
                guard let count = reader.uint32(at: offset + 8), count >= 2, count <= 65536,
                    12 + Int(count) * 2 <= size
                else { return nil }
                // Gamma-only (count 1) and identity (count 0) curves are never sRGB's.
                var table = [Double]()
                table.reserveCapacity(Int(count))
                for index in 0..<Int(count) {
                    guard let value = reader.uint16(at: offset + 12 + index * 2) else { return nil }
                    table.append(Double(value) / 65535)
                }
                evaluate = { x in
                    let position = x * Double(table.count - 1)
                    let low = min(table.count - 2, Int(position))
                    let fraction = position - Double(low)
                    return table[low] * (1 - fraction) + table[low + 1] * fraction
                }
            } else if kind == ICCProfile.signature("para") {
                guard let function = reader.uint16(at: offset + 8) else { return nil }
                let counts: [UInt16: Int] = [0: 1, 1: 3, 2: 4, 3: 5, 4: 7]
                guard let count = counts[function], 12 + count * 4 <= size else { return nil }
                var p = [Double]()
                for index in 0..<count {
                    guard let value = reader.fixed(at: offset + 12 + index * 4) else { return nil }
                    p.append(value)
                }
                func power(_ base: Double) -> Double { base <= 0 ? 0 : pow(base, p[0]) }
                switch function {
                case 0: evaluate = { power($0) }
                case 1: evaluate = { $0 >= -p[2] / p[1] ? power(p[1] * $0 + p[2]) : 0 }
                case 2: evaluate = { $0 >= -p[2] / p[1] ? power(p[1] * $0 + p[2]) + p[3] : p[3] }
                case 3: evaluate = { $0 >= p[4] ? power(p[1] * $0 + p[2]) : p[3] * $0 }
                default: evaluate = { $0 >= p[4] ? power(p[1] * $0 + p[2]) + p[5] : p[3] * $0 + p[6] }
                }
            } else {
                return nil
            }
        }

        /// Within 0.002 (linear light) of sRGB's curve across the range: a
        /// gamma 2.2 curve differs by 0.004 at 0.1, so it does not pass.
        var isSRGB: Bool {
            stride(from: 0.05, through: 1.0, by: 0.05).allSatisfy { x in
                let expected = x <= 0.04045 ? x / 12.92 : pow((x + 0.055) / 1.055, 2.4)
                let value = evaluate(x)
                return value.isFinite && abs(value - expected) < 0.002
            }
        }
    }
}
