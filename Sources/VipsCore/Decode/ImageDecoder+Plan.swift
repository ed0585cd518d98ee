import CVipsShim

extension ImageDecoder {
    /// Decodes `input` as `geometry` plans it from the header: the header is
    /// read first, `geometry.plan(for:)` decides the crop, the exact size and
    /// the result crop (see `DecodePlan`), and the pixels are decoded straight
    /// to it, upright, 8-bit sRGB, tagged with `scale`.
    ///
    /// The loader shrinks as far as the plan allows (JPEG's DCT scaling, WebP's
    /// scaled decode) while the crop stays at least the plan's size, and the
    /// crop is cut at the shrunk scale; a plan of the whole image that a fit
    /// gives exactly takes the fit's decode (direct codecs included). The
    /// bitmap's `source.loadShrink` says how far the loader shrank.
    /// `keepingMetadata` reads the EXIF block and notes the profile, as the
    /// other decodes do.
    ///
    /// - Throws: `.invalidArgument` for a bad scale or a plan that does not
    ///   fit the image (`DecodePlan.validate(for:)`), `.tooLarge` for a plan
    ///   over the limits, what `plan(for:)` throws, and the decode's errors.
    public func decode(
        _ input: ImageInput, geometry: any ImageGeometry, scale: Double = 1, keepingMetadata: Bool = false
    ) throws(VipsError) -> Bitmap {
        guard scale > 0, scale.isFinite else {
            throw VipsError(.invalidArgument, "scale \(scale) is not a valid scale")
        }
        _ = VipsRuntime.takeLastWarning()
        let bitmap = try withImage(input) { image throws(VipsError) -> Bitmap in
            let info = image.info
            let plan = try geometry.plan(for: info)
            try plan.validate(for: info)
            let label = "\(name(of: input)): \(plan)"
            var output = info
            (output.width, output.height, output.pages) = (plan.width, plan.height, 1)
            try options.limits.check(output, label: label)
            let (decoded, shrink) = try decode(image, input: input, plan: plan, label: label)
            let damaged = !options.strict && VipsRuntime.takeLastWarning().map { !Self.isHarmlessWarning($0) } == true
            return decoded.withScale(scale).withSource(
                BitmapSource(info: info, decodedLeniently: damaged, loadShrink: shrink))
        }
        guard keepingMetadata, let source = bitmap.source else { return bitmap }
        return bitmap.withSource(
            BitmapSource(
                info: source.info, decodedLeniently: source.decodedLeniently, metadata: try metadata(input),
                loadShrink: source.loadShrink))
    }

    /// The plan's pixels and the loader's shrink.
    private func decode(
        _ image: OpenedImage, input: ImageInput, plan: DecodePlan, label: String
    ) throws(VipsError) -> (Bitmap, Double) {
        var (bitmap, shrink): (Bitmap, Double)
        if plan.crop == nil, let fitted = try fitted(image, input: input, plan: plan) {
            (bitmap, shrink) = fitted
        } else {
            switch image {
            case .direct(let direct):
                (bitmap, shrink) = try withLibvipsHeader(input, format: direct.info.format) {
                    header, source throws(VipsError) in
                    try decode(source, header: header, plan: plan, label: label)
                }
            case .libvips(let header, let source):
                (bitmap, shrink) = try decode(source, header: header, plan: plan, label: label)
            }
        }
        if let resultCrop = plan.resultCrop { bitmap = try Self.crop(bitmap, resultCrop, label: label) }
        return (bitmap, shrink)
    }

    /// The whole image by the fit decode, when a fit gives the plan's size
    /// exactly; nil otherwise (an enlargement, another aspect ratio, a rounding apart).
    private func fitted(
        _ image: OpenedImage, input: ImageInput, plan: DecodePlan
    ) throws(VipsError) -> (Bitmap, Double)? {
        let info = image.info
        let box = (width: plan.width, height: plan.height)
        if box == (info.width, info.height) {
            return (try decode(image, input: input, size: .original, scale: 1, allowUpscale: false), 1)
        }
        let swapped = info.orientation >= 5
        let stored = swapped ? (info.height, info.width) : (info.width, info.height)
        guard box.width <= info.width, box.height <= info.height,
            let stored = ThumbnailSize.fitting(width: stored.0, height: stored.1, into: box, swapped: swapped)
        else { return nil }
        let fit = swapped ? (width: stored.height, height: stored.width) : stored
        // imgproxy rounds a scaled side half away from zero; the fit's own rounding may land a
        // pixel apart. Then the covering side's fit (at least the box both ways) is cut to the box
        // in its middle: under a pixel of shift, and the direct codecs still decode it.
        guard abs(fit.width - box.width) <= 1, abs(fit.height - box.height) <= 1 else { return nil }
        var bitmap = try decode(
            image, input: input,
            size: fit == box ? .fit(width: box.width, height: box.height) : Self.coveringSide(info, box: box),
            scale: 1, allowUpscale: false)
        guard bitmap.width >= box.width, bitmap.height >= box.height,
            bitmap.width - box.width <= 2, bitmap.height - box.height <= 2
        else { return nil }
        bitmap = try Self.middle(of: bitmap, box)
        let allowed = options.loaderShrink(info, box: box).raster
        let shrink: Double
        switch info.format {
        case .jpeg: shrink = Double(Self.jpegShrink(allowed: allowed) ?? 1)
        case .webp where allowed > 1 && info.pages == 1: shrink = allowed
        default: shrink = 1
        }
        return (bitmap, shrink)
    }

