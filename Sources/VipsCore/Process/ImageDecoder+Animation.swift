import CVipsShim
import Foundation

extension ImageDecoder {
    /// Decodes every frame of an animated GIF or WebP, each brought to fit
    /// `size` (points × `scale`) with the same geometry, never enlarged.
    /// Other formats, and still images, give a one-frame animation.
    ///
    /// The limits apply to all frames together: the frames' pixels added up
    /// must stay within `limits.maxPixelCount`, and their number within `limits.maxPages`.
    ///
    /// - Throws: `.tooLarge` when the frames together break a limit, and the decode's errors.
    public func decodeAnimation(
        _ input: ImageInput, size: TargetSize = .original, scale: Double = 1
    ) throws(VipsError) -> AnimatedBitmap {
        try VipsRuntime.start()
        guard size.isValid, scale > 0, scale.isFinite else {
            throw VipsError(.invalidArgument, "target size \(size) at scale \(scale) is not a valid size")
        }
        // The header is read once: a still image decodes from it as `decode` would, lenient flag included.
        _ = VipsRuntime.takeLastWarning()
        let result = try withImage(input) { image throws(VipsError) -> AnimatedBitmap in
            guard case .libvips(_, let source) = image, image.info.pages > 1,
                image.info.format == .gif || image.info.format == .webp,
                let loader = image.info.format.libvipsLoader
            else {
                let still = try decodeNotingDamage(
                    image, input: input, size: size, mode: .fit, scale: scale, allowUpscale: false)
                return try AnimatedBitmap(frames: [still], delays: [0])
            }
            return try decodeFrames(
                source, loader: loader, header: image.info, label: name(of: input), size: size, scale: scale)
        }
        VipsRuntime.discardErrorMessages()
        return result
    }

    /// Every page of an animation whose header `header` was probed from `source`, each fitted into `size`.
    private func decodeFrames(
        _ source: UnsafeMutablePointer<VipsSource>, loader: String, header: ImageInfo, label: String,
        size: TargetSize, scale: Double
    ) throws(VipsError) -> AnimatedBitmap {
        let (total, overflow) = header.width.multipliedReportingOverflow(by: header.height)
        let (all, overflowAll) = total.multipliedReportingOverflow(by: header.pages)
        guard !overflow, !overflowAll, all <= options.limits.maxPixelCount else {
            throw VipsError(
                .tooLarge,
                "\(label): \(header.pages) frames of \(header.width)×\(header.height) px exceed the limit of \(options.limits.maxPixelCount) pixels together"
            )
        }
        let box =
            size.pixelBox(scale: scale).map { (min($0.width, header.width), min($0.height, header.height)) }
            ?? (header.width, header.height)
        let failOn = options.strict ? VIPS_FAIL_ON_ERROR : VIPS_FAIL_ON_NONE
        // The probed source is read again, all pages this time.
        let image = try Self.load(label) {
            vl_load_named_all_pages(LibVips.table, loader, source, VIPS_ACCESS_SEQUENTIAL, failOn)
        }
        let delays = image.intArray("delay")
        let loop = max(0, image.int("loop") ?? 0)
        // vips_thumbnail sizes each page (page-height) into the box: every frame gets the same size.
        let sized = try image.apply(.corruptData, "\(label): resize") {
            vl_thumbnail_image(LibVips.table, $0, $1, Int32(box.0), Int32(box.1), VIPS_SIZE_DOWN, 1)
        }
        let pageHeight = Int(libvips.vips_image_get_page_height(sized.pointer))
        let tall = try Self.materialise(try Self.normalise(sized, label: label), scale: scale, label: label)
        let count = pageHeight > 0 ? tall.height / pageHeight : 0
        guard count == header.pages, count * pageHeight == tall.height else {
            throw VipsError(
                .corruptData,
                "\(label): frames came out \(tall.height) rows high, not \(header.pages) × \(pageHeight)")
        }
        let frameBytes = tall.bytesPerRow * pageHeight
        var frames: [Bitmap] = []
        for index in 0..<count {
            let frame = try tall.withUnsafeBytes { bytes throws(VipsError) -> Bitmap in
                try Bitmap(
                    width: tall.width, height: pageHeight, channels: tall.channels, scale: scale,
                    pixels: UnsafeRawBufferPointer(rebasing: bytes[index * frameBytes..<(index + 1) * frameBytes]))
            }
            frames.append(frame.withSource(BitmapSource(info: header, decodedLeniently: false)))
        }
        let timing = (0..<count).map { $0 < delays.count ? max(0, delays[$0]) : 100 }
        return try AnimatedBitmap(frames: frames, delays: timing, loopCount: loop)
    }
}

