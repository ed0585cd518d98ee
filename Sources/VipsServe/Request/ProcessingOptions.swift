import VipsCore

/// imgproxy's processing options as a URL leaves them: each property is the
/// state its options set, a later option overriding an earlier one as in
/// imgproxy (`w:100/w:200` is 200 wide). Every property's default is imgproxy's.
///
/// `canonicalSegments` writes the state back as options that parse to the same
/// state, in one fixed order with defaults left out: the identity of the
/// variant in cache keys and ETags.
public struct ProcessingOptions: Sendable, Hashable {
    /// How the image is brought to `width` × `height` (imgproxy's `resizing_type`).
    public enum ResizingType: String, Sendable, Hashable, CaseIterable {
        /// Inside the box, keeping the aspect ratio.
        case fit
        /// Cover the box, keeping the aspect ratio, and crop what projects.
        case fill
        /// As `fill`, but an image too small to cover the box is cropped to the box's aspect ratio.
        case fillDown = "fill-down"
        /// Exactly the box, ignoring the aspect ratio.
        case force
        /// `fill` when the image and the box have the same orientation, `fit` otherwise.
        case auto
    }

    /// A gravity option: a type and its offsets (imgproxy's `%type:%x_offset:%y_offset`).
    public struct Gravity: Sendable, Hashable {
        /// imgproxy's gravity types, by their URL names.
        public enum Kind: String, Sendable, Hashable, CaseIterable {
            /// `ce`, `no`, `so`, `ea`, `we`: the centre or an edge.
            case centre = "ce", north = "no", south = "so", east = "ea", west = "we"
            /// `noea`, `nowe`, `soea`, `sowe`: a corner.
            case northEast = "noea", northWest = "nowe", southEast = "soea", southWest = "sowe"
            /// `sm`: smart gravity (libvips' attention strategy). No offsets.
            case smart = "sm"
            /// `fp`: a focus point; `x` and `y` (0–1) are where the result's centre lies.
            case focusPoint = "fp"
        }

        /// The gravity type.
        public var kind: Kind
        /// The x offset: pixels (scaled by the dpr) when at least 1 in magnitude,
        /// a fraction of the width below that; for `fp`, the focus point's x (0–1).
        public var x: Double
        /// The y offset, as `x`.
        public var y: Double

        /// A gravity of `kind` with offsets `x`, `y`.
        public init(_ kind: Kind, x: Double = 0, y: Double = 0) {
            self.kind = kind
            self.x = x
            self.y = y
        }

        /// `ce:0:0`, imgproxy's default.
        public static let centre = Gravity(.centre)

        /// Whether offsets move the position (a focus point, or a non-zero offset).
        var isOffset: Bool { kind == .focusPoint || x != 0 || y != 0 }

        /// The option arguments that set this state again: `sm`, or `kind:x:y`.
        var arguments: String {
            kind == .smart ? "sm" : "\(kind.rawValue):\(Self.text(x)):\(Self.text(y))"
        }

        /// A number as the parser reads it back exactly (shortest round-trip form).
        static func text(_ value: Double) -> String { "\(value)" }
    }

    /// Padding on each side, in points (scaled by the dpr).
    public struct Padding: Sendable, Hashable {
        /// Padding at the top, in points.
        public var top = 0
        /// Padding at the right, in points.
        public var right = 0
        /// Padding at the bottom, in points.
        public var bottom = 0
        /// Padding at the left, in points.
        public var left = 0

        /// No padding.
        public init() {}

        /// Whether every side is 0.
        public var isZero: Bool { top == 0 && right == 0 && bottom == 0 && left == 0 }
    }

    /// The output formats this server encodes, by their imgproxy names.
    public enum Format: String, Sendable, Hashable, CaseIterable {
        /// JPEG (`jpg`, also spelt `jpeg`).
        case jpeg = "jpg"
        /// PNG.
        case png
        /// WebP.
        case webp
        /// AVIF.
        case avif
        /// GIF.
        case gif
        /// JPEG XL (libjxl, at imgproxy's effort 4).
        case jxl
        /// HEIC (HEIF with HEVC).
        case heic
        /// TIFF (uncompressed).
        case tiff
        /// BMP (uncompressed).
        case bmp
        /// ICO (one PNG; results up to 256×256).
        case ico

        /// The format's encoder settings, with `quality` (1–100) where the format has one.
        public func outputFormat(quality: Int?) -> OutputFormat {
            switch self {
            case .jpeg: return quality.map { .jpeg(quality: $0) } ?? .jpeg()
            case .png: return .png()
            case .webp: return quality.map { .webp(quality: $0) } ?? .webp()
            case .avif: return quality.map { .avif(quality: $0) } ?? .avif()
            case .gif: return .gif
            // imgproxy's IMGPROXY_JXL_EFFORT default.
            case .jxl: return .jxl(quality: quality ?? 75, effort: 4)
            case .heic: return quality.map { .heic(quality: $0) } ?? .heic()
            case .tiff: return quality.map { .tiff(quality: $0) } ?? .tiff()
            case .bmp: return .bmp
            case .ico: return .ico
            }
        }

