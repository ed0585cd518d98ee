/// Decodes a DIB's pixel rows (see `BMPHeader`) into a canvas: palette
/// indices of 1–8 bits, 16-, 24- and 32-bit pixels with their channel masks,
/// and RLE8/RLE4 with their escapes, bottom-up or top-down.
///
/// What a damaged or short file leaves out stays as the canvas starts
/// (black, transparent with alpha; in RLE, palette entry 0, as Pillow fills
/// it), in lenient mode; strict mode throws `.truncatedData`.
struct BMPPixelReader {
    let header: BMPHeader
    let bytes: ByteView
    let strict: Bool
    let label: String

    /// Decodes every row into `canvas` (which has the header's size).
    func decode(into canvas: RasterCanvas) throws(VipsError) {
        switch header.compression {
        case .rle8, .rle4: try decodeRLE(into: canvas)
        case .none, .bitfields: try decodeRows(into: canvas)
        }
    }

    /// The canvas row of the `index`th stored row.
    private func row(_ index: Int) -> Int {
        header.topDown ? index : header.height - 1 - index
    }

    private func truncated(_ rows: Int) -> VipsError {
        VipsError(.truncatedData, "\(label): the BMP pixel data is cut short after \(rows) of \(header.height) rows")
    }

    /// The palette colour of `index` (black for an index past the palette, as Pillow shows it).
    private func colour(_ index: Int) -> (UInt8, UInt8, UInt8) {
        index < header.palette.count ? header.palette[index] : (0, 0, 0)
    }

    private func decodeRows(into canvas: RasterCanvas) throws(VipsError) {
        let channels = ChannelMasks(header.masks)
        for index in 0..<header.height {
            if index % 64 == 0 { try canvas.checkCancellation(row: index) }
            let (start, overflow) = header.stride.multipliedReportingOverflow(by: index)
            let (offset, overflowed) = header.pixelOffset.addingReportingOverflow(start)
            guard !overflow, !overflowed, offset < bytes.count else {
                try tolerate(truncated(index), strict: strict)
                return
            }
            // A row the file cuts short is decoded as far as it goes (the rest reads as zeros).
            let partial = bytes.tail(from: offset)
            if partial.count < header.stride {
                try tolerate(truncated(index), strict: strict)
                var padded = [UInt8](repeating: 0, count: header.stride)
                padded.withUnsafeMutableBytes { $0.copyMemory(from: partial.bytes) }
                padded.withUnsafeBytes { decodeRow(ByteView(bytes: $0), y: row(index), channels: channels, canvas) }
                return
            }
            guard let line = bytes.slice(offset, header.stride) else { return }
            decodeRow(line, y: row(index), channels: channels, canvas)
        }
    }

    /// Decodes one stored row (`header.stride` bytes) into canvas row `y`.
    private func decodeRow(_ line: ByteView, y: Int, channels: ChannelMasks, _ canvas: RasterCanvas) {
        let bits = header.bitsPerPixel
        let raw = line.bytes
        switch bits {
        case 1, 2, 4, 8:
            let perByte = 8 / bits, mask = (1 << bits) - 1
            for x in 0..<header.width {
                let byte = Int(raw[x / perByte])
                let shift = 8 - bits * (x % perByte + 1)
                let (red, green, blue) = colour(byte >> shift & mask)
                canvas.set(x, y, red, green, blue)
            }
        case 24:
            for x in 0..<header.width {
                canvas.set(x, y, raw[x * 3 + 2], raw[x * 3 + 1], raw[x * 3])
            }
        case 16:
            for x in 0..<header.width {
                channels.set(canvas, x, y, UInt32(raw[x * 2]) | UInt32(raw[x * 2 + 1]) << 8)
            }
        default:
            for x in 0..<header.width {
                let at = x * 4
                let value =
                    UInt32(raw[at]) | UInt32(raw[at + 1]) << 8 | UInt32(raw[at + 2]) << 16
                    | UInt32(raw[at + 3]) << 24
                channels.set(canvas, x, y, value)
            }
        }
    }

