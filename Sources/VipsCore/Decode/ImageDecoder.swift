import CVipsShim
import Foundation

/// Probes and decodes images with libvips: header-only probes, full decodes
/// and thumbnails that shrink while decoding, always to 8-bit sRGB `Bitmap`s.
///
/// A decoder is a value holding its options; it is `Sendable` and can be used
/// from any number of threads at once. Every failure is a `VipsError`.
public struct ImageDecoder: Sendable {
    /// The options every call uses.
    public var options: DecodeOptions
    /// Whether images a direct codec decodes exactly take it (see
    /// `CodecRegistry`); false sends everything through libvips, for tests
    /// and comparisons.
    var usesDirectPaths = true
    /// What a caller already knows of one file input (its size and first
    /// bytes, as a loader or cache read them), so admitting it needs neither
    /// an open nor a read. Used only for that exact input.
    package var knownFile: (path: String, byteCount: Int, prefix: [UInt8])?
    /// What messages call the input, when the caller hands over a stand-in
    /// for it (the pipeline names a download's temporary or cache file by the
    /// request's URL, so no message names the stand-in); nil: `input.label`.
    package var inputName: String?

    /// A decoder with `options` (default `DecodeOptions()`: 100 MP limit, lenient, fast shrink-on-load).
    public init(options: DecodeOptions = DecodeOptions()) {
        self.options = options
    }

    /// What messages call `input`: `inputName` when the caller gave one.
    func name(of input: ImageInput) -> String {
        inputName ?? input.label
    }

    // MARK: - Probe

    /// Reads the header only: size after EXIF orientation, format, bands, alpha, pages.
    ///
    /// The header is read as `decode` reads it: by the format's direct codec
    /// when that codec decodes the image, else by libvips, so the two agree.
    public func info(_ input: ImageInput) throws(VipsError) -> ImageInfo {
        let info = try withImage(input) { $0.info }
        VipsRuntime.discardErrorMessages()
        return info
    }

    // MARK: - Decode

    /// Decodes `input` to an upright 8-bit sRGB bitmap fitting `size` (in points × `scale`).
    ///
    /// Shrinks while decoding where the format allows, so a 4000×3000 JPEG
    /// decoded to 256 px never exists at full size. Never upscales unless
    /// `allowUpscale` is set.
    public func decode(
        _ input: ImageInput, size: TargetSize = .original, scale: Double = 1,
        allowUpscale: Bool = false
    ) throws(VipsError) -> Bitmap {
        guard size.isValid, scale > 0, scale.isFinite else {
            throw VipsError(.invalidArgument, "target size \(size) at scale \(scale) is not a valid size")
        }
        // Only this decode's own warnings (its header's included) tell whether it was lenient.
        _ = VipsRuntime.takeLastWarning()
        return try withImage(input) { image throws(VipsError) in
            try decodeNotingDamage(
                image, input: input, size: size, mode: .fit, scale: scale, allowUpscale: allowUpscale)
        }
    }

    /// Decodes an opened image: on its direct codec when that codec takes the
    /// request, else with libvips. The bitmap's `source` records the opened
    /// header (the direct codec's, even when libvips decodes the pixels).
    func decode(
        _ image: OpenedImage, input: ImageInput, size: TargetSize, scale: Double, allowUpscale: Bool
    ) throws(VipsError) -> Bitmap {
        let origin = BitmapSource(info: image.info, decodedLeniently: false)
        switch image {
        case .direct(let direct):
            // The direct codecs need no libvips: it is started (once per process) only for what they decline.
            let request = DecodeRequest(size: size, scale: scale, allowUpscale: allowUpscale)
            if let bitmap = try decodeDirectly(direct, request) { return bitmap.withSource(origin) }
            return try withLibvipsHeader(input, format: direct.info.format) { header, source throws(VipsError) in
                try decode(
                    source, input: input, header: header, size: size, scale: scale, allowUpscale: allowUpscale,
                    label: name(of: input))
            }.withSource(origin)
        case .libvips(let header, let source):
            return try decode(
                source, input: input, header: header, size: size, scale: scale, allowUpscale: allowUpscale,
                label: name(of: input)
            ).withSource(origin)
        }
    }

