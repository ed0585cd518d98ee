import VipsCore

/// A conservative estimate of the most memory one render holds at once,
/// from the source's header and the URL's geometry, before anything is
/// decoded: what `MemoryAdmission` admits within its budget.
///
/// The peak counted is the decoded bitmap (at the size shrink-on-load gives),
/// the resized bitmap, the extended or padded result and one more bitmap of
/// that size for any processor after the resize (blur, sharpen, flatten,
/// rotate), plus the encoder's working memory, by format, per output pixel.
/// Every bitmap is 8-bit sRGB: 3 bytes a pixel, 4 with alpha. Only the first
/// page is counted: the server's output is one still image.
///
/// It errs high: JPEG's shrink is taken as the largest power of two the
/// resize ratio allows (the decoder may take less only when it shrinks less,
/// never more), and formats without a shrink-on-load (PNG, GIF, TIFF, HEIF,
/// AVIF) are decoded at full size.
struct RenderMemoryEstimate: Sendable, Hashable {
    /// What the URL asks of the image's size, in pixels (points × dpr).
    struct Geometry: Sendable, Hashable {
        /// The box's sides in pixels; 0 follows from the other side.
        var width = 0
        var height = 0
        /// Fill the box (crop to it), rather than fit inside it.
        var fills = false
        /// Stretch to the box (`rt:force`).
        var stretches = false
        /// Scale an image smaller than the box up.
        var enlarges = false
        /// Pad a result smaller than the box to it.
        var extends = false
        /// Padding added in pixels, horizontally and vertically.
        var paddingWidth = 0
        var paddingHeight = 0
        /// Decode with no shrink-on-load counted: a crop's decode keeps the
        /// crop's resolution, which the box alone does not tell (conservative).
        var decodesFullSize = false
        /// Processors after the resize (blur, sharpen, flatten, rotate).
        var hasProcessors = false

        /// The geometry of `processing`.
        init(_ processing: ProcessingRequest) {
            let options = processing.options
            func pixels(_ points: Int) -> Int {
                let value = (Double(max(0, points)) * options.dpr).rounded(.up)
                return value < 1e9 ? Int(value) : 1_000_000_000
            }
            // The box is the result's, after the rotation: a quarter turn makes it the other way round for the upright source.
            let turned = options.rotate % 180 == 90
            width = pixels(turned ? options.height : options.width)
            height = pixels(turned ? options.width : options.height)
            let bothSides = width > 0 && height > 0
            fills = [.fill, .fillDown, .auto].contains(options.resizingType) && bothSides
            stretches = options.resizingType == .force
            enlarges = options.enlarge
            extends = options.extend
            paddingWidth = pixels(options.padding.left) + pixels(options.padding.right)
            paddingHeight = pixels(options.padding.top) + pixels(options.padding.bottom)
            decodesFullSize = options.hasCrop
            hasProcessors =
                options.blur > 0 || options.sharpen > 0 || options.background != nil || options.rotate != 0
        }

        init() {}
    }

    /// Pixels of the decoded bitmap.
    let decodedPixels: Int
    /// Pixels of the resized bitmap.
    let resizedPixels: Int
    /// Pixels of the result (extended and padded), as encoded.
    let outputPixels: Int
    /// Bytes per bitmap pixel (3, or 4 with alpha).
    let bytesPerPixel: Int
    /// The estimated peak in bytes.
    let bytes: Int

