/// The TGA codec, and the only TGA decoder (libvips 8.14 has no TGA loader;
/// why Swift, see `BMPCodec`): colour-mapped, true-colour and grey images,
/// raw or run-length encoded (types 1, 2, 3, 9, 10, 11), 8/15/16/24/32 bits,
/// every origin (top or bottom, left or right), alpha as the descriptor and
/// the TGA 2.0 extension area say (`TGAHeader`).
struct TGACodec: RasterCodec {
    /// A TGA's header, with the bytes it was read from.
    struct Header {
        let bytes: ByteView
        let tga: TGAHeader
    }

    func readHeader(_ bytes: ByteView, label: String) throws(VipsError) -> Header {
        Header(bytes: bytes, tga: try TGAHeader(bytes, label: label))
    }

    func info(of header: Header) -> ImageInfo {
        let tga = header.tga
        return ImageInfo(
            storedWidth: tga.width, height: tga.height, format: .tga, bands: tga.hasAlpha ? 4 : 3,
            hasAlpha: tga.hasAlpha, orientation: 1)
    }

    func decode(
        _ header: Header, _ request: DecodeRequest, options: DecodeOptions, label: String
    ) throws(VipsError) -> Bitmap? {
        let (tga, bytes) = (header.tga, header.bytes)
        let canvas = try RasterCanvas(
            width: tga.width, height: tga.height, channels: tga.hasAlpha ? 4 : 3, label: label)
        let map = colourMap(tga, bytes)
        let pixelBytes = (tga.depth + 7) / 8
        let data = bytes.tail(from: tga.dataOffset)
        let total = tga.width * tga.height
        var at = 0, position = 0, nextCheck = 0
        func truncated() -> VipsError {
            VipsError(
                .truncatedData,
                "\(label): the TGA pixel data is cut short after \(position / tga.width) of \(tga.height) rows")
        }
        func put(_ pixel: UnsafeRawBufferPointer.SubSequence) {
            let column = position % tga.width, row = position / tga.width
            let x = tga.rightToLeft ? tga.width - 1 - column : column
            let y = tga.topDown ? row : tga.height - 1 - row
            let (red, green, blue, alpha) = colour(pixel, tga, map)
            canvas.set(x, y, red, green, blue, tga.hasAlpha ? alpha : 255)
            position += 1
        }
        while position < total {
            if position >= nextCheck {
                try canvas.checkCancellation(row: position / tga.width)
                nextCheck = position + 64 * tga.width
            }
            if tga.rle {
                guard let packet = data.u8(at) else {
                    try tolerate(truncated(), strict: options.strict)
                    break
                }
                at += 1
                let count = Int(packet & 0x7F) + 1
                if packet & 0x80 != 0 {
                    guard let pixel = data.slice(at, pixelBytes) else {
                        try tolerate(truncated(), strict: options.strict)
                        break
                    }
                    at += pixelBytes
                    for _ in 0..<min(count, total - position) { put(pixel.bytes[...]) }
                } else {
                    for _ in 0..<count where position < total {
                        guard let pixel = data.slice(at, pixelBytes) else {
                            try tolerate(truncated(), strict: options.strict)
                            return canvas.bitmap()
                        }
                        at += pixelBytes
                        put(pixel.bytes[...])
                    }
                }
            } else {
                guard let pixel = data.slice(at, pixelBytes) else {
                    try tolerate(truncated(), strict: options.strict)
                    break
                }
                at += pixelBytes
                put(pixel.bytes[...])
            }
        }
        return canvas.bitmap()
    }

    /// The colour map as RGBA, indexed from 0 (entries below its first index are black).
    private func colourMap(_ tga: TGAHeader, _ bytes: ByteView) -> [(UInt8, UInt8, UInt8, UInt8)] {
        guard tga.kind == .colourMapped else { return [] }
        let entryBytes = (tga.mapDepth + 7) / 8
        var map = [(UInt8, UInt8, UInt8, UInt8)](repeating: (0, 0, 0, 255), count: min(256, tga.mapFirst))
        for index in 0..<tga.mapLength where map.count < 256 {
            guard let entry = bytes.slice(tga.mapOffset + index * entryBytes, entryBytes) else { break }
            map.append(Self.trueColour(entry.bytes[...], depth: tga.mapDepth))
        }
        return map
    }

    /// One stored pixel as RGBA.
    private func colour(
        _ pixel: UnsafeRawBufferPointer.SubSequence, _ tga: TGAHeader, _ map: [(UInt8, UInt8, UInt8, UInt8)]
    ) -> (UInt8, UInt8, UInt8, UInt8) {
        let base = pixel.startIndex
        switch tga.kind {
        case .colourMapped:
            let index = Int(pixel[base])
            return index < map.count ? map[index] : (0, 0, 0, 255)
        case .grey:
            let grey = pixel[base]
            return (grey, grey, grey, tga.depth == 16 ? pixel[base + 1] : 255)
        case .trueColour:
            return Self.trueColour(pixel, depth: tga.depth)
        }
    }

    /// A stored colour (BGR, BGRA or 5-5-5 with the attribute bit on top) as RGBA. The attribute
    /// bit reads as Pillow reads it: clear is opaque (writers disagree; Pillow's suite holds one).
    private static func trueColour(
        _ pixel: UnsafeRawBufferPointer.SubSequence, depth: Int
    ) -> (UInt8, UInt8, UInt8, UInt8) {
        let base = pixel.startIndex
        switch depth {
        case 15, 16:
            let value = Int(pixel[base]) | Int(pixel[base + 1]) << 8
            func scale(_ part: Int) -> UInt8 { UInt8(part * 255 / 31) }
            return (
                scale(value >> 10 & 31), scale(value >> 5 & 31), scale(value & 31),
                depth == 16 && value & 0x8000 == 0 ? 255 : 0
            )
        case 24:
            return (pixel[base + 2], pixel[base + 1], pixel[base], 255)
        default:
            return (pixel[base + 2], pixel[base + 1], pixel[base], pixel[base + 3])
        }
    }
}