        /// Whether the format has a quality setting (imgproxy's `SupportsQuality`:
        /// `quality`, `format_quality` and `max_bytes` apply).
        public var hasQuality: Bool { [.jpeg, .webp, .avif, .jxl, .heic, .tiff].contains(self) }

        /// Whether the format stores transparency (all but JPEG).
        public var supportsAlpha: Bool { self != .jpeg }

        /// The output format a source of `format` is written in when it is kept; nil when this server
        /// cannot write it (SVG, PDF...).
        public init?(source format: ImageFormat) {
            switch format {
            case .jpeg: self = .jpeg
            case .png: self = .png
            case .webp: self = .webp
            case .avif: self = .avif
            case .gif: self = .gif
            case .jxl: self = .jxl
            case .heif: self = .heic
            case .tiff: self = .tiff
            case .bmp: self = .bmp
            case .ico: self = .ico
            default: return nil
            }
        }
    }

    /// imgproxy's `watermark` option: how the server's configured watermark
    /// image (`ProcessingURLParser.watermark`) is drawn on the result.
    public struct Watermark: Sendable, Hashable {
        /// Where the watermark sits: a compass position, or `re`, tiled over the whole result.
        public enum Position: String, Sendable, Hashable, CaseIterable {
            /// `ce`, `no`, `so`, `ea`, `we`: the centre or an edge.
            case centre = "ce", north = "no", south = "so", east = "ea", west = "we"
            /// `noea`, `nowe`, `soea`, `sowe`: a corner.
            case northEast = "noea", northWest = "nowe", southEast = "soea", southWest = "sowe"
            /// `re`: repeated across and down the result, the pattern centred; the
            /// offsets are the spacing between copies.
            case replicate = "re"
        }

        /// 0–1, multiplied by the configured opacity; 0 (the default) draws nothing.
        public var opacity = 0.0
        /// Where it sits. Default `ce`.
        public var position = Position.centre
        /// The x offset from the position's edge: pixels (scaled by the dpr) when
        /// at least 1 in magnitude, a fraction of the result's width below that.
        /// For `re`, the horizontal space between copies.
        public var x = 0.0
        /// The y offset, as `x`.
        public var y = 0.0
        /// The watermark's size as a fraction of the result's (it fits, keeping
        /// its aspect ratio, in the result's size times `scale`); 0 (the
        /// default) keeps the watermark's own size.
        public var scale = 0.0

        /// No watermark: imgproxy's default.
        public init() {}

        /// The option arguments that set this state again: `opacity:position:x:y[:scale]`.
        var arguments: String {
            let texts = [Gravity.text(opacity), position.rawValue, Gravity.text(x), Gravity.text(y)]
            return (texts + (scale != 0 ? [Gravity.text(scale)] : [])).joined(separator: ":")
        }
    }

