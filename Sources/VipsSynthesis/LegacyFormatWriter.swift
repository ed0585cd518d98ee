import Foundation
import VipsCore

/// Writes BMP, ICO/CUR and TGA files from generated pixels, for the tests and
/// the fuzz seeds (libvips 8.14 writes none of these formats). Each writer
/// returns the file and the pixels a correct decoder gives for it (after the
/// writer's own quantisation to a palette or to 5-bit channels), so a test
/// can compare exactly. Not a product: test and seed support only.
public enum LegacyFormatWriter {
    /// 8-bit RGBA pixels, top-down.
    public struct Pixels: Sendable, Equatable {
        public var width: Int
        public var height: Int
        public var rgba: [UInt8]

        /// Pixels as given.
        public init(width: Int, height: Int, rgba: [UInt8]) {
            (self.width, self.height, self.rgba) = (width, height, rgba)
        }

        /// The RGBA of pixel (x, y).
        public func pixel(_ x: Int, _ y: Int) -> [UInt8] {
            Array(rgba[(y * width + x) * 4..<(y * width + x) * 4 + 4])
        }

        /// Photo-like generated pixels (libvips through `ImageSynthesizer`), with varying alpha when asked.
        public static func generated(width: Int, height: Int, seed: Int = 7, alpha: Bool = false) throws -> Pixels {
            let png = try ImageSynthesizer.data(width: width, height: height, seed: seed, alpha: alpha, format: .png())
            let bitmap = try ImageDecoder().decode(.data(png))
            var rgba = [UInt8](repeating: 255, count: width * height * 4)
            for y in 0..<height {
                for x in 0..<width {
                    guard let pixel = bitmap.pixel(x: x, y: y) else { continue }
                    for channel in 0..<pixel.count { rgba[(y * width + x) * 4 + channel] = pixel[channel] }
                }
            }
            return Pixels(width: width, height: height, rgba: rgba)
        }
    }

    /// How a BMP stores its pixels.
    public enum BMPLayout: Sendable, Hashable {
        /// A palette of 2, 4, 16 or 256 colours (1, 2, 4 or 8 bits per pixel).
        case palette(bits: Int)
        /// RLE8 or RLE4 (bits 8 or 4) with a palette.
        case rle(bits: Int)
        /// 16 bits: 5-5-5 (BI_RGB) or 5-6-5 (BI_BITFIELDS).
        case sixteen(rgb565: Bool)
        /// 24 bits, BGR.
        case twentyFour
        /// 32 bits: BGRX (BI_RGB, no alpha) or with an alpha mask (BI_BITFIELDS in a V5 header).
        case thirtyTwo(alpha: Bool)
    }

    /// The DIB header a BMP carries.
    public enum BMPHeaderKind: Sendable, Hashable {
        /// BITMAPCOREHEADER (OS/2 1.x, 12 bytes, 3-byte palette entries).
        case core
        /// OS/2 2.x's 64-byte header.
        case os2
        /// BITMAPINFOHEADER (40 bytes), V4 (108) or V5 (124).
        case info, v4, v5
    }

    // MARK: - BMP

    /// A BMP file, and what it decodes to.
    public static func bmp(
        _ pixels: Pixels, layout: BMPLayout, header: BMPHeaderKind = .info, topDown: Bool = false
    ) -> (data: Data, expected: Pixels) {
        let (dib, expected) = dib(pixels, layout: layout, header: header, topDown: topDown, icon: false)
        var file = Data("BM".utf8)
        let pixelOffset = 14 + dib.pixelOffset
        appendU32(&file, UInt32(14 + dib.bytes.count))
        appendU32(&file, 0)
        appendU32(&file, UInt32(pixelOffset))
        file.append(dib.bytes)
        return (file, expected)
    }

