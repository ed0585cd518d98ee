import VipsLoad

/// A processing URL turned into work: the `ImageRequest` the pipeline serves,
/// and the `OutputPlan` its result is encoded by.
///
/// The request follows imgproxy's pipeline (crop, scale, rotate, result crop,
/// blur and sharpen, extend, padding, flatten) with the pipeline's
/// primitives. Most URLs decode straight to their size (shrink-on-load, the
/// fill crop and smart crop done by the decoder) and finish with processors
/// for what the decoder does not do. URLs that need the image before its
/// geometry can be chosen (a `crop`, `rt:auto` with both sides, a `fill` at a
/// focus point or with offsets) are decoded at full size and scaled after:
/// `decodesFullSize` tells which (slower, and without enlarging).
public struct ProcessingRequest: Sendable {
    /// What the pipeline loads, decodes and processes.
    public let imageRequest: ImageRequest
    /// How the result is encoded.
    public let output: OutputPlan
    /// The parsed URL.
    public let url: ProcessingURL
    /// Whether the request decodes the image at full size (see the type's documentation).
    public let decodesFullSize: Bool

    /// The URL's options.
    public var options: ProcessingOptions { url.options }
    /// Whether the URL's signature was checked.
    public var isSigned: Bool { url.isSigned }
    /// The variant's identity, for cache keys and ETags with the source's:
    /// the canonical options (format included), the same for every spelling of them.
    public var variantKey: String { url.options.canonicalSegments.joined(separator: "/") }

    /// The request for `url` reading `source`.
    ///
    /// - Throws: `.invalidOption` (400) for sizes over `limits`,
    ///   `.unsupportedOption` (400) for combinations the pipeline cannot do.
    init(url: ProcessingURL, source: ImageSource, limits: ProcessingURLParser.Limits) throws(ProcessingURLError) {
        let options = url.options
        try Self.check(options, limits: limits)
        self.url = url
        output = OutputPlan(options)
        let bothSides = options.width > 0 && options.height > 0
        let filling = [.fill, .fillDown, .auto].contains(options.resizingType) && bothSides
        decodesFullSize =
            options.hasCrop || (options.resizingType == .auto && bothSides) || (filling && options.gravity.isOffset)
        if decodesFullSize {
            if options.hasCrop, (options.cropGravity ?? options.gravity).kind == .smart {
                throw ProcessingURLError(.unsupportedOption, "crop: smart gravity is not supported with a crop")
            }
            if filling, options.gravity.kind == .smart {
                throw ProcessingURLError(
                    .unsupportedOption, "gravity: smart gravity is not supported with a crop or rt:auto")
            }
            if options.hasCrop, options.resizingType == .force, options.width > 0 || options.height > 0 {
                throw ProcessingURLError(.unsupportedOption, "crop: resizing type force is not supported with a crop")
            }
        }
        var request = ImageRequest(source: source, scale: options.dpr)
        var processors: [any ImageProcessing] = []
        if options.rotate != 0, let angle = ImageProcessors.Rotate.Angle(rawValue: options.rotate) {
            processors.append(ImageProcessors.Rotate(angle))
        }
        if decodesFullSize {
            processors.append(ProcessingSteps.FullSizeResize(options: options))
            processors.append(ProcessingSteps.ResultCrop(options: options))
        } else {
            let (size, mode, upscales) = Self.decodeGeometry(options)
            request.size = size
            request.mode = mode
            if upscales { request.options.insert(.allowUpscale) }
            // The decoder's fill crops to the box clamped to the image; imgproxy's differs for
            // fill-down, and when a small image lowers the dpr.
            if filling, options.resizingType == .fillDown || (options.dpr != 1 && !options.enlarge) {
                processors.append(ProcessingSteps.ResultCrop(options: options))
            }
        }
        if options.blur > 0 { processors.append(ImageProcessors.GaussianBlur(sigma: options.blur)) }
        if options.sharpen > 0 { processors.append(ImageProcessors.Sharpen(sigma: options.sharpen)) }
        if options.extend {
            processors.append(ProcessingSteps.Extend(options: options, limit: limits.maxResultDimension))
        }
        if !options.padding.isZero {
            processors.append(ProcessingSteps.Padding(options: options, limit: limits.maxResultDimension))
        }
        if let background = options.background { processors.append(ProcessingSteps.Flatten(background: background)) }
        request.processors = processors
        if output.keepsMetadata { request.options.insert(.keepMetadata) }
        // The strong ETag names the bytes: never a downscale of whatever larger bitmap is cached.
        request.options.insert(.disableResizingFromLargerCachedImages)
        imageRequest = request
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
        let padding = options.padding
        for value in [padding.top, padding.right, padding.bottom, padding.left]
        where Double(value) * options.dpr > limit {
            throw ProcessingURLError(
                .invalidOption,
                "padding: \(value) at dpr \(options.dpr) is over the \(limits.maxResultDimension)-pixel limit")
        }
    }

    /// The decode's size and mode for the URLs decoded straight to size, in the
    /// orientation before the rotation (a quarter turn swaps the box and turns
    /// the gravity), and whether it may enlarge.
    static func decodeGeometry(_ options: ProcessingOptions) -> (TargetSize, ResizeMode, Bool) {
        let turned = options.rotate % 180 == 90
        let width = turned ? options.height : options.width
        let height = turned ? options.width : options.height
        if width == 0 && height == 0 { return (.original, .fit, false) }
        switch options.resizingType {
        case .force:
            guard width > 0, height > 0 else {
                // A side of 0 keeps the image's own: an unbounded box side, clamped to the image
                // (never enlarged: the unbounded side would be).
                let unbounded = TargetSize.unboundedSide
                return (
                    .fit(width: width > 0 ? width : unbounded, height: height > 0 ? height : unbounded), .stretch, false
                )
            }
            return (.fit(width: width, height: height), .stretch, options.enlarge)
        case .fill, .fillDown, .auto:
            if width > 0, height > 0 {
                return (.fit(width: width, height: height), .fill(decoderGravity(options)), options.enlarge)
            }
        case .fit:
            break
        }
        if width > 0, height > 0 { return (.fit(width: width, height: height), .fit, options.enlarge) }
        return (width > 0 ? .width(width) : .height(height), .fit, options.enlarge)
    }

    /// The gravity the decoder crops a fill at: the URL's, turned back by the rotation that follows.
    static func decoderGravity(_ options: ProcessingOptions) -> Gravity {
        typealias Kind = ProcessingOptions.Gravity.Kind
        var kind = options.gravity.kind
        // imgproxy's rotation map: where each final position lies before a clockwise turn.
        let turns: [Int: [Kind: Kind]] = [
            90: [
                .north: .west, .east: .north, .south: .east, .west: .south, .northWest: .southWest,
                .northEast: .northWest, .southWest: .southEast, .southEast: .northEast
            ],
            180: [
                .north: .south, .east: .west, .south: .north, .west: .east, .northWest: .southEast,
                .northEast: .southWest, .southWest: .northEast, .southEast: .northWest
            ],
            270: [
                .north: .east, .east: .south, .south: .west, .west: .north, .northWest: .northEast,
                .northEast: .southEast, .southWest: .northWest, .southEast: .southWest
            ]
        ]
        kind = turns[options.rotate]?[kind] ?? kind
        switch kind {
        case .centre, .focusPoint: return .centre
        case .north: return .north
        case .south: return .south
        case .east: return .east
        case .west: return .west
        case .northEast: return .northEast
        case .northWest: return .northWest
        case .southEast: return .southEast
        case .southWest: return .southWest
        case .smart: return .attention
        }
    }
}