    /// The libvips decode of a plan: the loader's shrink, the crop at the
    /// shrunk scale in the stored orientation, the exact resize, then the
    /// pixels turned upright.
    private func decode(
        _ source: UnsafeMutablePointer<VipsSource>, header: LibvipsHeader, plan: DecodePlan, label: String
    ) throws(VipsError) -> (Bitmap, Double) {
        let info = header.info
        let region: (width: Int, height: Int) = plan.crop?.size ?? (info.width, info.height)
        // Shrink on load while the kept region stays at least the plan's size (with the mode's margin).
        let fits = min(Double(region.width) / Double(plan.width), Double(region.height) / Double(plan.height))
        let allowed = min(fits / options.shrinkOnLoad.margin, Double(max(1, min(info.width, info.height))) * 0.99)
        var loaded = header.image
        switch info.format {
        case .jpeg:
            if let shrink = Self.jpegShrink(allowed: allowed) {
                loaded = try load(source, shrink: shrink, label: label)
            }
        case .webp where allowed > 1 && info.pages == 1:
            loaded = try Self.load(label) {
                vl_load_named_scale(LibVips.table, header.loader, source, VIPS_ACCESS_SEQUENTIAL, failOn, 1 / allowed)
            }
        default:
            break
        }
        let swapped = info.orientation >= 5
        let stored = swapped ? (width: info.height, height: info.width) : (width: info.width, height: info.height)
        let loadedHeight = Int(libvips.vips_image_get_page_height(loaded.pointer))
        let (xScale, yScale) = (
            Double(loaded.width) / Double(stored.width), Double(loadedHeight) / Double(stored.height)
        )
        let target = swapped ? (width: plan.height, height: plan.width) : (width: plan.width, height: plan.height)
        var image = loaded
        if loadedHeight != loaded.height {
            image = try BitmapOperation.extract(image, x: 0, y: 0, width: loaded.width, height: loadedHeight, label)
        }
        var smart: Gravity?
        switch plan.crop {
        case .rect(let x, let y, let width, let height):
            let rect = Self.storedRect(
                x: x, y: y, width: width, height: height, orientation: info.orientation, stored: stored)
            func scaled(_ value: Int, _ factor: Double) -> Int { Int((Double(value) * factor).rounded()) }
            let cropWidth = min(image.width, max(1, scaled(rect.width, xScale)))
            let cropHeight = min(image.height, max(1, scaled(rect.height, yScale)))
            let left = min(image.width - cropWidth, scaled(rect.x, xScale))
            let top = min(image.height - cropHeight, scaled(rect.y, yScale))
            image = try BitmapOperation.extract(image, x: left, y: top, width: cropWidth, height: cropHeight, label)
            image = try resize(image, to: target, label: label)
        case .smart(let width, let height, let gravity):
            // The whole image at the crop's scale; the smart crop is cut from its pixels below.
            let region = swapped ? (width: height, height: width) : (width: width, height: height)
            let whole = (
                width: max(
                    target.width, Int((Double(target.width) * Double(stored.width) / Double(region.width)).rounded())),
                height: max(
                    target.height,
                    Int((Double(target.height) * Double(stored.height) / Double(region.height)).rounded()))
            )
            image = try resize(image, to: whole, label: label)
            smart = gravity
        case nil:
            image = try resize(image, to: target, label: label)
        }
        var bitmap = try Self.materialise(try Self.normalise(image, label: label), scale: 1, label: label)
        VipsRuntime.discardErrorMessages()
        bitmap = try PixelOrientation.upright(bitmap, orientation: info.orientation, label: label)
        if let smart {
            bitmap = try Self.crop(bitmap, .smart(width: plan.width, height: plan.height, gravity: smart), label: label)
        }
        return (bitmap, Double(stored.width) / Double(loaded.width))
    }