    /// Encoder working memory per output pixel, in bytes, beyond the decoded
    /// and resized bitmaps: the encoder's own planes and buffers, libvips'
    /// copy of the bitmap it encodes, and the encoded bytes. Rounded up from
    /// measured peaks. `nil` (the format is negotiated after the decode)
    /// takes the largest.
    ///
    /// Measured on 2026-12-04 with `Benchmarks/pileup.py --measure-encoders`
    /// on a release build of `vipsload serve` (2 shared cores): one request
    /// per format, each in a fresh server warmed up by one thumbnail, of a
    /// 4000×3000 JPEG; VmHWM's growth minus the bitmaps, per output pixel.
    /// - `rs:fit:4096:4096:1` (enlarged to 4096×3072, 12.6 MP; minus the
    ///   decode and the result, 73 MB): JPEG −0.1 B (33 → 102 MiB), PNG
    ///   1.8 B (34 → 125 MiB), WebP 5.2 B (34 → 167 MiB), AVIF 20.2 B
    ///   (34 → 347 MiB, 26.8 s).
    /// - `rs:fit:4096:4096:0:1` (extended to 4096×4096, 16.8 MP; minus the
    ///   decode and the canvas, 86 MB): JPEG 4.8 B (35 → 195 MiB), PNG
    ///   4.9 B (35 → 196 MiB), WebP 14.0 B (35 → 342 MiB), AVIF 22.0 B
    ///   (35 → 469 MiB, 40.7 s).
    ///
    /// Each constant is the larger figure plus a margin. GIF was not
    /// measured; it takes WebP's (its quantiser works on a copy of the
    /// bitmap and an index plane).
    static func encoderBytesPerPixel(_ format: OutputFormat?) -> Double {
        switch format {
        case .avif: return 24
        case .webp: return 16
        case .png: return 6
        case .jpeg: return 6
        case .gif: return 16
        // Not measured: the other libvips-heavy encoders take AVIF's; the uncompressed ones PNG's.
        case .jxl, .heic: return 24
        case .tiff, .bmp, .ico: return 6
        case nil: return 24
        }
    }

    /// Bytes every render holds whatever its size (threads' stacks, libvips'
    /// per-operation buffers).
    static let fixedBytes = 8 << 20

    /// The estimate for `info` made to `geometry` and encoded as `format`
    /// (nil: not known before the decode).
    init(info: ImageInfo, geometry: Geometry, format: OutputFormat?) {
        let width = Double(max(1, info.width))
        let height = Double(max(1, info.height))
        let hasAlpha = info.hasAlpha || info.bands == 2 || info.bands == 4
        bytesPerPixel = hasAlpha ? 4 : 3
        // The resize ratio on each side.
        var ratioX = 1.0
        var ratioY = 1.0
        let boxWidth = Double(geometry.width)
        let boxHeight = Double(geometry.height)
        if geometry.width > 0 || geometry.height > 0 {
            if geometry.stretches {
                ratioX = geometry.width > 0 ? boxWidth / width : 1
                ratioY = geometry.height > 0 ? boxHeight / height : 1
            } else {
                let sides = [
                    geometry.width > 0 ? boxWidth / width : nil, geometry.height > 0 ? boxHeight / height : nil
                ]
                .compactMap { $0 }
                let ratio = (geometry.fills ? sides.max() : sides.min()) ?? 1
                ratioX = ratio
                ratioY = ratio
            }
            if !geometry.enlarges {
                ratioX = min(ratioX, 1)
                ratioY = min(ratioY, 1)
            }
        }
        let resizedWidth = (width * ratioX).rounded(.up)
        let resizedHeight = (height * ratioY).rounded(.up)
        var outputWidth = resizedWidth
        var outputHeight = resizedHeight
        if geometry.fills {
            outputWidth = min(outputWidth, boxWidth)
            outputHeight = min(outputHeight, boxHeight)
        }
        if geometry.extends {
            outputWidth = max(outputWidth, boxWidth)
            outputHeight = max(outputHeight, boxHeight)
        }
        outputWidth += Double(geometry.paddingWidth)
        outputHeight += Double(geometry.paddingHeight)
        // The decode: shrunk on load only for JPEG (by 2, 4 or 8) and WebP (any factor).
        let shrink = 1 / max(ratioX, ratioY)
        var decodeShrink = 1.0
        if !geometry.decodesFullSize, shrink > 1 {
            switch info.format {
            case .jpeg: decodeShrink = [8.0, 4, 2].first { $0 <= shrink } ?? 1
            case .webp: decodeShrink = shrink
            default: break
            }
        }
        let decoded = (width / decodeShrink).rounded(.up) * (height / decodeShrink).rounded(.up)
        let resized = resizedWidth * resizedHeight
        let output = outputWidth * outputHeight
        let bitmaps =
            decoded + resized + (output != resized ? output : 0) + (geometry.hasProcessors ? output : 0)
        let total =
            bitmaps * Double(bytesPerPixel) + output * Self.encoderBytesPerPixel(format) + Double(Self.fixedBytes)
        func count(_ value: Double) -> Int { value < 9e18 ? Int(value) : Int.max }
        decodedPixels = count(decoded)
        resizedPixels = count(resized)
        outputPixels = count(output)
        bytes = count(total)
    }
}