    /// A DIB (header, palette or masks, rows; an icon's with its AND mask) and where its rows start.
    private static func dib(
        _ pixels: Pixels, layout: BMPLayout, header: BMPHeaderKind, topDown: Bool, icon: Bool
    ) -> (bytes: (bytes: Data, pixelOffset: Int), expected: Pixels) {
        let (width, height) = (pixels.width, pixels.height)
        var expected = pixels
        var palette: [[UInt8]] = []
        let bits: Int
        var compression: UInt32 = 0
        var masks: [UInt32] = []
        switch layout {
        case .palette(let b), .rle(let b):
            bits = b
            palette = paletteColours(count: 1 << b)
            if case .rle = layout { compression = b == 8 ? 1 : 2 }
        case .sixteen(let rgb565):
            bits = 16
            if rgb565 {
                compression = 3
                masks = [0xF800, 0x07E0, 0x001F]
            }
        case .twentyFour:
            bits = 24
        case .thirtyTwo(let alpha):
            bits = 32
            if alpha {
                compression = 3
                masks = [0x00FF_0000, 0x0000_FF00, 0x0000_00FF, 0xFF00_0000]
            }
        }
        let hasAlpha = icon || masks.count == 4
        // Quantise to what the layout can hold.
        var indices = [Int](repeating: 0, count: width * height)
        for y in 0..<height {
            for x in 0..<width {
                let at = (y * width + x) * 4
                var (r, g, b, a) = (
                    Int(pixels.rgba[at]), Int(pixels.rgba[at + 1]), Int(pixels.rgba[at + 2]), Int(pixels.rgba[at + 3])
                )
                if !palette.isEmpty {
                    let index = nearest(palette, r, g, b)
                    indices[y * width + x] = index
                    (r, g, b) = (Int(palette[index][0]), Int(palette[index][1]), Int(palette[index][2]))
                } else if bits == 16 {
                    let greenBits = masks.isEmpty ? 5 : 6
                    (r, g, b) = (
                        r >> 3 * 255 / 31, g >> (8 - greenBits) * 255 / ((1 << greenBits) - 1), b >> 3 * 255 / 31
                    )
                }
                if !hasAlpha || (icon && bits != 32) { a = 255 }
                expected.rgba.replaceSubrange(at..<(at + 4), with: [UInt8(r), UInt8(g), UInt8(b), UInt8(a)])
            }
        }
        if icon && bits != 32 {
            // The AND mask: pixels whose source alpha is under half are transparent.
            for index in 0..<(width * height) where pixels.rgba[index * 4 + 3] < 128 {
                expected.rgba[index * 4 + 3] = 0
            }
        }

        var body = Data()
        let headerSize: Int
        switch header {
        case .core: headerSize = 12
        case .os2: headerSize = 64
        case .info: headerSize = 40
        case .v4: headerSize = 108
        case .v5: headerSize = 124
        }
        let storedHeight = (icon ? height * 2 : height) * (topDown ? -1 : 1)
        appendU32(&body, UInt32(headerSize))
        if header == .core {
            appendU16(&body, width)
            appendU16(&body, storedHeight)
            appendU16(&body, 1)
            appendU16(&body, bits)
        } else {
            appendU32(&body, UInt32(width))
            appendU32(&body, UInt32(bitPattern: Int32(storedHeight)))
            appendU16(&body, 1)
            appendU16(&body, bits)
            // A 40-byte header says BI_ALPHABITFIELDS (6) for four masks after it.
            appendU32(&body, headerSize == 40 && masks.count == 4 ? 6 : compression)
            appendU32(&body, 0) // image size (may be 0 for BI_RGB)
            appendU32(&body, 2835)
            appendU32(&body, 2835)
            appendU32(&body, UInt32(palette.count))
            appendU32(&body, 0)
            var rest = headerSize - 40
            if headerSize >= 52, !masks.isEmpty {
                for index in 0..<4 { appendU32(&body, index < masks.count ? masks[index] : 0) }
                rest -= 16
            }
            body.append(Data(repeating: 0, count: rest))
            if headerSize == 40 { for mask in masks { appendU32(&body, mask) } }
        }
        for colour in palette {
            body.append(contentsOf: [colour[2], colour[1], colour[0]])
            if header != .core { body.append(0) }
        }
        let pixelOffset = body.count
        let stride = (width * bits + 31) / 32 * 4
        let rows = topDown ? Array(0..<height) : Array((0..<height).reversed())
        if compression == 1 || compression == 2 {
            body.append(rle(indices, width: width, rows: rows, four: compression == 2))
        } else {
            for y in rows {
                var row = [UInt8](repeating: 0, count: stride)
                for x in 0..<width {
                    let at = (y * width + x) * 4
                    let (r, g, b, a) = (pixels.rgba[at], pixels.rgba[at + 1], pixels.rgba[at + 2], pixels.rgba[at + 3])
                    switch bits {
                    case 1, 2, 4, 8:
                        let shift = 8 - bits * (x % (8 / bits) + 1)
                        row[x * bits / 8] |= UInt8(indices[y * width + x] << shift)
                    case 16:
                        let value =
                            masks.isEmpty
                            ? Int(r >> 3) << 10 | Int(g >> 3) << 5 | Int(b >> 3)
                            : Int(r >> 3) << 11 | Int(g >> 2) << 5 | Int(b >> 3)
                        (row[x * 2], row[x * 2 + 1]) = (UInt8(value & 0xFF), UInt8(value >> 8))
                    case 24:
                        (row[x * 3], row[x * 3 + 1], row[x * 3 + 2]) = (b, g, r)
                    default:
                        (row[x * 4], row[x * 4 + 1], row[x * 4 + 2], row[x * 4 + 3]) = (b, g, r, hasAlpha ? a : 0)
                    }
                }
                body.append(contentsOf: row)
            }
        }
        if icon {
            let maskStride = (width + 31) / 32 * 4
            for y in rows {
                var row = [UInt8](repeating: 0, count: maskStride)
                for x in 0..<width where pixels.rgba[(y * width + x) * 4 + 3] < 128 {
                    row[x / 8] |= 0x80 >> UInt8(x % 8)
                }
                body.append(contentsOf: row)
            }
        }
        return ((body, pixelOffset), expected)
    }

