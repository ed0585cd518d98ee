import CVipsShim

extension ImageDecoder {
    /// Decodes `input` to an upright 8-bit sRGB bitmap brought to `size` by
    /// `mode` (see `ResizeMode`). Sizes are points × `scale` = pixels.
    ///
    /// The header is read once, first (so the bitmap's `source` records the
    /// original size, format, orientation and pages, and whether the data was
    /// damaged), by the reader `info` uses. `.fit` is then
    /// `decode(_:size:scale:allowUpscale:)`; the other modes decode through
    /// the same shrink-on-load path with a one-sided target (`.width` or
    /// `.height`) that makes the image just cover the box — the largest
    /// shrink the output allows — and finish on the decoded pixels: a crop (at
    /// a compass gravity, or by `vips_smartcrop` for `.attention`/`.entropy`),
    /// a pad, or an independent scale per side. Without `allowUpscale` no side
    /// grows beyond the image's: `fill` and `stretch` give at most the image's
    /// own size per side, and `contain` pads a small image to the box without
    /// enlarging it. `keepingMetadata` also reads the source's EXIF block (and
    /// notes its profile) into `source.metadata`, for an encoder that keeps metadata.
    ///
    /// - Throws: `.invalidArgument` for a zero or negative size, a bad scale,
    ///   or a mode that needs a box given a one-sided size; otherwise the decode's errors.
    public func decode(
        _ input: ImageInput, size: TargetSize, mode: ResizeMode, scale: Double = 1,
        allowUpscale: Bool = false, keepingMetadata: Bool = false
    ) throws(VipsError) -> Bitmap {
        // libvips is started by whichever step needs it (not a direct codec).
        guard size.isValid, scale > 0, scale.isFinite else {
            throw VipsError(.invalidArgument, "target size \(size) at scale \(scale) is not a valid size")
        }
        try mode.validate(for: size)
        // Only this decode's own warnings (its header's included) tell whether it was lenient.
        _ = VipsRuntime.takeLastWarning()
        let bitmap = try withImage(input) { image throws(VipsError) in
            try decodeNotingDamage(
                image, input: input, size: size, mode: mode, scale: scale, allowUpscale: allowUpscale)
        }
        guard keepingMetadata, let source = bitmap.source else { return bitmap }
        return bitmap.withSource(
            BitmapSource(info: source.info, decodedLeniently: source.decodedLeniently, metadata: try metadata(input)))
    }

    /// `mode`'s decode of an opened image, with its `source` noted: the opened
    /// header, and whether the data was damaged, from this thread's warnings
    /// since the caller reset them (before the header was read).
    func decodeNotingDamage(
        _ image: OpenedImage, input: ImageInput, size: TargetSize, mode: ResizeMode, scale: Double,
        allowUpscale: Bool
    ) throws(VipsError) -> Bitmap {
        let bitmap = try decode(image, input: input, size: size, mode: mode, scale: scale, allowUpscale: allowUpscale)
        // Warnings are noted per thread, and this decode ran on this one: a
        // lenient decode of damaged data is the one that warns (libjpeg's
        // "premature end", libpng's CRC and truncation complaints).
        // (libjpeg's reaches the handler with an empty text, so warnings are
        // told apart by the known harmless ones instead.)
        let damaged = !options.strict && VipsRuntime.takeLastWarning().map { !Self.isHarmlessWarning($0) } == true
        return bitmap.withSource(BitmapSource(info: image.info, decodedLeniently: damaged))
    }

    /// `mode`'s decode of an opened image: fill and stretch take the covering side from its header.
    private func decode(
        _ image: OpenedImage, input: ImageInput, size: TargetSize, mode: ResizeMode, scale: Double,
        allowUpscale: Bool
    ) throws(VipsError) -> Bitmap {
        guard let box = size.pixelBox(scale: scale) else {
            return try decode(image, input: input, size: size, scale: scale, allowUpscale: allowUpscale)
        }
        let label = "\(name(of: input)): \(mode)"
        switch mode {
        case .fit:
            return try decode(image, input: input, size: size, scale: scale, allowUpscale: allowUpscale)
        case .fill(let gravity):
            let covering = try decode(
                image, input: input, size: Self.coveringSide(image.info, box: box), scale: 1,
                allowUpscale: allowUpscale
            ).withScale(scale)
            let target = Self.clampedTarget(box, image.info, allowUpscale: allowUpscale)
            return try Self.crop(covering, to: target, gravity: gravity, label: label)
        case .stretch:
            let covering = try decode(
                image, input: input, size: Self.coveringSide(image.info, box: box), scale: 1,
                allowUpscale: allowUpscale
            ).withScale(scale)
            let target = Self.clampedTarget(box, image.info, allowUpscale: allowUpscale)
            return try Self.stretch(covering, to: target, label: label)
        case .contain(let background, let gravity):
            let fitted = try decode(
                image, input: input, size: .fit(width: box.width, height: box.height), scale: 1,
                allowUpscale: allowUpscale
            ).withScale(scale)
            return try Self.pad(fitted, to: box, background: background, gravity: gravity, label: label)
        }
    }

