import Foundation

/// The two formats libvips 8.14 writes only through ImageMagick (which
/// VipsLoad never calls), written here as imgproxy's own savers write them:
/// BMP as uncompressed rows, ICO as one PNG in an icon directory.
extension ImageEncoder {
    /// An uncompressed BMP of `bitmap`, bottom-up: 24 bits a pixel (BGR,
    /// `BITMAPINFOHEADER`, `BI_RGB`) for RGB, 32 (BGRA, `BITMAPV4HEADER`,
    /// `BI_BITFIELDS` with an alpha mask, so readers keep the alpha) for RGBA.
    ///
    /// - Throws: `.invalidArgument` when the file would pass BMP's 4 GiB.
    static func bmp(_ bitmap: Bitmap) throws(VipsError) -> Data {
        let channels = bitmap.channels
        let hasAlpha = channels == 4
        let rowBytes = (bitmap.width * channels + 3) & ~3
        let infoHeader = hasAlpha ? 108 : 40
        let offset = 14 + infoHeader
        let (pixelBytes, overflow) = rowBytes.multipliedReportingOverflow(by: bitmap.height)
        guard !overflow, pixelBytes + offset <= Int(UInt32.max) else {
            throw VipsError(.invalidArgument, "encode bmp: \(bitmap.width)×\(bitmap.height) is over BMP's 4 GiB")
        }
        var data = Data(count: offset + pixelBytes)
        data.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) in
            guard let base = raw.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
            func put16(_ value: Int, at position: Int) {
                base[position] = UInt8(value & 0xFF)
                base[position + 1] = UInt8((value >> 8) & 0xFF)
            }
            func put32(_ value: UInt32, at position: Int) {
                for index in 0..<4 { base[position + index] = UInt8((value >> (8 * UInt32(index))) & 0xFF) }
            }
            // BITMAPFILEHEADER.
            base[0] = UInt8(ascii: "B")
            base[1] = UInt8(ascii: "M")
            put32(UInt32(offset + pixelBytes), at: 2)
            put32(UInt32(offset), at: 10)
            // BITMAPINFOHEADER (or V4): positive height is bottom-up.
            put32(UInt32(infoHeader), at: 14)
            put32(UInt32(bitmap.width), at: 18)
            put32(UInt32(bitmap.height), at: 22)
            put16(1, at: 26)
            put16(channels * 8, at: 28)
            put32(hasAlpha ? 3 : 0, at: 30)
            put32(UInt32(pixelBytes), at: 34)
            // 2835 pixels a metre: 72 dpi.
            put32(2835, at: 38)
            put32(2835, at: 42)
            if hasAlpha {
                put32(0x00FF_0000, at: 54)
                put32(0x0000_FF00, at: 58)
                put32(0x0000_00FF, at: 62)
                put32(0xFF00_0000, at: 66)
                // LCS_sRGB.
                put32(0x7352_4742, at: 70)
            }
            withExtendedLifetime(bitmap) {
                let source = UnsafePointer(bitmap.storage.pointer.assumingMemoryBound(to: UInt8.self))
                for y in 0..<bitmap.height {
                    let row = source + y * bitmap.bytesPerRow
                    let target = base + offset + (bitmap.height - 1 - y) * rowBytes
                    for x in 0..<bitmap.width {
                        let p = row + x * channels, q = target + x * channels
                        q[0] = p[2]
                        q[1] = p[1]
                        q[2] = p[0]
                        if hasAlpha { q[3] = p[3] }
                    }
                }
            }
        }
        return data
    }

    /// An ICO file holding `png` (a `width`×`height` PNG, each side at most
    /// 256) as its one image: the directory header and one entry, then the PNG.
    static func ico(png: Data, width: Int, height: Int) -> Data {
        var data = Data(capacity: 22 + png.count)
        func append16(_ value: Int) { data.append(contentsOf: [UInt8(value & 0xFF), UInt8((value >> 8) & 0xFF)]) }
        func append32(_ value: Int) {
            data.append(contentsOf: (0..<4).map { UInt8((value >> (8 * $0)) & 0xFF) })
        }
        // ICONDIR: reserved, type 1 (icon), one image.
        append16(0)
        append16(1)
        append16(1)
        // ICONDIRENTRY: 0 means 256 for either side.
        data.append(UInt8(width % 256))
        data.append(UInt8(height % 256))
        // No palette, reserved, one plane, 32 bits a pixel.
        data.append(0)
        data.append(0)
        append16(1)
        append16(32)
        append32(png.count)
        append32(22)
        data.append(png)
        return data
    }
}
