import CTIFF

/// The TIFF fallback: libtiff's RGBA interface (`TIFFReadRGBAStrip`,
/// `TIFFReadRGBATile`) for the TIFF layouts libvips 8.14's tiffload refuses
/// (tiled separate planes, old-style JPEG, subsampled YCbCr, 12-bit
/// samples, a missing PhotometricInterpretation, a strip byte count of 0).
///
/// It is not in `CodecRegistry`: libvips reads every TIFF first, and only
/// when libvips refuses one (its header or its pixels, see
/// `ImageDecoder.withTIFF`) does this codec read it, as the only decoder left
/// (`decodesAlone`): the first page, at full size, 8-bit RGB or RGBA
/// (straight alpha), then fitted to the box as the other codecs that decode
/// alone are. The limits are checked against the tags before any pixel
/// memory exists (so is every strip's or tile's buffer), libtiff's own
/// allocations are capped (`TIFFOpenOptionsSetMaxSingleMemAlloc`), its
/// messages go to per-file handlers (`TIFFMemoryFile`), and the
/// cancellation is checked between strips or tiles.
struct TIFFRGBACodec: DirectCodec {
    /// The header libvips read before it refused the pixels, if it did: the
    /// fallback then reports that header, so `info` and `decode` agree.
    var knownInfo: ImageInfo?

    /// An open TIFF and its first page's layout.
    struct Header {
        let file: TIFFMemoryFile
        let width: Int
        let height: Int
        let hasAlpha: Bool
        let tiled: Bool
        /// Rows per strip, or a tile's sides.
        let blockWidth: Int
        let blockHeight: Int
        let info: ImageInfo
    }

    var decodesAlone: Bool { true }

    /// The most strips or tiles read (a 100 MP image in 256-pixel tiles has 1,526).
    static let maxBlocks = 65_536

    /// Blocks libtiff fails to read before a lenient decode stops (the rest stays black).
    static let maxFailedBlocks = 16

    func withHeader<R>(
        _ input: ImageInput, options: DecodeOptions, label: String, _ body: (CodecHeader<Header>) throws(VipsError) -> R
    ) throws(VipsError) -> R {
        try input.withMappedBytes(label: label) { raw throws(VipsError) in
            let limit = max(
                16 << 20, min(1 << 30, options.limits.maxPixelCount.multipliedReportingOverflow(by: 8).partialValue))
            let file: TIFFMemoryFile
            switch TIFFMemoryFile.open(raw, maxSingleAllocation: limit) {
            case .success(let opened): file = opened
            case .failure(let error): throw VipsError(error.kind, "\(label): \(error.message)")
            }
            return try body(.read(try header(file, limits: options.limits, label: label)))
        }
    }

    /// The first page's layout from its tags, checked against the limits.
    private func header(_ file: TIFFMemoryFile, limits: DecodeLimits, label: String) throws(VipsError) -> Header {
        let tiff = file.tiff
        var width: UInt32 = 0, height: UInt32 = 0
        guard vl_tiff_get_uint32(tiff, UInt32(TIFFTAG_IMAGEWIDTH), &width) == 1,
            vl_tiff_get_uint32(tiff, UInt32(TIFFTAG_IMAGELENGTH), &height) == 1, width > 0, height > 0
        else { throw VipsError(.corruptData, "\(label): the TIFF has no image size") }
        var samples: UInt16 = 1, extraCount: UInt16 = 0, photometric: UInt16 = 0
        var kinds: UnsafeMutablePointer<UInt16>?
        _ = vl_tiff_get_uint16_defaulted(tiff, UInt32(TIFFTAG_SAMPLESPERPIXEL), &samples)
        _ = vl_tiff_get_extra_samples(tiff, &extraCount, &kinds)
        let hasPhotometric = vl_tiff_get_uint16_defaulted(tiff, UInt32(TIFFTAG_PHOTOMETRIC), &photometric) == 1
        // libtiff's RGBA interface takes associated or unassociated alpha, and a fourth RGB sample without ExtraSamples.
        var hasAlpha = false
        if extraCount > 0, let kinds {
            hasAlpha = (0..<Int(extraCount)).contains {
                kinds[$0] == UInt16(EXTRASAMPLE_ASSOCALPHA) || kinds[$0] == UInt16(EXTRASAMPLE_UNASSALPHA)
            }
        } else if samples == 4, hasPhotometric, photometric == UInt16(PHOTOMETRIC_RGB) {
            hasAlpha = true
        }
        let tiled = TIFFIsTiled(tiff) != 0
        var blockWidth = Int(width), blockHeight = Int(height)
        if tiled {
            var tileWidth: UInt32 = 0, tileHeight: UInt32 = 0
            guard vl_tiff_get_uint32(tiff, UInt32(TIFFTAG_TILEWIDTH), &tileWidth) == 1,
                vl_tiff_get_uint32(tiff, UInt32(TIFFTAG_TILELENGTH), &tileHeight) == 1, tileWidth > 0, tileHeight > 0
            else { throw VipsError(.corruptData, "\(label): the tiled TIFF has no tile size") }
            (blockWidth, blockHeight) = (Int(tileWidth), Int(tileHeight))
        } else {
            var rows: UInt32 = 0
            if vl_tiff_get_uint32(tiff, UInt32(TIFFTAG_ROWSPERSTRIP), &rows) == 1, rows > 0 {
                blockHeight = min(Int(rows), Int(height))
            }
        }
        let info =
            knownInfo
            ?? ImageInfo(
                storedWidth: Int(width), height: Int(height), format: .tiff, bands: hasAlpha ? 4 : 3,
                hasAlpha: hasAlpha, orientation: 1)
        // A strip's or tile's buffer is allocated too: it obeys the pixel limit as the image does.
        let (blockPixels, overflow) = blockWidth.multipliedReportingOverflow(by: blockHeight)
        if overflow || blockPixels > limits.maxPixelCount {
            throw VipsError(
                .tooLarge,
                "\(label): a TIFF block of \(blockWidth)×\(blockHeight) px exceeds the limit of \(limits.maxPixelCount) pixels"
            )
        }
        // Each block is a libtiff call that sets up the whole RGBA conversion again: a file of tiny
        // tiles over a large image is work without end, refused as a limit is.
        let across = (Int(width) + blockWidth - 1) / blockWidth, down = (Int(height) + blockHeight - 1) / blockHeight
        if across * down > Self.maxBlocks {
            throw VipsError(
                .tooLarge, "\(label): \(across * down) TIFF strips or tiles exceed the limit of \(Self.maxBlocks)")
        }
        return Header(
            file: file, width: Int(width), height: Int(height), hasAlpha: hasAlpha, tiled: tiled,
            blockWidth: blockWidth, blockHeight: blockHeight, info: info)
    }