    /// Warnings libvips gives for intact files: libheif's note that it
    /// ignores an AVIF's nclx colour description (every AVIF libvips writes has one).
    static func isHarmlessWarning(_ message: String) -> Bool {
        message.lowercased().contains("ignoring nclx profile")
    }

    /// The one-sided target (in pixels, as points at scale 1 would be) whose
    /// fit covers `box`: the side that needs the smaller shrink decides, and
    /// the other side then comes out at least as long as the box's.
    static func coveringSide(_ info: ImageInfo, box: (width: Int, height: Int)) -> TargetSize {
        // Compared as W·ih ≥ H·iw in integers, so equal ratios cannot tip on rounding.
        let widthDecides =
            box.width.multipliedFullWidth(by: info.height) >= box.height.multipliedFullWidth(by: info.width)
        return widthDecides ? .width(box.width) : .height(box.height)
    }

    /// The exact output of fill and stretch: the box, each side clamped to
    /// the image's own when upscaling is off.
    static func clampedTarget(
        _ box: (width: Int, height: Int), _ info: ImageInfo,
        allowUpscale: Bool
    ) -> (width: Int, height: Int) {
        allowUpscale ? box : (min(box.width, info.width), min(box.height, info.height))
    }

    /// Crops a bitmap that covers `target` down to it, at `gravity`.
    static func crop(
        _ bitmap: Bitmap, to target: (width: Int, height: Int), gravity: Gravity,
        label: String
    ) throws(VipsError) -> Bitmap {
        let width = min(target.width, bitmap.width), height = min(target.height, bitmap.height)
        guard width != bitmap.width || height != bitmap.height else { return bitmap }
        return try BitmapOperation.run(bitmap, label) { image throws(VipsError) -> VipsImageHandle in
            switch gravity {
            case .attention, .entropy:
                let interesting = gravity == .attention ? VIPS_INTERESTING_ATTENTION : VIPS_INTERESTING_ENTROPY
                return try image.apply(.internal, "\(label): smart crop") {
                    vl_smartcrop(LibVips.table, $0, $1, Int32(width), Int32(height), interesting)
                }
            default:
                let origin = gravity.origin(whole: (bitmap.width, bitmap.height), part: (width, height))
                return try BitmapOperation.extract(image, x: origin.x, y: origin.y, width: width, height: height, label)
            }
        }
    }

    /// Scales each side of `bitmap` to `target` independently.
    static func stretch(
        _ bitmap: Bitmap, to target: (width: Int, height: Int), label: String
    ) throws(VipsError) -> Bitmap {
        guard target.width != bitmap.width || target.height != bitmap.height else { return bitmap }
        return try BitmapOperation.run(bitmap, label) { image throws(VipsError) -> VipsImageHandle in
            try image.apply(.internal, "\(label): stretch") {
                vl_thumbnail_image(LibVips.table, $0, $1, Int32(target.width), Int32(target.height), VIPS_SIZE_FORCE, 1)
            }
        }
    }

    /// Places `bitmap` in a `box` canvas of `background` at `gravity`. The
    /// result has alpha when the bitmap or the background has.
    static func pad(
        _ bitmap: Bitmap, to box: (width: Int, height: Int), background: Colour, gravity: Gravity,
        label: String
    ) throws(VipsError) -> Bitmap {
        guard box.width != bitmap.width || box.height != bitmap.height || !background.isOpaque else { return bitmap }
        return try BitmapOperation.run(bitmap, label) { image throws(VipsError) -> VipsImageHandle in
            let source = background.isOpaque ? image : try BitmapOperation.withAlpha(image, label)
            let colour = background.bands(source.bands)
            let direction = gravity.compassDirection
            return try source.apply(.internal, "\(label): pad") { input, output in
                colour.withUnsafeBufferPointer {
                    vl_gravity(
                        LibVips.table,
                        input, output, direction, Int32(box.width), Int32(box.height), $0.baseAddress, Int32($0.count))
                }
            }
        }
    }
}

extension Gravity {
    /// libvips' compass direction for a placement (smart gravities: the centre).
    var compassDirection: VipsCompassDirection {
        switch self {
        case .centre, .attention, .entropy: return VIPS_COMPASS_DIRECTION_CENTRE
        case .north: return VIPS_COMPASS_DIRECTION_NORTH
        case .south: return VIPS_COMPASS_DIRECTION_SOUTH
        case .east: return VIPS_COMPASS_DIRECTION_EAST
        case .west: return VIPS_COMPASS_DIRECTION_WEST
        case .northEast: return VIPS_COMPASS_DIRECTION_NORTH_EAST
        case .northWest: return VIPS_COMPASS_DIRECTION_NORTH_WEST
        case .southEast: return VIPS_COMPASS_DIRECTION_SOUTH_EAST
        case .southWest: return VIPS_COMPASS_DIRECTION_SOUTH_WEST
        }
    }
}
