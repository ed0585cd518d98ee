/// How `ImageDecoder` reads images. Every property documents its default.
public struct DecodeOptions: Sendable, Hashable {
    /// Header-checked bounds on input size, dimensions and pages. Default `DecodeLimits()`.
    public var limits: DecodeLimits
    /// Fail on truncated or corrupt data instead of returning a partly grey
    /// image. Default false (libvips' lenient behaviour, like browsers).
    public var strict: Bool
    /// Formats that may be decoded, identified from magic bytes. Default
    /// `ImageFormat.defaultAllowed`: jpeg, png, webp, gif, tiff, heif, avif,
    /// and bmp, ico, cur and tga, which VipsCore's own decoders read (never libvips).
    ///
    /// The defaults are the hardened formats: fuzzed by this project
    /// (`scripts/fuzz.sh`) and on by default. SVG, PDF, JPEG 2000, JPEG XL
    /// and PPM are opt-in: their libvips loaders (librsvg, poppler,
    /// OpenJPEG, libjxl, ppmload) are marked untrusted by libvips and not fuzzed here;
    /// one can crash or hang the process on a hostile file. The `vipsload`
    /// CLI decodes them in worker processes (`--isolate`); a server linking the
    /// library should do the same before adding them here.
    public var allowedFormats: Set<ImageFormat>
    /// How far to shrink while decoding. Default `.fast`.
    public var shrinkOnLoad: ShrinkOnLoad

    /// Options; each parameter defaults as its property documents.
    public init(
        limits: DecodeLimits = DecodeLimits(), strict: Bool = false,
        allowedFormats: Set<ImageFormat> = ImageFormat.defaultAllowed,
        shrinkOnLoad: ShrinkOnLoad = .fast
    ) {
        self.limits = limits
        self.strict = strict
        self.allowedFormats = allowedFormats
        self.shrinkOnLoad = shrinkOnLoad
    }

    /// The trade between speed and sharpness when shrinking during decode
    /// (JPEG's DCT scaling by 1/2, 1/4, 1/8; WebP's scaled decode).
    public enum ShrinkOnLoad: Sendable, Hashable {
        /// Shrink on load as far as possible while staying at or above the
        /// target size, then finish with a bicubic reduce (Lanczos for images
        /// with alpha and animations). For 4000→256 px this decodes a JPEG at
        /// 1/8. What Pillow's `draft()` and `thumbnail()` do.
        case fast
        /// Keep at least twice the target size for the final Lanczos reduce, as
        /// `vipsthumbnail` does: slower (4000→256 decodes at 1/4), marginally
        /// less aliasing on fine high-contrast detail.
        case quality

        /// Smallest ratio kept between the shrunk-on-load size and the target.
        var margin: Double {
            switch self {
            case .fast: return 1
            case .quality: return 2
            }
        }
    }
}

extension DecodeOptions {
    /// How far a loader may shrink this image while decoding it into `box`:
    /// `raster` keeps the mode's margin (for JPEG's DCT scaling and WebP's
    /// scaled decode), `vector` renders straight at the output size.
    ///
    /// The image is fitted inside the box, so the side that needs the larger
    /// shrink decides. Both are capped so the short side keeps at least a
    /// pixel: for a 2×48 JPEG at 1/4, libvips 8.14 rounds the width down to 0
    /// and aborts the process (a failed assertion, not an error), and WebP's
    /// scaled decode refuses "bad image dimensions". The resize does the rest.
    func loaderShrink(_ info: ImageInfo, box: (width: Int, height: Int)) -> (raster: Double, vector: Double) {
        let factor = max(Double(info.width) / Double(box.width), Double(info.height) / Double(box.height))
        let cap = Double(max(1, min(info.width, info.height))) * 0.99
        return (min(factor / shrinkOnLoad.margin, cap), min(factor, cap))
    }
}