    /// `resizing_type`. Default `.fit`.
    public var resizingType = ResizingType.fit
    /// `width` in points; 0 (the default) follows from the height and the aspect ratio.
    public var width = 0
    /// `height` in points; 0 (the default) follows from the width.
    public var height = 0
    /// `enlarge`: whether an image smaller than the box is scaled up. Default false.
    public var enlarge = false
    /// `extend`: whether a result smaller than the box is padded to it. Default false.
    public var extend = false
    /// Where the image sits when extended. Default `ce`.
    public var extendGravity = Gravity.centre
    /// `gravity`: what part is kept when cropping. Default `ce`.
    public var gravity = Gravity.centre
    /// `crop` width: pixels when at least 1, a fraction of the image below that, 0 for all of it.
    public var cropWidth = 0.0
    /// `crop` height, as `cropWidth`.
    public var cropHeight = 0.0
    /// The crop's own gravity; nil (the default) uses `gravity`.
    public var cropGravity: Gravity?
    /// `padding`. Default none.
    public var padding = Padding()
    /// `background`: the colour that fills extended and padded areas and that
    /// transparency is flattened onto; nil (the default) keeps transparency.
    public var background: Colour?
    /// `quality` 1–100; 0 (the default) is the format's default.
    public var quality = 0
    /// `format` (or the URL's extension); nil (the default) leaves the choice to
    /// the server (from `Accept` and the source's format).
    public var format: Format?
    /// `blur` sigma; 0 (the default) is none.
    public var blur = 0.0
    /// `sharpen` sigma; 0 (the default) is none.
    public var sharpen = 0.0
    /// `rotate`, clockwise: 0, 90, 180 or 270. Default 0.
    public var rotate = 0
    /// `strip_metadata`. Default true, as imgproxy's `IMGPROXY_STRIP_METADATA`.
    public var stripMetadata = true
    /// `dpr`: pixels per point. Default 1.
    public var dpr = 1.0
    /// `cachebuster`: changes the URL, nothing else. Default none.
    public var cacheBuster: String?
    /// `skip_processing` (`skp`): source formats answered with the source's
    /// own bytes, unprocessed, when the output format is not set or is that
    /// format. Default none.
    public var skipProcessing: Set<ImageFormat> = []
    /// `raw`: the source's bytes as they are, with no processing and no
    /// checks of it (the loader's own limits still apply). Default false.
    public var raw = false
    /// `expires` (`exp`): a Unix time after which the URL is refused (404),
    /// and which bounds the answer's `max-age`; nil or 0 (the default) for none.
    public var expires: Int?
    /// `filename` (`fn`): the name in `Content-Disposition`, without its
    /// extension (the output format's is added); nil (the default) takes the
    /// source URL's last path component.
    public var filename: String?
    /// `return_attachment` (`att`): `Content-Disposition: attachment` rather
    /// than `inline`. Default false.
    public var returnAttachment = false
    /// `format_quality` (`fq:%format1:%quality1:…`): the quality per output
    /// format, used when `quality` is 0. Default none (the server's).
    public var formatQuality: [Format: Int] = [:]
    /// `max_bytes`: when positive, the quality of a format that has one is
    /// lowered until the result fits in this many bytes (down to 10 at the
    /// lowest, imgproxy's algorithm). Default 0: no limit.
    public var maxBytes = 0
    /// `strip_color_profile`; nil (the default) is the server's
    /// (`ImageServer.OutputSettings.stripColorProfile`).
    public var stripColorProfile: Bool?
    /// `keep_copyright`; nil (the default) is the server's.
    public var keepCopyright: Bool?
    /// `preserve_hdr`; nil (the default) is the server's.
    public var preserveHDR: Bool?
    /// The security options (`msr`, `msfs`, `maf`, `mafr`), each nil (the
    /// default) when the URL leaves the server's value.
    public var security = SecurityLimits()
    /// `watermark` (`wm`). Default none (opacity 0).
    public var watermark = Watermark()
    /// `min-width` in points: the result is at least this wide, enlarging if
    /// need be (the height follows the aspect ratio); 0 (the default) is none.
    public var minWidth = 0
    /// `min-height` in points, as `minWidth`. Default 0.
    public var minHeight = 0
    /// `zoom`'s horizontal factor: the box and the scale are multiplied by it. Default 1.
    public var zoomWidth = 1.0
    /// `zoom`'s vertical factor. Default 1.
    public var zoomHeight = 1.0
    /// `extend_aspect_ratio`: whether the result is padded to the box's aspect
    /// ratio (without growing past its own size). Default false.
    public var extendAspectRatio = false
    /// Where the image sits when extended to the aspect ratio. Default `ce`.
    public var extendAspectRatioGravity = Gravity.centre
    /// `trim`'s threshold; nil (the default) does not trim.
    public var trimThreshold: Double?
    /// `trim`'s background colour; nil (the default) takes the top-left pixel's.
    public var trimColour: Colour?
    /// `trim`'s `equal_hor`: as much cut from the left as from the right. Default false.
    public var trimEqualHorizontal = false
    /// `trim`'s `equal_ver`: as much cut from the top as from the bottom. Default false.
    public var trimEqualVertical = false
    /// `flip`'s horizontal flip (a mirror, left to right), after the rotation. Default false.
    public var flipHorizontal = false
    /// `flip`'s vertical flip (top to bottom), after the rotation. Default false.
    public var flipVertical = false
    /// `pixelate`: the size of the blocks, in pixels; 0 or 1 (the default) is none.
    public var pixelate = 1
    /// `auto_rotate`: whether the EXIF orientation is applied. Default true,
    /// as imgproxy's `IMGPROXY_AUTO_ROTATE`; false keeps the stored orientation.
    public var autoRotate = true

    /// Every option at imgproxy's default.
    public init() {}

    /// Whether a crop (imgproxy's crop before resize) is set.
    public var hasCrop: Bool { cropWidth > 0 || cropHeight > 0 }