    /// RLE8 and RLE4 as Pillow reads them: the indices fill the image in
    /// stored order, a run is clipped at its row's end, end-of-line pads to the
    /// next row, a delta skips right + up × width pixels, and what is never
    /// written is palette entry 0.
    private func decodeRLE(into canvas: RasterCanvas) throws(VipsError) {
        let (width, height) = (header.width, header.height)
        let (red, green, blue) = colour(0)
        if red != 0 || green != 0 || blue != 0 {
            for y in 0..<height {
                for x in 0..<width { canvas.set(x, y, red, green, blue) }
            }
        }
        let total = width.multipliedReportingOverflow(by: height).partialValue
        let data = bytes.tail(from: header.pixelOffset)
        let four = header.compression == .rle4
        var at = 0, position = 0, x = 0, nextCheck = 0
        func put(_ index: Int) {
            guard position < total else { return }
            let (colourRed, colourGreen, colourBlue) = colour(index)
            canvas.set(position % width, row(position / width), colourRed, colourGreen, colourBlue)
            position += 1
        }
        while position < total {
            if position >= nextCheck {
                try canvas.checkCancellation(row: position / width)
                nextCheck = position + 64 * width
            }
            guard let count = data.u8(at).map(Int.init), let value = data.u8(at + 1) else {
                try tolerate(truncated(position / width), strict: strict)
                return
            }
            at += 2
            if count > 0 {
                // An encoded run, clipped at the row's end.
                let run = min(count, max(0, width - x))
                for index in 0..<run {
                    put(four ? Int(index % 2 == 0 ? value >> 4 : value & 0x0F) : Int(value))
                }
                x += run
                continue
            }
            switch value {
            case 0:
                // End of line: pad to the next row.
                let remainder = position % width
                if remainder != 0 { position = min(total, position + width - remainder) }
                x = 0
            case 1:
                return
            case 2:
                guard let right = data.u8(at).map(Int.init), let up = data.u8(at + 1).map(Int.init) else {
                    try tolerate(truncated(position / width), strict: strict)
                    return
                }
                at += 2
                let (skip, overflow) = up.multipliedReportingOverflow(by: width)
                position = overflow ? total : min(total, position + skip + right)
                x = position % width
            default:
                // An absolute run of `value` indices, padded to a 16-bit boundary.
                let count = Int(value)
                let length = four ? (count + 1) / 2 : count
                guard let run = data.slice(at, length) else {
                    try tolerate(truncated(position / width), strict: strict)
                    for byte in data.tail(from: at).bytes {
                        if four {
                            put(Int(byte >> 4))
                            put(Int(byte & 0x0F))
                        } else {
                            put(Int(byte))
                        }
                    }
                    return
                }
                for index in 0..<count {
                    let byte = run.bytes[four ? index / 2 : index]
                    put(four ? Int(index % 2 == 0 ? byte >> 4 : byte & 0x0F) : Int(byte))
                }
                at += length + length % 2
                x += count
            }
        }
    }
}

/// A 16- or 32-bit pixel's channel masks, as shifts and scales to 8 bits.
private struct ChannelMasks {
    private let masks: [(mask: UInt32, shift: UInt32, maximum: UInt64)]
    private let hasAlpha: Bool

    init(_ masks: BMPHeader.Masks) {
        func parts(_ mask: UInt32) -> (UInt32, UInt32, UInt64) {
            guard mask != 0 else { return (0, 0, 0) }
            let shift = UInt32(mask.trailingZeroBitCount)
            return (mask, shift, UInt64(mask >> shift))
        }
        self.masks = [parts(masks.red), parts(masks.green), parts(masks.blue), parts(masks.alpha)]
        hasAlpha = masks.alpha != 0
    }

    /// The 8-bit value of channel `index` in `pixel` (v × 255 / max, truncated, as Pillow scales).
    private func channel(_ index: Int, _ pixel: UInt32) -> UInt8 {
        let part = masks[index]
        guard part.maximum > 0 else { return 0 }
        let value = UInt64((pixel & part.mask) >> part.shift)
        return UInt8(truncatingIfNeeded: value * 255 / part.maximum)
    }

    func set(_ canvas: RasterCanvas, _ x: Int, _ y: Int, _ pixel: UInt32) {
        canvas.set(
            x, y, channel(0, pixel), channel(1, pixel), channel(2, pixel), hasAlpha ? channel(3, pixel) : 255)
    }
}