extension ImageDecoder {
    /// The frame delays (milliseconds) and loop count (0 = forever) of an
    /// animated GIF or WebP, from its header (no pixels decoded); nil for
    /// other formats and still images.
    public func animationTiming(_ input: ImageInput) throws(VipsError) -> (delays: [Int], loopCount: Int)? {
        // The loaders put the delays and the loop count in the header: the probe that read it has them.
        let timing = try withImage(input) { image -> (delays: [Int], loopCount: Int)? in
            guard case .libvips(let header, _) = image, header.info.pages > 1,
                header.info.format == .gif || header.info.format == .webp
            else { return nil }
            let delays = header.image.intArray("delay")
            return (
                (0..<header.info.pages).map { $0 < delays.count ? max(0, delays[$0]) : 100 },
                max(0, header.image.int("loop") ?? 0)
            )
        }
        VipsRuntime.discardErrorMessages()
        return timing
    }
}

extension ImageEncoder {
    /// Encodes an animation as animated GIF or WebP (`format` `.gif` or
    /// `.webp`), with its delays and loop count; metadata is not written.
    ///
    /// - Throws: `.invalidArgument` for another format, `.encodeFailed` when libvips cannot write it.
    public func encode(_ animation: AnimatedBitmap, as format: OutputFormat) throws(VipsError) -> EncodedImage {
        try VipsRuntime.start()
        try format.validate()
        switch format {
        case .gif, .webp: break
        default: throw VipsError(.invalidArgument, "animations are encoded as gif or webp, not \(format)")
        }
        // The frames stacked top to bottom, as libvips holds an animation.
        var pixels = [UInt8]()
        pixels.reserveCapacity(animation.frames.reduce(0) { $0 + $1.cost })
        for frame in animation.frames { frame.withUnsafeBytes { pixels.append(contentsOf: $0) } }
        let tall = try Bitmap(
            width: animation.width, height: animation.height * animation.frameCount,
            channels: animation.frames[0].channels, pixels: pixels)
        let wrapped = try ImageDecoder.image(wrapping: tall)
        let image = try wrapped.apply(.encodeFailed, "encode \(format): animation") {
            vl_copy_interpretation(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
        }
        libvips.vips_image_set_int(image.pointer, "page-height", Int32(animation.height))
        libvips.vips_image_set_int(image.pointer, "n-pages", Int32(animation.frameCount))
        libvips.vips_image_set_int(image.pointer, "loop", Int32(clamping: animation.loopCount))
        var delays = animation.delays.map { Int32(clamping: $0) }
        delays.withUnsafeMutableBufferPointer {
            libvips.vips_image_set_array_int(image.pointer, "delay", $0.baseAddress, Int32($0.count))
        }
        var buffer: UnsafeMutableRawPointer? = nil
        var length = 0
        let status: Int32 = withExtendedLifetime(tall) {
            switch format {
            case .webp(let quality, let lossless, let effort):
                return vl_webpsave_options(
                    LibVips.table,
                    image.pointer, &buffer, &length, Int32(quality), lossless ? 1 : 0, Int32(effort), 1)
            default:
                return vl_gifsave_options(LibVips.table, image.pointer, &buffer, &length, 1)
            }
        }
        guard status == 0, let buffer else {
            throw VipsError(
                .encodeFailed, "encode animated \(format): \(VipsRuntime.takeErrorMessage(default: "no reason given"))")
        }
        let data = Data(bytesNoCopy: buffer, count: length, deallocator: .custom { pointer, _ in g_free(pointer) })
        return EncodedImage(data: data, format: format, width: animation.width, height: animation.height)
    }
}

extension VipsImageHandle {
    /// An int-array field ("delay"), empty when absent.
    func intArray(_ name: String) -> [Int] {
        guard libvips.vips_image_get_typeof(pointer, name) != 0 else { return [] }
        var values: UnsafeMutablePointer<Int32>? = nil
        var count: Int32 = 0
        guard libvips.vips_image_get_array_int(pointer, name, &values, &count) == 0, let values else {
            _ = VipsRuntime.takeErrorMessage(default: "")
            return []
        }
        return (0..<Int(count)).map { Int(values[$0]) }
    }
}