    /// The options that rebuild this state when parsed, in a fixed order, each
    /// left out when at its default: `["rt:fill", "w:300", "h:200", "g:sm"]`.
    public var canonicalSegments: [String] {
        var segments: [String] = []
        if resizingType != .fit { segments.append("rt:\(resizingType.rawValue)") }
        if width != 0 { segments.append("w:\(width)") }
        if height != 0 { segments.append("h:\(height)") }
        if enlarge { segments.append("el:1") }
        if extend || extendGravity != .centre { segments.append("ex:\(extend ? 1 : 0):\(extendGravity.arguments)") }
        if gravity != .centre { segments.append("g:\(gravity.arguments)") }
        if cropWidth != 0 || cropHeight != 0 || cropGravity != nil {
            segments.append(
                "c:\(Gravity.text(cropWidth)):\(Gravity.text(cropHeight))"
                    + (cropGravity.map { ":" + $0.arguments } ?? ""))
        }
        if !padding.isZero { segments.append("pd:\(padding.top):\(padding.right):\(padding.bottom):\(padding.left)") }
        if let background {
            segments.append(
                "bg:"
                    + [background.red, background.green, background.blue].map {
                        ($0 < 16 ? "0" : "") + String($0, radix: 16)
                    }.joined())
        }
        if quality != 0 { segments.append("q:\(quality)") }
        if let format { segments.append("f:\(format.rawValue)") }
        if blur != 0 { segments.append("bl:\(Gravity.text(blur))") }
        if sharpen != 0 { segments.append("sh:\(Gravity.text(sharpen))") }
        if rotate != 0 { segments.append("rot:\(rotate)") }
        if !stripMetadata { segments.append("sm:0") }
        if dpr != 1 { segments.append("dpr:\(Gravity.text(dpr))") }
        if watermark != Watermark() { segments.append("wm:\(watermark.arguments)") }
        segments += geometryOptionSegments
        if let cacheBuster { segments.append("cb:\(cacheBuster)") }
        if !skipProcessing.isEmpty {
            segments.append(
                "skp:" + skipProcessing.map(ProcessingOptions.skipProcessingName).sorted().joined(separator: ":"))
        }
        if raw { segments.append("raw:1") }
        if let expires, expires != 0 { segments.append("exp:\(expires)") }
        // The encoded form: a name may hold `:` or `/`, which would split the segment.
        if let filename { segments.append("fn:\(URLSigningKey.base64URL(Array(filename.utf8))):1") }
        if returnAttachment { segments.append("att:1") }
        if !formatQuality.isEmpty {
            let pairs = formatQuality.sorted { $0.key.rawValue < $1.key.rawValue }.map {
                "\($0.key.rawValue):\($0.value)"
            }
            segments.append("fq:" + pairs.joined(separator: ":"))
        }
        if maxBytes != 0 { segments.append("mb:\(maxBytes)") }
        if let stripColorProfile { segments.append("scp:\(stripColorProfile ? 1 : 0)") }
        if let keepCopyright { segments.append("kcr:\(keepCopyright ? 1 : 0)") }
        if let preserveHDR { segments.append("ph:\(preserveHDR ? 1 : 0)") }
        segments += security.canonicalSegments
        return segments
    }
}

extension ProcessingOptions {
    /// Whether `trim` is on (imgproxy: a threshold is set).
    public var trims: Bool { trimThreshold != nil }

    /// The canonical segments of min-width/height, zoom, extend_aspect_ratio,
    /// trim, flip, pixelate and auto_rotate, each left out at its default.
    var geometryOptionSegments: [String] {
        var segments: [String] = []
        if minWidth != 0 { segments.append("mw:\(minWidth)") }
        if minHeight != 0 { segments.append("mh:\(minHeight)") }
        if zoomWidth != 1 || zoomHeight != 1 {
            segments.append("z:\(Gravity.text(zoomWidth)):\(Gravity.text(zoomHeight))")
        }
        if extendAspectRatio || extendAspectRatioGravity != .centre {
            segments.append("exar:\(extendAspectRatio ? 1 : 0):\(extendAspectRatioGravity.arguments)")
        }
        if trimThreshold != nil || trimColour != nil || trimEqualHorizontal || trimEqualVertical {
            segments.append(
                "t:\(trimThreshold.map(Gravity.text) ?? ""):\(trimColour.map(Self.hex) ?? ""):"
                    + "\(trimEqualHorizontal ? 1 : 0):\(trimEqualVertical ? 1 : 0)")
        }
        if flipHorizontal || flipVertical { segments.append("fl:\(flipHorizontal ? 1 : 0):\(flipVertical ? 1 : 0)") }
        if pixelate != 1 { segments.append("pix:\(pixelate)") }
        if !autoRotate { segments.append("ar:0") }
        return segments
    }

    /// A colour as six hex digits.
    static func hex(_ colour: Colour) -> String {
        [colour.red, colour.green, colour.blue].map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}