    /// The libvips path of `decode`, from the probed header.
    private func decode(
        _ source: UnsafeMutablePointer<VipsSource>, input: ImageInput, header: LibvipsHeader, size: TargetSize,
        scale: Double, allowUpscale: Bool, label: String
    ) throws(VipsError) -> Bitmap {
        guard let box = size.pixelBox(scale: scale) else {
            return try finish(
                header.image, width: header.info.width, height: header.info.height,
                allowUpscale: allowUpscale, scale: scale, label: label)
        }
        let (width, height): (Int, Int)
        if allowUpscale {
            try checkUpscale(header.info, box: box, label: label)
            (width, height) = (box.width, box.height)
        } else {
            // A box side beyond the image changes nothing when shrinking
            // only; clamping keeps huge boxes inside libvips' coordinate range.
            (width, height) = (min(box.width, header.info.width), min(box.height, header.info.height))
        }
        if let dcOnly = progressiveDCOnly(input, header: header, box: box) {
            // Decode the shortened stream instead; nested so its bytes outlive every lazy step.
            return try ImageInput.data(dcOnly).withSource { shortened throws(VipsError) in
                let image = try load(shortened, shrink: 8, label: label)
                return try finish(
                    image, width: width, height: height, allowUpscale: allowUpscale, scale: scale, label: label)
            }
        }
        let image = try shrinkOnLoad(source, header: header, box: box, label: label) ?? header.image
        return try finish(image, width: width, height: height, allowUpscale: allowUpscale, scale: scale, label: label)
    }

    /// Resizes to fit width × height (upright, colour-managed) and materialises 8-bit sRGB pixels.
    func finish(
        _ image: VipsImageHandle, width: Int, height: Int, allowUpscale: Bool, scale: Double,
        label: String
    ) throws(VipsError) -> Bitmap {
        let image = try fastResidualResize(
            image, width: width, height: height, allowUpscale: allowUpscale, label: label)
        let sized = try image.apply(decodeErrorKind, "\(label): decode") {
            vl_thumbnail_image(
                LibVips.table,
                $0, $1, Int32(clamping: width), Int32(clamping: height),
                allowUpscale ? VIPS_SIZE_BOTH : VIPS_SIZE_DOWN, 0)
        }
        let bitmap = try Self.materialise(try Self.normalise(sized, label: label), scale: scale, label: label)
        // A lenient decode of damaged data succeeds but leaves libvips' text behind;
        // clear it so it cannot be blamed on the next, unrelated failure.
        VipsRuntime.discardErrorMessages()
        return bitmap
    }

    /// In fast mode, does the downscale that is left after shrink-on-load
    /// with a bicubic kernel instead of `vips_thumbnail`'s lanczos3: 4 taps per
    /// unit of shrink instead of 6, the same kernel as Pillow's thumbnails,
    /// and most of the CPU left once libjpeg has shrunk a JPEG on load.
    ///
    /// The output has exactly the size `vips_thumbnail` would give (same
    /// arithmetic, in the stored orientation), so the thumbnail step that
    /// follows only rotates and converts colour. Multi-page images are left
    /// to it.
    ///
    /// Images with alpha are resized premultiplied, as `vips_thumbnail` does,
    /// but box-shrunk first, leaving 1.5–3× to the bicubic step:
    /// `vips_resize` on the whole float premultiplied image peaks about 16 MB
    /// higher for a 2000×1500 RGBA PNG. (Box-shrinking all the way, leaving
    /// under 2×, saves 6 MB more but is visibly softer than lanczos3.)
    func fastResidualResize(
        _ image: VipsImageHandle, width: Int, height: Int, allowUpscale: Bool,
        label: String
    ) throws(VipsError) -> VipsImageHandle {
        guard options.shrinkOnLoad == .fast, !allowUpscale,
            Int(libvips.vips_image_get_page_height(image.pointer)) == image.height
        else { return image }
        guard
            let output = ThumbnailSize.fitting(
                width: image.width, height: image.height, into: (width, height),
                swapped: (image.int("orientation") ?? 1) >= 5)
        else { return image }
        let (outWidth, outHeight) = output
        let step = "\(label): resize"
        func bicubic(_ input: VipsImageHandle) throws(VipsError) -> VipsImageHandle {
            try input.apply(decodeErrorKind, step) {
                vl_resize_kernel(
                    LibVips.table,
                    $0, $1, Double(outWidth) / Double(input.width), Double(outHeight) / Double(input.height),
                    VIPS_KERNEL_CUBIC)
            }
        }
        guard image.hasAlpha else { return try bicubic(image) }
        let format = image.bandFormat
        var premultiplied = try image.apply(decodeErrorKind, step) { vl_premultiply(LibVips.table, $0, $1) }
        // A whole-factor box shrink that leaves at least 1.5× to the bicubic step.
        let whole = (Double(min(image.width / outWidth, image.height / outHeight)) / 1.5).rounded(.down)
        if whole >= 2 {
            premultiplied = try premultiplied.apply(decodeErrorKind, step) {
                vl_shrink(LibVips.table, $0, $1, whole, whole)
            }
        }
        let resized = try bicubic(premultiplied)
        let straight = try resized.apply(decodeErrorKind, step) { vl_unpremultiply(LibVips.table, $0, $1) }
        return try straight.apply(decodeErrorKind, step) { vl_cast(LibVips.table, $0, $1, format) }
    }