    /// RLE8/RLE4 rows: runs of equal indices, absolute runs of the rest, end-of-line and end-of-bitmap.
    private static func rle(_ indices: [Int], width: Int, rows: [Int], four: Bool) -> Data {
        var out = Data()
        for y in rows {
            var x = 0
            while x < width {
                var run = 1
                while x + run < width, run < 255, indices[y * width + x + run] == indices[y * width + x] { run += 1 }
                if run >= 3 || width - x < 3 {
                    let index = UInt8(indices[y * width + x])
                    out.append(contentsOf: [UInt8(run), four ? index << 4 | index : index])
                    x += run
                } else {
                    // An absolute run of up to 254 pixels (at least 3), padded to 16 bits.
                    let count = min(254, width - x)
                    out.append(contentsOf: [0, UInt8(count)])
                    var bytes: [UInt8] = []
                    if four {
                        for pair in stride(from: 0, to: count, by: 2) {
                            let high = UInt8(indices[y * width + x + pair])
                            let low = pair + 1 < count ? UInt8(indices[y * width + x + pair + 1]) : 0
                            bytes.append(high << 4 | low)
                        }
                    } else {
                        bytes = (0..<count).map { UInt8(indices[y * width + x + $0]) }
                    }
                    if bytes.count % 2 == 1 { bytes.append(0) }
                    out.append(contentsOf: bytes)
                    x += count
                }
            }
            out.append(contentsOf: [0, 0])
        }
        out.append(contentsOf: [0, 1])
        return out
    }

    /// A fixed palette: greys for 2 and 4 colours, a colour cube for 16 and 256.
    private static func paletteColours(count: Int) -> [[UInt8]] {
        switch count {
        case 2: return [[0, 0, 0], [255, 255, 255]]
        case 4: return [[0, 0, 0], [85, 85, 85], [170, 170, 170], [255, 255, 255]]
        case 16:
            return (0..<16).map { (i: Int) -> [UInt8] in
                let red: Int = (i >> 3 & 1) * 255, green: Int = (i >> 1 & 3) * 85, blue: Int = (i & 1) * 255
                return [UInt8(red), UInt8(green), UInt8(blue)]
            }
        default:
            return (0..<256).map { (i: Int) -> [UInt8] in
                let red: Int = (i >> 5) * 255 / 7, green: Int = (i >> 2 & 7) * 255 / 7, blue: Int = (i & 3) * 85
                return [UInt8(red), UInt8(green), UInt8(blue)]
            }
        }
    }

