/// A device-independent bitmap's header, as a BMP file or an ICO/CUR entry
/// stores it: every header Windows and OS/2 wrote (BITMAPCOREHEADER and
/// OS/2 2.x, BITMAPINFOHEADER and its V2–V5 successors), the palette, the
/// channel masks and where the pixels start. Read with bounds checks only;
/// nothing is allocated for pixels here.
struct BMPHeader {
    /// How the pixel rows are stored.
    enum Compression: Equatable {
        case none
        case rle8
        case rle4
        /// BI_BITFIELDS or BI_ALPHABITFIELDS: `masks` say where each channel is.
        case bitfields
    }

    /// Where red, green, blue and alpha are in a 16- or 32-bit pixel (alpha 0: none).
    struct Masks: Equatable {
        var red: UInt32
        var green: UInt32
        var blue: UInt32
        var alpha: UInt32
    }

    /// Pixels per row.
    var width: Int
    /// Rows of the image (for an icon, the colour image's: half the stored height).
    var height: Int
    /// Whether the first stored row is the top one (a negative stored height).
    var topDown: Bool
    /// 1, 2, 4, 8, 16, 24 or 32.
    var bitsPerPixel: Int
    var compression: Compression
    /// Channel masks (16 and 32 bits per pixel).
    var masks: Masks
    /// The palette's colours as red, green, blue (for 1–8 bits per pixel).
    var palette: [(UInt8, UInt8, UInt8)]
    /// Where the pixel data starts in the bytes read.
    var pixelOffset: Int
    /// Bytes per stored row (rows are padded to 4 bytes).
    var stride: Int

    /// Whether the decoded image has an alpha channel.
    var hasAlpha: Bool { masks.alpha != 0 && (bitsPerPixel == 16 || bitsPerPixel == 32) }

    /// The largest palette read (a 16-bit index can address no more).
    static let maxPaletteEntries = 65_536

    /// Whether the first bytes start a bare DIB (a BMP without its file header, as the clipboard
    /// and Pillow's DIB format store it): a known header size, one plane, a known depth and
    /// compression, sides that are not zero.
    static func isPlausibleDIB(_ prefix: [UInt8]) -> Bool {
        let bytes = prefix.withUnsafeBytes { raw in Array(raw) }
        return bytes.withUnsafeBytes { raw -> Bool in
            let view = ByteView(bytes: raw)
            guard let size = view.u32(0) else { return false }
            if size == 12 {
                guard let width = view.u16(4), let height = view.u16(6), view.u16(8) == 1, let bits = view.u16(10)
                else { return false }
                return width > 0 && height > 0 && [1, 2, 4, 8, 24].contains(bits)
            }
            guard [40, 52, 56, 64, 108, 124].contains(size), let width = view.i32(4), let height = view.i32(8),
                view.u16(12) == 1, let bits = view.u16(14), let compression = view.u32(16)
            else { return false }
            return width > 0 && height != 0 && [1, 2, 4, 8, 16, 24, 32].contains(bits) && compression <= 6
        }
    }

    /// Reads the header of a BMP file (`BM`, the 14-byte file header, then the DIB), or of a bare DIB.
    init(file bytes: ByteView, label: String) throws(VipsError) {
        if bytes.u8(0) != UInt8(ascii: "B") || bytes.u8(1) != UInt8(ascii: "M") {
            try self.init(dib: bytes, at: 0, pixelOffset: nil, icon: false, label: label)
            return
        }
        guard let fileOffset = bytes.u32(10) else {
            throw VipsError(.truncatedData, "\(label): the BMP file header is cut short")
        }
        try self.init(dib: bytes, at: 14, pixelOffset: Int(fileOffset), icon: false, label: label)
    }