    /// Downscales a bitmap in memory to fit `size`, without any decode.
    ///
    /// Used to serve a small request from a larger cached bitmap. The result
    /// is never larger than the input.
    public func resize(_ bitmap: Bitmap, to size: TargetSize, scale: Double) throws(VipsError) -> Bitmap {
        try VipsRuntime.start()
        guard size.isValid, scale > 0, scale.isFinite else {
            throw VipsError(.invalidArgument, "target size \(size) at scale \(scale) is not a valid size")
        }
        guard let box = size.pixelBox(scale: scale) else { return bitmap.withScale(scale) }
        let image = try Self.image(wrapping: bitmap)
        // Clamped to the bitmap, as in `decode`: it only ever shrinks.
        let (width, height) = (min(box.width, bitmap.width), min(box.height, bitmap.height))
        let sized = try image.apply(.internal, "resize") {
            vl_thumbnail_image(
                LibVips.table, $0, $1, Int32(clamping: width), Int32(clamping: height), VIPS_SIZE_DOWN, 1)
        }
        return try withExtendedLifetime(bitmap) { () throws(VipsError) -> Bitmap in
            try Self.materialise(sized, scale: scale, label: "resize")
        }
    }

    // MARK: - Steps

    var failOn: VipsFailOn { options.strict ? VIPS_FAIL_ON_ERROR : VIPS_FAIL_ON_NONE }
    private var decodeErrorKind: VipsError.Kind { .corruptData }

    /// Refuses empty, oversized, unknown and disallowed inputs from their first
    /// bytes, before any decoder runs (and without libvips); returns their format.
    func admit(_ input: ImageInput) throws(VipsError) -> ImageFormat {
        let (size, prefix): (Int, [UInt8])
        if case .file(let path) = input, let known = knownFile, known.path == path, !known.prefix.isEmpty {
            (size, prefix) = (known.byteCount, known.prefix)
        } else {
            (size, prefix) = try input.sizeAndPrefix()
        }
        let label = name(of: input)
        if size == 0 { throw VipsError(.emptyInput, "\(label): input is empty") }
        try options.limits.check(inputBytes: size, label: label)
        guard let format = ImageFormat.sniff(prefix) else {
            throw VipsError(.unsupportedFormat, "\(label): not a recognised image format")
        }
        guard options.allowedFormats.contains(format) else {
            throw VipsError(.unsupportedFormat, "\(label): \(format) images are not allowed by the decoder's options")
        }
        return format
    }

    /// Starts libvips and returns the one loader allowed to read `format`.
    func libvipsLoader(for format: ImageFormat, label: String) throws(VipsError) -> String {
        try VipsRuntime.start()
        guard let loader = format.libvipsLoader, Self.hasLoader(loader) else {
            throw VipsError(.unsupportedFormat, "\(label): this libvips has no loader for \(format) images")
        }
        return loader
    }

    /// Whether this libvips has `loader`, looked up once per process (a lookup walks
    /// every libvips class by name: a quarter of a small JPEG's decode).
    private static func hasLoader(_ loader: String) -> Bool {
        if let known = knownLoaders.withLock({ $0[loader] }) { return known }
        let present = libvips.vips_type_find("VipsOperation", loader) != 0
        knownLoaders.withLock { $0[loader] = present }
        return present
    }

    private static let knownLoaders = LockedState<[String: Bool]>([:])

    /// Opens the header (no pixels yet) with `loader` and checks the limits.
    func probe(
        _ source: UnsafeMutablePointer<VipsSource>, loader: String, label: String
    ) throws(VipsError) -> LibvipsHeader {
        let image = try Self.load(label) {
            vl_load_named(LibVips.table, loader, source, VIPS_ACCESS_SEQUENTIAL, failOn)
        }
        let loader = image.string("vips-loader") ?? "unknown"
        let info = ImageInfo(
            storedWidth: image.width, height: Int(libvips.vips_image_get_page_height(image.pointer)),
            format: Self.format(loader: loader, image: image), bands: image.bands, hasAlpha: image.hasAlpha,
            orientation: min(8, max(1, image.int("orientation") ?? 1)), pages: max(1, image.int("n-pages") ?? 1))
        try options.limits.check(info, label: label)
        return LibvipsHeader(image: image, info: info, loader: loader)
    }