    private static func nearest(_ palette: [[UInt8]], _ r: Int, _ g: Int, _ b: Int) -> Int {
        var best = 0, distance = Int.max
        for (index, colour) in palette.enumerated() {
            let d =
                (Int(colour[0]) - r) * (Int(colour[0]) - r) + (Int(colour[1]) - g) * (Int(colour[1]) - g)
                + (Int(colour[2]) - b) * (Int(colour[2]) - b)
            if d < distance { (best, distance) = (index, d) }
        }
        return best
    }

    // MARK: - ICO / CUR

    /// One entry of an icon: BMP (with `layout`) or PNG.
    public struct IconEntry: Sendable {
        public var pixels: Pixels
        public var png: Bool
        public var layout: BMPLayout

        /// An entry of `pixels`, a PNG or a DIB of `layout`.
        public init(_ pixels: Pixels, png: Bool = false, layout: BMPLayout = .thirtyTwo(alpha: true)) {
            (self.pixels, self.png, self.layout) = (pixels, png, layout)
        }
    }

    /// An ICO (or, with `cursor`, a CUR) file, and what each entry decodes to.
    public static func ico(_ entries: [IconEntry], cursor: Bool = false) throws -> (data: Data, expected: [Pixels]) {
        var payloads: [Data] = []
        var expected: [Pixels] = []
        for entry in entries {
            if entry.png {
                let bitmapData = entry.pixels.rgba.withUnsafeBytes { Data($0) }
                let bitmap = try Bitmap(
                    width: entry.pixels.width, height: entry.pixels.height, channels: 4, scale: 1, pixels: bitmapData)
                let encoded = try ImageEncoder().encode(bitmap, as: .png())
                payloads.append(encoded.data)
                expected.append(entry.pixels)
            } else {
                let (dib, pixels) = dib(entry.pixels, layout: entry.layout, header: .info, topDown: false, icon: true)
                payloads.append(dib.bytes)
                expected.append(pixels)
            }
        }
        var file = Data()
        appendU16(&file, 0)
        appendU16(&file, cursor ? 2 : 1)
        appendU16(&file, entries.count)
        var offset = 6 + 16 * entries.count
        for (entry, payload) in zip(entries, payloads) {
            file.append(UInt8(entry.pixels.width >= 256 ? 0 : entry.pixels.width))
            file.append(UInt8(entry.pixels.height >= 256 ? 0 : entry.pixels.height))
            file.append(0)
            file.append(0)
            appendU16(&file, cursor ? 1 : 1)
            appendU16(&file, cursor ? 1 : 32)
            appendU32(&file, UInt32(payload.count))
            appendU32(&file, UInt32(offset))
            offset += payload.count
        }
        for payload in payloads { file.append(payload) }
        return (file, expected)
    }

    // MARK: - TGA

    /// How a TGA stores its pixels.
    public enum TGALayout: Sendable, Hashable {
        /// True colour of 16 (5-5-5 + attribute bit), 24 or 32 bits.
        case trueColour(bits: Int)
        /// 8-bit grey, or 16-bit grey + alpha.
        case grey(alpha: Bool)
        /// 8-bit indices into a 24-bit colour map.
        case colourMapped
    }

