import Foundation
import VipsLoad

/// A processing URL turned into work: the `ImageRequest` the pipeline serves,
/// and the `OutputPlan` its result is encoded by.
///
/// The request follows imgproxy's pipeline (trim, crop, scale, rotate and
/// flip, result crop, blur, sharpen and pixelate, extend, extend to the aspect
/// ratio, padding, flatten). Its geometry (`ImgproxyPlan`)
/// is decided from the source's header before any pixel is decoded, with
/// imgproxy's arithmetic: the decode shrinks on load as far as the output
/// allows, cuts the crop at the shrunk scale and resizes to imgproxy's exact
/// size, for every URL (`rt:auto`, crops, focus points, offsets and smart
/// gravity included). Processors finish what follows the resize.
public struct ProcessingRequest: Sendable {
    /// What the pipeline loads, decodes and processes.
    public let imageRequest: ImageRequest
    /// How the result is encoded.
    public let output: OutputPlan
    /// The parsed URL.
    public let url: ProcessingURL
    /// The limits the source must keep (422 otherwise): the server's, with
    /// the URL's security options in their place.
    public internal(set) var securityLimits = SecurityLimits()

    /// The URL's options.
    public var options: ProcessingOptions { url.options }
    /// Whether the URL's signature was checked.
    public var isSigned: Bool { url.isSigned }
    /// The variant's identity, for cache keys and ETags with the source's:
    /// the canonical options (format included), the same for every spelling of
    /// them; and, when a watermark is drawn, the watermark's `identity`.
    public var variantKey: String {
        url.options.canonicalSegments.joined(separator: "/") + (watermarkIdentity.map { "/wm-image:\($0)" } ?? "")
    }
    /// The identity of the watermark drawn on the result, nil when none is.
    let watermarkIdentity: String?

    /// The request for `url` reading `source`, whose download follows only
    /// the redirects `allowsRedirect` allows (`ImageRequest.allowsRedirect`),
    /// drawing `watermark` when the URL's `wm` asks for it.
    ///
    /// - Throws: `.invalidOption` (404) for sizes over `limits`.
    init(
        url: ProcessingURL, source: ImageSource, limits: ProcessingURLParser.Limits,
        allowsRedirect: (@Sendable (URL) -> Bool)? = nil, watermark: WatermarkImage? = nil
    ) throws(ProcessingURLError) {
        let options = url.options
        try Self.check(options, limits: limits)
        self.url = url
        output = OutputPlan(options)
        var request = ImageRequest(source: source, scale: options.dpr)
        request.allowsRedirect = allowsRedirect
        request.geometry = ImgproxyPlan(options: options)
        var processors: [any ImageProcessing] = []
        if options.trims { processors.append(ProcessingSteps.Trim(options: options)) }
        if options.rotate != 0 || options.flipHorizontal || options.flipVertical || !options.autoRotate {
            processors.append(ProcessingSteps.Orient(options: options))
        }
        if Self.cropsResult(options) { processors.append(ProcessingSteps.ResultCrop(options: options)) }
        if options.blur > 0 { processors.append(ImageProcessors.GaussianBlur(sigma: options.blur)) }
        if options.sharpen > 0 { processors.append(ImageProcessors.Sharpen(sigma: options.sharpen)) }
        if options.pixelate > 1 { processors.append(ImageProcessors.Pixelate(size: options.pixelate)) }
        if options.extend {
            processors.append(ProcessingSteps.Extend(options: options, limit: limits.maxResultDimension))
        }
        if options.extendAspectRatio {
            processors.append(ProcessingSteps.ExtendAspectRatio(options: options, limit: limits.maxResultDimension))
        }
        if !options.padding.isZero {
            processors.append(ProcessingSteps.Padding(options: options, limit: limits.maxResultDimension))
        }
        if let background = options.background { processors.append(ProcessingSteps.Flatten(background: background)) }
        // imgproxy's last step: the watermark, over the finished result.
        let drawn = options.watermark.opacity > 0 ? watermark : nil
        if let drawn {
            processors.append(
                ProcessingSteps.Watermark(options: options, image: drawn, limit: limits.maxResultDimension))
        }
        watermarkIdentity = drawn?.identity
        request.processors = processors
        if output.keepsMetadata { request.options.insert(.keepMetadata) }
        // The strong ETag names the bytes: never a downscale of whatever larger bitmap is cached.
        request.options.insert(.disableResizingFromLargerCachedImages)
        imageRequest = request
    }

    /// Whether the scaled image may be cropped to the result (fill's crop to
    /// the box, fill-down's to its aspect ratio) at a compass or focus-point
    /// gravity, after the rotation: with both sides, by a type that crops
    /// (`auto` may), or by any type with a side and min-width or min-height.
    /// A smart result crop is the decode's.
    static func cropsResult(_ options: ProcessingOptions) -> Bool {
        guard options.gravity.kind != .smart else { return false }
        // min-width and min-height may scale any type past the box, which is then cropped to it.
        if options.minWidth > 0 || options.minHeight > 0 { return options.width > 0 || options.height > 0 }
        return options.width > 0 && options.height > 0 && [.fill, .fillDown, .auto].contains(options.resizingType)
    }

    /// Sizes over the limits.
    private static func check(
        _ options: ProcessingOptions, limits: ProcessingURLParser.Limits
    ) throws(ProcessingURLError) {
        guard options.dpr <= limits.maxDPR else {
            throw ProcessingURLError(.invalidOption, "dpr: \(options.dpr) is over \(limits.maxDPR)")
        }
        let limit = Double(limits.maxResultDimension)
        for (name, value) in [("width", options.width), ("height", options.height)]
        where Double(value) * options.dpr > limit {
            throw ProcessingURLError(
                .invalidOption,
                "\(name): \(value) at dpr \(options.dpr) is over the \(limits.maxResultDimension)-pixel limit")
        }
        for (name, value) in [("min-width", options.minWidth), ("min-height", options.minHeight)]
        where Double(value) * options.dpr > limit {
            throw ProcessingURLError(
                .invalidOption,
                "\(name): \(value) at dpr \(options.dpr) is over the \(limits.maxResultDimension)-pixel limit")
        }
        for (name, value, zoom) in [
            ("width", options.width, options.zoomWidth), ("height", options.height, options.zoomHeight)
        ]
        where Double(value) * options.dpr * zoom > limit {
            throw ProcessingURLError(
                .invalidOption,
                "zoom: the \(name) \(value) zoomed \(zoom) times at dpr \(options.dpr) is over the "
                    + "\(limits.maxResultDimension)-pixel limit")
        }
        let padding = options.padding
        for value in [padding.top, padding.right, padding.bottom, padding.left]
        where Double(value) * options.dpr > limit {
            throw ProcessingURLError(
                .invalidOption,
                "padding: \(value) at dpr \(options.dpr) is over the \(limits.maxResultDimension)-pixel limit")
        }
    }
}
