/// A Truevision TGA file's header: the 18-byte header, the colour map's
/// place, and the TGA 2.0 footer's word on alpha. TGA has no magic number,
/// so `isPlausible` is the strict check the format sniffer uses, after every
/// format that has one.
struct TGAHeader {
    /// What the pixels are.
    enum Kind: Equatable {
        /// Indices into the colour map (image types 1 and 9).
        case colourMapped
        /// Colours (types 2 and 10).
        case trueColour
        /// Grey levels, with alpha at 16 bits (types 3 and 11).
        case grey
    }

    var kind: Kind
    /// Run-length encoded (image types 9, 10, 11).
    var rle: Bool
    var width: Int
    var height: Int
    /// Bits per stored pixel: 8, 15, 16, 24 or 32.
    var depth: Int
    /// The colour map's first index, entries and bits per entry (15, 16, 24 or 32).
    var mapFirst: Int
    var mapLength: Int
    var mapDepth: Int
    /// Where the colour map and the pixel data start.
    var mapOffset: Int
    var dataOffset: Int
    /// The first stored row is the top one (descriptor bit 5).
    var topDown: Bool
    /// Rows are stored right to left (descriptor bit 4).
    var rightToLeft: Bool
    /// Whether the decoded image has alpha: 32-bit colours or colour map entries,
    /// 16-bit grey, 16-bit colours that declare an alpha bit; unless a TGA 2.0
    /// extension area says the file has none.
    var hasAlpha: Bool

    /// Whether the first bytes can be a TGA header: a known image type with a
    /// matching colour map and depth, sides that are not zero and a valid
    /// descriptor. Random bytes pass this about once in ten million.
    static func isPlausible(_ prefix: [UInt8]) -> Bool {
        guard prefix.count >= 18 else { return false }
        let (mapType, imageType, mapDepth, depth, descriptor) = (
            prefix[1], prefix[2], prefix[7], prefix[16], prefix[17]
        )
        let width = Int(prefix[12]) | Int(prefix[13]) << 8, height = Int(prefix[14]) | Int(prefix[15]) << 8
        let mapLength = Int(prefix[5]) | Int(prefix[6]) << 8
        guard width > 0, height > 0, descriptor & 0xC0 == 0, mapType <= 1 else { return false }
        guard descriptor & 0x0F <= 8 else { return false }
        if mapType == 1 { guard [15, 16, 24, 32].contains(mapDepth), mapLength > 0 else { return false } }
        switch imageType {
        case 1, 9: return mapType == 1 && depth == 8
        case 2, 10: return [15, 16, 24, 32].contains(depth)
        case 3, 11: return mapType == 0 && (depth == 8 || depth == 16)
        default: return false
        }
    }

    /// Reads the header of `bytes`; `.corruptData` for what `isPlausible` would refuse.
    init(_ bytes: ByteView, label: String) throws(VipsError) {
        guard bytes.count >= 18, let first = bytes.u16(3), let length = bytes.u16(5), let width = bytes.u16(12),
            let height = bytes.u16(14)
        else {
            throw VipsError(.truncatedData, "\(label): the TGA header is cut short")
        }
        let prefix = Array(bytes.bytes.prefix(18))
        guard Self.isPlausible(prefix) else {
            throw VipsError(.corruptData, "\(label): not a TGA header this decoder understands")
        }
        let imageType = prefix[2]
        kind = imageType & 7 == 1 ? .colourMapped : imageType & 7 == 2 ? .trueColour : .grey
        rle = imageType & 8 != 0
        (self.width, self.height, depth) = (width, height, Int(prefix[16]))
        let hasMap = prefix[1] == 1
        (mapFirst, mapLength, mapDepth) = hasMap ? (first, length, Int(prefix[7])) : (0, 0, 0)
        mapOffset = 18 + Int(prefix[0])
        dataOffset = mapOffset + (hasMap ? length * ((mapDepth + 7) / 8) : 0)
        topDown = prefix[17] & 0x20 != 0
        rightToLeft = prefix[17] & 0x10 != 0
        switch kind {
        case .colourMapped: hasAlpha = mapDepth == 32
        case .trueColour: hasAlpha = depth == 32 || (depth == 16 && prefix[17] & 0x0F > 0)
        case .grey: hasAlpha = depth == 16
        }
        if hasAlpha, Self.extensionSaysNoAlpha(bytes) { hasAlpha = false }
    }

    /// Whether a TGA 2.0 footer's extension area says the file has no alpha
    /// (attributes type 0), as Pillow and GIMP read it.
    private static func extensionSaysNoAlpha(_ bytes: ByteView) -> Bool {
        let signature = Array("TRUEVISION-XFILE.\0".utf8)
        guard let footer = bytes.slice(bytes.count - 26, 26), Array(footer.bytes.suffix(18)) == signature,
            let offset = footer.u32(0), offset > 0
        else { return false }
        return bytes.u8(Int(offset) + 494) == 0
    }
}