    /// `image` resized to exactly `size`: bicubic in fast mode when shrinking,
    /// else Lanczos 3; premultiplied when it has alpha.
    private func resize(
        _ image: VipsImageHandle, to size: (width: Int, height: Int), label: String
    ) throws(VipsError) -> VipsImageHandle {
        guard size.width != image.width || size.height != image.height else { return image }
        let step = "\(label): resize"
        let shrinking = size.width <= image.width && size.height <= image.height
        let kernel = options.shrinkOnLoad == .fast && shrinking ? VIPS_KERNEL_CUBIC : VIPS_KERNEL_LANCZOS3
        func resized(_ input: VipsImageHandle) throws(VipsError) -> VipsImageHandle {
            try input.apply(decodeKind, step) {
                vl_resize_kernel(
                    LibVips.table, $0, $1, Double(size.width) / Double(input.width),
                    Double(size.height) / Double(input.height), kernel)
            }
        }
        var output: VipsImageHandle
        if image.hasAlpha {
            let format = image.bandFormat
            let premultiplied = try image.apply(decodeKind, step) { vl_premultiply(LibVips.table, $0, $1) }
            let straight = try resized(premultiplied).apply(decodeKind, step) {
                vl_unpremultiply(LibVips.table, $0, $1)
            }
            output = try straight.apply(decodeKind, step) { vl_cast(LibVips.table, $0, $1, format) }
        } else {
            output = try resized(image)
        }
        // vips_resize rounds each side from its scale; a side a pixel long is cut back (never short: see below).
        if output.width > size.width || output.height > size.height {
            output = try BitmapOperation.extract(
                output, x: 0, y: 0, width: min(output.width, size.width), height: min(output.height, size.height), label
            )
        }
        guard output.width == size.width, output.height == size.height else {
            throw VipsError(
                .internal, "\(step): libvips made \(output.width)x\(output.height), not \(size.width)x\(size.height)")
        }
        return output
    }

    private var decodeKind: VipsError.Kind { .corruptData }

    /// The rectangle of the stored (not yet oriented) image under an upright
    /// rectangle, for EXIF `orientation`; `stored` is the stored size.
    static func storedRect(
        x: Int, y: Int, width: Int, height: Int, orientation: Int, stored: (width: Int, height: Int)
    ) -> (x: Int, y: Int, width: Int, height: Int) {
        let (w, h) = stored
        switch orientation {
        case 2: return (w - x - width, y, width, height)
        case 3: return (w - x - width, h - y - height, width, height)
        case 4: return (x, h - y - height, width, height)
        case 5: return (y, x, height, width)
        case 6: return (y, h - x - width, height, width)
        case 7: return (w - y - height, h - x - width, height, width)
        case 8: return (w - y - height, x, height, width)
        default: return (x, y, width, height)
        }
    }

    /// `bitmap` cropped to `crop` (a smart crop finds its region from the pixels).
    /// `bitmap` cut to `box` in its middle, rows copied (a pixel or two off
    /// each side at most: no libvips needed for that).
    static func middle(of bitmap: Bitmap, _ box: (width: Int, height: Int)) throws(VipsError) -> Bitmap {
        guard bitmap.width != box.width || bitmap.height != box.height else { return bitmap }
        let channels = bitmap.channels
        let x = (bitmap.width - box.width) / 2
        let y = (bitmap.height - box.height) / 2
        let rowBytes = box.width * channels
        var pixels = [UInt8](repeating: 0, count: rowBytes * box.height)
        bitmap.withUnsafeBytes { source in
            pixels.withUnsafeMutableBytes { target in
                guard let from = source.baseAddress, let to = target.baseAddress else { return }
                for row in 0..<box.height {
                    (to + row * rowBytes).copyMemory(
                        from: from + (y + row) * bitmap.bytesPerRow + x * channels, byteCount: rowBytes)
                }
            }
        }
        return try Bitmap(width: box.width, height: box.height, channels: channels, scale: bitmap.scale, pixels: pixels)
            .withSource(bitmap.source)
    }

    static func crop(_ bitmap: Bitmap, _ crop: DecodePlan.Crop, label: String) throws(VipsError) -> Bitmap {
        switch crop {
        case .rect(let x, let y, let width, let height):
            guard x != 0 || y != 0 || width != bitmap.width || height != bitmap.height else { return bitmap }
            return try BitmapOperation.run(bitmap, label) { image throws(VipsError) -> VipsImageHandle in
                try BitmapOperation.extract(
                    image, x: max(0, min(x, bitmap.width - width)), y: max(0, min(y, bitmap.height - height)),
                    width: min(width, bitmap.width), height: min(height, bitmap.height), label)
            }
        case .smart(let width, let height, let gravity):
            return try Self.crop(bitmap, to: (width, height), gravity: gravity, label: label)
        }
    }
}