    /// The format as the loader reports it; libvips reads AVIF and HEIC with
    /// one loader, told apart by the codec it records.
    private static func format(loader: String, image: VipsImageHandle) -> ImageFormat {
        let format = ImageFormat.fromLoader(loader)
        if format == .heif, image.string("heif-compression") == "av1" { return .avif }
        return format
    }

    /// Reopens the source with the loader's own shrink when that helps; nil when it does not.
    private func shrinkOnLoad(
        _ source: UnsafeMutablePointer<VipsSource>, header: LibvipsHeader,
        box: (width: Int, height: Int), label: String
    ) throws(VipsError) -> VipsImageHandle? {
        let (allowed, vector) = options.loaderShrink(header.info, box: box)
        switch header.info.format {
        case .jpeg:
            guard let shrink = Self.jpegShrink(allowed: allowed) else { return nil }
            return try load(source, shrink: shrink, label: label)
        case .webp where allowed > 1 && header.info.pages == 1:
            return try Self.load(label) {
                vl_load_named_scale(LibVips.table, header.loader, source, VIPS_ACCESS_SEQUENTIAL, failOn, 1 / allowed)
            }
        case .svg where vector > 1:
            // Vector: render at the output size itself rather than at the declared size.
            return try Self.load(label) {
                vl_load_named_scale(LibVips.table, header.loader, source, VIPS_ACCESS_SEQUENTIAL, failOn, 1 / vector)
            }
        default:
            return nil
        }
    }

    /// A JPEG opened with DCT-domain shrinking by 1/`shrink`.
    func load(
        _ source: UnsafeMutablePointer<VipsSource>, shrink: Int, label: String
    ) throws(VipsError) -> VipsImageHandle {
        try Self.load(label) {
            vl_load_named_shrink(
                LibVips.table, "jpegload_source", source, VIPS_ACCESS_SEQUENTIAL, failOn, Int32(shrink))
        }
    }

    /// The largest JPEG shrink-on-load factor (8, 4, 2) within `allowed`, or nil.
    static func jpegShrink(allowed: Double) -> Int? {
        [8, 4, 2].first(where: { Double($0) <= allowed })
    }

    /// The DC-only bytes of a progressive JPEG that will be decoded at 1/8
    /// (see `ProgressiveJPEGFilter`), or nil when that does not apply: quality
    /// mode, strict mode (every scan must be checked), baseline files, smaller shrinks.
    private func progressiveDCOnly(
        _ input: ImageInput, header: LibvipsHeader, box: (width: Int, height: Int)
    ) -> Data? {
        guard options.shrinkOnLoad == .fast, !options.strict, header.info.format == .jpeg,
            header.image.int("jpeg-multiscan") == 1
        else { return nil }
        guard Self.jpegShrink(allowed: options.loaderShrink(header.info, box: box).raster) == 8 else { return nil }
        switch input {
        case .data(let data):
            return data.withUnsafeBytes { ProgressiveJPEGFilter.dcOnly($0) }
        case .file(let path):
            guard let data = try? Data(contentsOf: URL(fileURLWithPath: path), options: .mappedIfSafe) else {
                return nil
            }
            return data.withUnsafeBytes { ProgressiveJPEGFilter.dcOnly($0) }
        }
    }

    /// An upscale is sized by the caller, not the file, but its output obeys
    /// the same limits: a huge box must not allocate without bound.
    private func checkUpscale(_ info: ImageInfo, box: (width: Int, height: Int), label: String) throws(VipsError) {
        let fit = min(Double(box.width) / Double(info.width), Double(box.height) / Double(info.height))
        guard fit > 1 else { return }
        func side(_ pixels: Int) -> Int { Int(min((Double(pixels) * fit).rounded(), Double(Int32.max))) }
        var output = info
        (output.width, output.height) = (side(info.width), side(info.height))
        try options.limits.check(output, label: "\(label) upscaled")
    }

