import CTIFF

/// The part of the TIFF fallback that libtiff's RGBA interface cannot do:
/// contiguous grey or RGB strips whose samples are 12 bits (or another width
/// under 16), 16 or 32 bits, unsigned, signed or floating point, read with
/// `TIFFReadEncodedStrip` and brought to 8 bits here: an integer sample
/// scaled from its own range (16 bits keep their top 8 bits, as libvips
/// casts them), a floating-point one rounded and clipped to 0…255 (as libvips
/// casts float images). A missing PhotometricInterpretation reads as grey
/// for one or two samples and RGB for three or four, as libtiff guesses it.
struct TIFFSampleReader {
    let file: TIFFMemoryFile
    let header: TIFFRGBACodec.Header
    let strict: Bool
    let label: String

    /// Decodes into `canvas`; `.unsupportedFeature` for a layout this reader does not take either.
    func decode(into canvas: RasterCanvas, refusal: String) throws(VipsError) {
        let tiff = file.tiff
        var bits: UInt16 = 1, samples: UInt16 = 1, format: UInt16 = 1, planar: UInt16 = 1, photometric: UInt16 = 0
        _ = vl_tiff_get_uint16_defaulted(tiff, UInt32(TIFFTAG_BITSPERSAMPLE), &bits)
        _ = vl_tiff_get_uint16_defaulted(tiff, UInt32(TIFFTAG_SAMPLESPERPIXEL), &samples)
        _ = vl_tiff_get_uint16_defaulted(tiff, UInt32(TIFFTAG_SAMPLEFORMAT), &format)
        _ = vl_tiff_get_uint16_defaulted(tiff, UInt32(TIFFTAG_PLANARCONFIG), &planar)
        let hasPhotometric = vl_tiff_get_uint16_defaulted(tiff, UInt32(TIFFTAG_PHOTOMETRIC), &photometric) == 1
        let grey: Bool
        if hasPhotometric {
            guard
                [PHOTOMETRIC_MINISBLACK, PHOTOMETRIC_MINISWHITE, PHOTOMETRIC_RGB].map({ UInt16($0) }).contains(
                    photometric)
            else { throw VipsError(.unsupportedFeature, "\(label): \(refusal)") }
            grey = photometric != UInt16(PHOTOMETRIC_RGB)
        } else {
            grey = samples <= 2
        }
        let colours = grey ? 1 : 3
        let floating = format == UInt16(SAMPLEFORMAT_IEEEFP)
        guard TIFFIsTiled(tiff) == 0, planar == UInt16(PLANARCONFIG_CONTIG), Int(samples) >= colours,
            samples <= 8, floating ? bits == 32 : (1...32).contains(bits)
        else { throw VipsError(.unsupportedFeature, "\(label): \(refusal)") }
        let inverted = hasPhotometric && photometric == UInt16(PHOTOMETRIC_MINISWHITE)
        let signed = format == UInt16(SAMPLEFORMAT_INT)
        let (width, height, rowsPerStrip) = (header.width, header.height, header.blockHeight)
        let (rowBits, overflow) = (width * Int(samples)).multipliedReportingOverflow(by: Int(bits))
        guard !overflow else { throw VipsError(.tooLarge, "\(label): TIFF rows too long") }
        let rowBytes = (rowBits + 7) / 8
        let stripBytes = rowBytes * rowsPerStrip
        let strip = try PixelStorage.allocate(width: max(1, rowBytes), height: rowsPerStrip, channels: 1, label: label)
        let bitsPerSample = Int(bits)
        let maximum = bitsPerSample >= 32 ? Double(UInt32.max) : Double((1 << bitsPerSample) - 1)

        /// Sample `index` of a row as 8 bits.
        func sample(_ row: UnsafeRawPointer, _ index: Int) -> UInt8 {
            switch bitsPerSample {
            case 8:
                let value = row.load(fromByteOffset: index, as: UInt8.self)
                return signed ? UInt8(clamping: Int(Int8(bitPattern: value)) * 2) : value
            case 16:
                let value = row.loadUnaligned(fromByteOffset: index * 2, as: UInt16.self)
                return signed ? UInt8(clamping: Int(Int16(bitPattern: value)) >> 7) : UInt8(value >> 8)
            case 32:
                let value = row.loadUnaligned(fromByteOffset: index * 4, as: UInt32.self)
                if floating {
                    let real = Float(bitPattern: value)
                    return real.isNaN ? 0 : UInt8(clamping: Int(max(-1, min(256, real.rounded()))))
                }
                return signed ? UInt8(clamping: Int(Int32(bitPattern: value)) >> 23) : UInt8(value >> 24)
            default:
                // Packed most significant bit first.
                var value = 0
                let first = index * bitsPerSample
                for bit in first..<(first + bitsPerSample) {
                    let byte = row.load(fromByteOffset: bit >> 3, as: UInt8.self)
                    value = value << 1 | Int(byte >> (7 - UInt8(bit & 7)) & 1)
                }
                return UInt8(clamping: Int((Double(value) * 255 / maximum).rounded()))
            }
        }

        var top = 0, stripIndex: UInt32 = 0
        while top < height {
            try canvas.checkCancellation(row: top)
            let rows = min(rowsPerStrip, height - top)
            strip.pointer.initializeMemory(as: UInt8.self, repeating: 0, count: strip.count)
            let read = TIFFReadEncodedStrip(tiff, stripIndex, strip.pointer, tmsize_t(stripBytes))
            if read < 0, strict {
                let message = file.firstError ?? "libtiff could not read strip \(stripIndex)"
                throw VipsError(ImageDecoder.kind(forDecodeFailure: message), "\(label): \(message)")
            }
            for r in 0..<rows {
                let row = UnsafeRawPointer(strip.pointer + r * rowBytes)
                for x in 0..<width {
                    let base = x * Int(samples)
                    var (red, green, blue) = (sample(row, base), UInt8(0), UInt8(0))
                    if inverted { red = 255 - red }
                    if grey {
                        (green, blue) = (red, red)
                    } else {
                        (green, blue) = (sample(row, base + 1), sample(row, base + 2))
                    }
                    let alpha = canvas.channels == 4 && Int(samples) > colours ? sample(row, base + colours) : 255
                    canvas.set(x, top + r, red, green, blue, alpha)
                }
            }
            top += rows
            stripIndex += 1
        }
    }
}