    /// Reads a DIB at `start` of `bytes`. `pixelOffset` is where the file
    /// header says the pixels are (nil in an icon entry: right after the
    /// palette). An icon's DIB stores twice the image's height (the colour
    /// rows, then the AND mask's).
    init(dib bytes: ByteView, at start: Int, pixelOffset: Int?, icon: Bool, label: String) throws(VipsError) {
        func truncated() -> VipsError {
            VipsError(.truncatedData, "\(label): the BMP header is cut short")
        }
        guard let headerSize = bytes.u32(start).map(Int.init) else { throw truncated() }
        let storedHeight: Int
        var compressionCode: UInt32 = 0
        var coloursUsed = 0
        let core = headerSize == 12
        if core {
            // BITMAPCOREHEADER (OS/2 1.x): 16-bit sides, 3-byte palette entries.
            guard let width = bytes.u16(start + 4), let height = bytes.u16(start + 6),
                let bits = bytes.u16(start + 10)
            else { throw truncated() }
            (self.width, storedHeight, bitsPerPixel) = (width, Int(Int16(truncatingIfNeeded: height)), bits)
        } else {
            guard headerSize >= 16, headerSize <= 4096 else {
                throw VipsError(.corruptData, "\(label): BMP header size \(headerSize) is not a known header")
            }
            guard let width = bytes.i32(start + 4), let height = bytes.i32(start + 8),
                let bits = bytes.u16(start + 14)
            else { throw truncated() }
            (self.width, storedHeight, bitsPerPixel) = (width, height, bits)
            if headerSize >= 20 {
                guard let code = bytes.u32(start + 16) else { throw truncated() }
                compressionCode = code
            }
            if headerSize >= 36 {
                guard let used = bytes.u32(start + 32) else { throw truncated() }
                coloursUsed = Int(used)
            }
        }
        guard width > 0, storedHeight != 0 else {
            throw VipsError(.corruptData, "\(label): BMP size \(width)×\(storedHeight) is not an image size")
        }
        topDown = storedHeight < 0
        let rows = storedHeight.magnitude
        height = Int(icon ? rows / 2 : rows)
        guard height > 0 else { throw VipsError(.corruptData, "\(label): the icon's BMP has no rows") }
        guard [1, 2, 4, 8, 16, 24, 32].contains(bitsPerPixel) else {
            throw VipsError(.unsupportedFeature, "\(label): BMP with \(bitsPerPixel) bits per pixel is not supported")
        }

        // Compression, and the masks that some headers carry after them.
        let maskOffset = start + 40
        var masksAfterHeader = 0
        switch compressionCode {
        case 0:
            compression = .none
        case 1 where bitsPerPixel == 8:
            compression = .rle8
        case 2 where bitsPerPixel == 4:
            compression = .rle4
        case 3 where [16, 24, 32].contains(bitsPerPixel) && headerSize >= 40, 6 where headerSize >= 40:
            compression = .bitfields
            // A BITMAPINFOHEADER is followed by the masks; later headers hold them.
            if headerSize == 40 { masksAfterHeader = compressionCode == 6 ? 16 : 12 }
        case 4, 5:
            throw VipsError(.unsupportedFeature, "\(label): BMP with an embedded JPEG or PNG is not supported")
        default:
            throw VipsError(
                .unsupportedFeature,
                "\(label): BMP compression \(compressionCode) with \(bitsPerPixel) bits per pixel is not supported")
        }
        guard compression != .bitfields || bitsPerPixel >= 16 else {
            throw VipsError(.unsupportedFeature, "\(label): BMP bit fields need 16, 24 or 32 bits per pixel")
        }
        switch (compression, bitsPerPixel) {
        case (.bitfields, _):
            guard let red = bytes.u32(maskOffset), let green = bytes.u32(maskOffset + 4),
                let blue = bytes.u32(maskOffset + 8)
            else { throw truncated() }
            var alpha: UInt32 = 0
            if compressionCode == 6 || headerSize >= 56 {
                guard let value = bytes.u32(maskOffset + 12) else { throw truncated() }
                alpha = value
            }
            masks = Masks(red: red, green: green, blue: blue, alpha: alpha)
        case (_, 16):
            masks = Masks(red: 0x7C00, green: 0x03E0, blue: 0x001F, alpha: 0)
        case (_, 32):
            // An icon's 32-bit entry keeps alpha in the fourth byte; a plain BMP's is unused.
            masks = Masks(red: 0xFF_0000, green: 0xFF00, blue: 0xFF, alpha: icon ? 0xFF00_0000 : 0)
        default:
            masks = Masks(red: 0xFF_0000, green: 0xFF00, blue: 0xFF, alpha: 0)
        }

        // The palette, right after the header (and its masks).
        let paletteStart = start + (core ? 12 : headerSize) + masksAfterHeader
        let entrySize = core ? 3 : 4
        var palette: [(UInt8, UInt8, UInt8)] = []
        var paletteBytes = 0
        if bitsPerPixel <= 8 {
            let declared = coloursUsed > 0 ? coloursUsed : 1 << bitsPerPixel
            guard declared <= Self.maxPaletteEntries else {
                throw VipsError(.corruptData, "\(label): the BMP declares \(declared) palette colours")
            }
            let available = max(0, bytes.count - paletteStart) / entrySize
            let count = min(declared, available)
            palette.reserveCapacity(count)
            for index in 0..<count {
                let at = paletteStart + index * entrySize
                palette.append((bytes.bytes[at + 2], bytes.bytes[at + 1], bytes.bytes[at]))
            }
            paletteBytes = declared * entrySize
        }
        self.palette = palette
        let afterPalette = paletteStart + paletteBytes
        // Some writers point the file header at the palette's start when there is one (Pillow reads these).
        if let pixelOffset {
            self.pixelOffset = pixelOffset == start + headerSize && bitsPerPixel <= 8 ? afterPalette : pixelOffset
        } else {
            self.pixelOffset = afterPalette
        }
        // Row bytes, 4-byte aligned: width ≤ 2³¹ and 32 bits fit an Int without overflow.
        stride = (width * bitsPerPixel + 31) / 32 * 4
    }
}