    /// Runs a libvips loader; a failure is classified by libvips' wording.
    static func load(
        _ label: String, _ open: () -> UnsafeMutablePointer<VipsImage>?
    ) throws(VipsError) -> VipsImageHandle {
        _ = VipsRuntime.takeLastWarning()
        guard let loaded = open() else {
            let message = VipsRuntime.takeErrorMessage(
                default: VipsRuntime.takeLastWarning() ?? "libvips gave no reason")
            let kind = kind(forDecodeFailure: message)
            let detail: String
            if kind == .unsupportedFormat {
                detail = "\(message) (untrusted loaders are off; see VipsRuntime.setUntrustedLoadersAllowed)"
            } else {
                detail = message
            }
            throw VipsError(kind, "\(label): \(detail)")
        }
        return VipsImageHandle(loaded)
    }

    /// Converts whatever came out of the loader to 8-bit sRGB with 3 or 4 bands.
    static func normalise(_ input: VipsImageHandle, label: String) throws(VipsError) -> VipsImageHandle {
        var image = try importEmbeddedProfile(input, label: label)
        // More bands than RGBA (multispectral TIFF, CMYK+alpha already imported): keep the first four.
        if image.bands > 4 {
            image = try image.apply(.corruptData, "\(label): bands") { vl_extract_bands(LibVips.table, $0, $1, 0, 4) }
        }
        if image.interpretation != VIPS_INTERPRETATION_sRGB {
            // Handles grey, 16-bit (scaled, not clipped), LAB, CMYK without profile, ...
            let converted = try? image.apply(.corruptData, "\(label): colourspace") {
                vl_colourspace(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
            }
            if let converted {
                image = converted
            } else if image.bands <= 2 {
                // An interpretation libvips cannot convert from (MULTIBAND grey): treat as grey.
                image = try image.apply(.corruptData, "\(label): grey") {
                    vl_copy_interpretation(LibVips.table, $0, $1, VIPS_INTERPRETATION_B_W)
                }
                image = try image.apply(.corruptData, "\(label): colourspace") {
                    vl_colourspace(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
                }
            } else {
                image = try image.apply(.corruptData, "\(label): sRGB") {
                    vl_copy_interpretation(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
                }
            }
        }
        switch image.bandFormat {
        case VIPS_FORMAT_UCHAR:
            break
        case VIPS_FORMAT_USHORT, VIPS_FORMAT_UINT, VIPS_FORMAT_SHORT, VIPS_FORMAT_INT:
            image = try image.apply(.corruptData, "\(label): depth") {
                vl_cast_shift(LibVips.table, $0, $1, VIPS_FORMAT_UCHAR)
            }
        default:
            image = try image.apply(.corruptData, "\(label): depth") {
                vl_cast(LibVips.table, $0, $1, VIPS_FORMAT_UCHAR)
            }
        }
        if image.bands < 3 {
            image = try image.apply(.corruptData, "\(label): colourspace") {
                vl_colourspace(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
            }
        }
        guard image.bands == 3 || image.bands == 4, image.bandFormat == VIPS_FORMAT_UCHAR else {
            throw VipsError(.unsupportedFormat, "\(label): cannot convert \(image.bands)-band image to sRGB")
        }
        return image
    }

    /// Converts pixels described by an embedded ICC profile (RGB, grey or
    /// CMYK) that is not sRGB to sRGB with that profile, as `vips
    /// icc_transform … srgb --embedded` does; the output carries no profile,
    /// so without this a Display P3 or Adobe RGB photo would show its numbers
    /// as if they were sRGB. Images without a profile, with an sRGB one, or
    /// with one that does not fit their bands (or that Little CMS rejects)
    /// are left to the interpretation-based conversion.
    static func importEmbeddedProfile(_ image: VipsImageHandle, label: String) throws(VipsError) -> VipsImageHandle {
        guard let profile = image.withBlob("icc-profile-data", { ICCProfile($0) }) ?? nil, !profile.isSRGB else {
            return image
        }
        let colourBands = image.bands - (image.hasAlpha ? 1 : 0)
        let fits: Bool
        switch profile.colourSpace {
        case .rgb:
            fits =
                colourBands == 3 && [VIPS_INTERPRETATION_sRGB, VIPS_INTERPRETATION_RGB16].contains(image.interpretation)
        case .grey:
            fits =
                colourBands == 1 && [VIPS_INTERPRETATION_B_W, VIPS_INTERPRETATION_GREY16].contains(image.interpretation)
        case .cmyk: fits = colourBands == 4 && image.interpretation == VIPS_INTERPRETATION_CMYK
        case .other: fits = false
        }
        guard fits else { return image }
        let converted = try? image.apply(.corruptData, "\(label): ICC") {
            vl_icc_transform_embedded(LibVips.table, $0, $1, "srgb")
        }
        if converted == nil { VipsRuntime.discardErrorMessages() }
        return converted ?? image
    }

    /// Runs the pipeline of lazy operations on the calling thread, strip by
    /// strip from the top, copying each strip into the bitmap's memory block.
    ///
    /// `vips_image_write_to_memory` would hand every strip to a libvips worker
    /// thread and wait for it; VipsLoad already runs one image per thread, so
    /// that hand-off only added futex wake-ups and context switches per image.
    /// Strips keep memory bounded as the sink does: a loader is asked for a
    /// band of rows at a time, never the whole image.
    package static func materialise(
        _ image: VipsImageHandle, scale: Double, label: String
    ) throws(VipsError) -> Bitmap {
        let (width, height, bands) = (image.width, image.height, image.bands)
        let rowBytes = width * bands
        let storage = try PixelStorage.allocate(width: width, height: height, channels: bands, label: label)
        let block = storage.pointer
        guard let region = libvips.vips_region_new(image.pointer) else {
            throw VipsError(.internal, "\(label): \(VipsRuntime.takeErrorMessage(default: "cannot make a region"))")
        }
        defer { g_object_unref(region) }
        let strip = 64
        let cancellation = DecodeCancellation.active
        var top = 0
        while top < height {
            try cancellation?.check(progress: "stopped after \(top) of \(height) rows")
            let rows = min(strip, height - top)
            var rect = VipsRect(left: 0, top: Int32(top), width: Int32(width), height: Int32(rows))
            guard libvips.vips_region_prepare(region, &rect) == 0 else {
                // A cancelled decode's images are killed: the failure is the stop.
                try cancellation?.check(progress: "stopped after \(top) of \(height) rows")
                let message = VipsRuntime.takeErrorMessage(default: "decode failed")
                throw VipsError(kind(forDecodeFailure: message), "\(label): \(message)")
            }
            for row in top..<(top + rows) {
                guard let source = vl_region_addr(LibVips.table, region, 0, Int32(row)) else {
                    throw VipsError(.internal, "\(label): libvips gave no pixels for row \(row)")
                }
                (block + row * rowBytes).copyMemory(from: source, byteCount: rowBytes)
            }
            top += rows
        }
        return Bitmap(width: width, height: height, channels: bands, scale: scale, storage: storage)
    }

    /// A libvips image over a bitmap's pixels (no copy; the bitmap must outlive it).
    static func image(wrapping bitmap: Bitmap) throws(VipsError) -> VipsImageHandle {
        // A bitmap from a direct path may be the first thing this process hands libvips.
        try VipsRuntime.start()
        let raw = try VipsImageHandle.make(.internal, "wrap bitmap") {
            let image = libvips.vips_image_new_from_memory(
                bitmap.storage.pointer, bitmap.storage.count,
                Int32(bitmap.width), Int32(bitmap.height),
                Int32(bitmap.channels), VIPS_FORMAT_UCHAR)
            $0.pointee = image
            return image == nil ? -1 : 0
        }
        return try raw.apply(.internal, "wrap bitmap") {
            vl_copy_interpretation(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
        }
    }

    /// Tells truncation from other corruption by libvips' wording. A loader
    /// blocked as untrusted means the format is not enabled, not bad data.
    /// (Only the sniffed format's own loader ever runs, never libvips' fallbacks.)
    static func kind(forDecodeFailure message: String) -> VipsError.Kind {
        let lower = message.lowercased()
        if lower.contains("operation is blocked") { return .unsupportedFormat }
        // libheif refuses images over its security limit (16384² pixels by default):
        // too large, like any image over `DecodeLimits`.
        if lower.contains("security limit exceeded") || lower.contains("exceeds the maximum image size") {
            return .tooLarge
        }
        // A well-formed file using what the loader cannot read ("subsampled images not
        // supported", "unsupported sample format"): a missing feature, not damage.
        let unsupportedWords = [
            "not supported", "unsupported sample format", "unsupported bits per sample",
            "unsupported colour space", "unsupported color space", "unsupported compression"
        ]
        if unsupportedWords.contains(where: lower.contains) { return .unsupportedFeature }
        let truncationWords = [
            "truncated", "premature end", "out of data", "unexpected end", "read error", "not enough data",
            "end of file"
        ]
        return truncationWords.contains(where: lower.contains) ? .truncatedData : .corruptData
    }
}