    /// A TGA file, and what it decodes to. `origin` bits: top (0x20), right (0x10).
    public static func tga(
        _ pixels: Pixels, layout: TGALayout, rle: Bool = false, top: Bool = false, right: Bool = false,
        footerSaysNoAlpha: Bool = false
    ) -> (data: Data, expected: Pixels) {
        let (width, height) = (pixels.width, pixels.height)
        var expected = pixels
        var palette: [[UInt8]] = []
        let depth: Int
        var imageType: UInt8
        var alphaBits: UInt8 = 0
        switch layout {
        case .trueColour(let bits):
            depth = bits
            imageType = 2
            alphaBits = bits == 32 ? 8 : bits == 16 ? 1 : 0
        case .grey(let alpha):
            depth = alpha ? 16 : 8
            imageType = 3
            alphaBits = alpha ? 8 : 0
        case .colourMapped:
            depth = 8
            imageType = 1
            palette = paletteColours(count: 256)
        }
        if rle { imageType |= 8 }
        let keepsAlpha = alphaBits > 0 && !footerSaysNoAlpha
        var stored: [[UInt8]] = [] // each pixel's stored bytes, in stored order
        var order: [(Int, Int)] = []
        for row in 0..<height {
            for column in 0..<width {
                order.append((right ? width - 1 - column : column, top ? row : height - 1 - row))
            }
        }
        for (x, y) in order {
            let at = (y * width + x) * 4
            var (r, g, b, a) = (pixels.rgba[at], pixels.rgba[at + 1], pixels.rgba[at + 2], pixels.rgba[at + 3])
            switch layout {
            case .trueColour(let bits) where bits == 16:
                let value = Int(r >> 3) << 10 | Int(g >> 3) << 5 | Int(b >> 3) | (a < 128 ? 0x8000 : 0)
                stored.append([UInt8(value & 0xFF), UInt8(value >> 8)])
                func five(_ value: UInt8) -> UInt8 { UInt8(Int(value >> 3) * 255 / 31) }
                (r, g, b) = (five(r), five(g), five(b))
                a = a < 128 ? 0 : 255
            case .trueColour(let bits):
                stored.append(bits == 32 ? [b, g, r, a] : [b, g, r])
            case .grey(let alpha):
                let weighted: Int = Int(r) * 299 + Int(g) * 587 + Int(b) * 114
                let grey = UInt8(weighted / 1000)
                stored.append(alpha ? [grey, a] : [grey])
                (r, g, b) = (grey, grey, grey)
            case .colourMapped:
                let index = nearest(palette, Int(r), Int(g), Int(b))
                stored.append([UInt8(index)])
                (r, g, b) = (palette[index][0], palette[index][1], palette[index][2])
            }
            if !keepsAlpha { a = 255 }
            expected.rgba.replaceSubrange(at..<(at + 4), with: [r, g, b, a])
        }
        var file = Data([0, palette.isEmpty ? 0 : 1, imageType])
        appendU16(&file, 0)
        appendU16(&file, palette.count)
        file.append(palette.isEmpty ? 0 : 24)
        appendU16(&file, 0)
        appendU16(&file, 0)
        appendU16(&file, width)
        appendU16(&file, height)
        file.append(UInt8(depth))
        file.append(alphaBits | (top ? 0x20 : 0) | (right ? 0x10 : 0))
        for colour in palette { file.append(contentsOf: [colour[2], colour[1], colour[0]]) }
        if rle {
            var index = 0
            while index < stored.count {
                var run = 1
                while index + run < stored.count, run < 128, stored[index + run] == stored[index] { run += 1 }
                if run > 1 {
                    file.append(UInt8(0x80 | (run - 1)))
                    file.append(contentsOf: stored[index])
                    index += run
                } else {
                    var count = 1
                    while index + count < stored.count, count < 128,
                        index + count + 1 >= stored.count || stored[index + count] != stored[index + count + 1]
                    {
                        count += 1
                    }
                    file.append(UInt8(count - 1))
                    for pixel in stored[index..<(index + count)] { file.append(contentsOf: pixel) }
                    index += count
                }
            }
        } else {
            for pixel in stored { file.append(contentsOf: pixel) }
        }
        // A TGA 2.0 footer, with an extension area saying whether there is alpha.
        let extensionOffset = file.count
        var area = Data(repeating: 0, count: 495)
        area[0] = 0xEF
        area[1] = 0x01
        area[494] = footerSaysNoAlpha ? 0 : 3
        file.append(area)
        appendU32(&file, UInt32(extensionOffset))
        appendU32(&file, 0)
        file.append(Data("TRUEVISION-XFILE.\0".utf8))
        return (file, expected)
    }

    private static func appendU16(_ data: inout Data, _ value: Int) {
        data.append(contentsOf: [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8)])
    }

    private static func appendU32(_ data: inout Data, _ value: UInt32) {
        data.append(contentsOf: (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) })
    }
}