    func info(of header: Header) -> ImageInfo { header.info }

    func route(_ header: Header, options: DecodeOptions) -> DecodeRoute { .direct }

    func decode(
        _ header: Header, _ request: DecodeRequest, options: DecodeOptions, label: String
    ) throws(VipsError) -> Bitmap? {
        let tiff = header.file.tiff
        let canvas = try RasterCanvas(
            width: header.width, height: header.height, channels: header.hasAlpha ? 4 : 3, label: label)
        var reason = [CChar](repeating: 0, count: 1024)
        guard TIFFRGBAImageOK(tiff, &reason) == 1 else {
            // Sample widths the RGBA interface refuses (12 bits, 32-bit floats) are read as samples.
            let text = String(decoding: reason.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            try TIFFSampleReader(file: header.file, header: header, strict: options.strict, label: label)
                .decode(into: canvas, refusal: "libtiff: \(text)")
            return canvas.bitmap()
        }
        let (blockWidth, blockHeight) = (header.blockWidth, header.blockHeight)
        let raster = try PixelStorage.allocate(width: blockWidth, height: blockHeight, channels: 4, label: label)
        let pixels = raster.pointer.bindMemory(to: UInt32.self, capacity: blockWidth * blockHeight)
        let stop: Int32 = options.strict ? 1 : 0
        var failures = 0, stopped = false
        func failed(_ what: String) throws(VipsError) {
            failures += 1
            if failures >= Self.maxFailedBlocks, !options.strict { stopped = true }
            let message = header.file.firstError ?? "libtiff could not read \(what)"
            header.file.clearError()
            if options.strict { throw VipsError(ImageDecoder.kind(forDecodeFailure: message), "\(label): \(message)") }
        }
        var row = 0
        while row < header.height, !stopped {
            try canvas.checkCancellation(row: row)
            if header.tiled {
                var column = 0
                while column < header.width, !stopped {
                    raster.pointer.initializeMemory(as: UInt8.self, repeating: 0, count: raster.count)
                    guard TIFFReadRGBATileExt(tiff, UInt32(column), UInt32(row), pixels, stop) == 1 else {
                        // Nothing to copy: the canvas is black there already.
                        try failed("the tile at \(column), \(row)")
                        column += blockWidth
                        continue
                    }
                    // Bottom-up within the tile: tile row r is image row `row + blockHeight - 1 - r`.
                    for r in 0..<blockHeight {
                        let y = row + blockHeight - 1 - r
                        guard y < header.height else { continue }
                        for c in 0..<min(blockWidth, header.width - column) {
                            put(pixels[r * blockWidth + c], canvas, column + c, y)
                        }
                    }
                    column += blockWidth
                }
            } else {
                let rows = min(blockHeight, header.height - row)
                raster.pointer.initializeMemory(as: UInt8.self, repeating: 0, count: raster.count)
                guard TIFFReadRGBAStripExt(tiff, UInt32(row), pixels, stop) == 1 else {
                    try failed("the strip at row \(row)")
                    row += blockHeight
                    continue
                }
                // Bottom-up within the strip's `rows` rows.
                for r in 0..<rows {
                    let y = row + rows - 1 - r
                    for x in 0..<header.width { put(pixels[r * header.width + x], canvas, x, y) }
                }
            }
            row += blockHeight
        }
        if failures > 0 { VipsRuntime.countWarning("\(label): libtiff could not read \(failures) strips or tiles") }
        return canvas.bitmap()
    }

    /// One of libtiff's packed pixels (R, G, B, A from the low byte up; alpha premultiplied) into the canvas, straight.
    private func put(_ pixel: UInt32, _ canvas: RasterCanvas, _ x: Int, _ y: Int) {
        var (red, green, blue) = (pixel & 0xFF, pixel >> 8 & 0xFF, pixel >> 16 & 0xFF)
        let alpha = pixel >> 24
        if canvas.channels == 4, alpha > 0, alpha < 255 {
            func straight(_ value: UInt32) -> UInt32 { min(255, (value * 255 + alpha / 2) / alpha) }
            (red, green, blue) = (straight(red), straight(green), straight(blue))
        }
        canvas.set(x, y, UInt8(red), UInt8(green), UInt8(blue), UInt8(alpha))
    }
}
