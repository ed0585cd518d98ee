import Foundation
import VipsCore

/// Generates deterministic, photo-like images in any format VipsLoad reads:
/// the corpus for tests, benchmarks and fuzzing seeds, made with libvips so
/// nothing has to be downloaded.
///
/// The pixels are layered Perlin noise (smooth shapes at three scales), hard
/// edges and sensor-like Gaussian noise, so JPEG and PNG files have the entropy
/// of real photographs rather than the trivial size of flat colour.
///
/// Not part of the library's API: `VipsSynthesis` is a target of the package,
/// not a product, for the project's tests, the benchmark and its corpus, and
/// the fuzz harness's seed corpus.
public enum ImageSynthesizer {
    /// How to encode a synthetic image, with the variants tests need.
    public enum Format: Sendable, Hashable {
        /// JPEG; `orientation` 1–8 is written as EXIF; `cmyk` converts through libvips' built-in CMYK profile.
        case jpeg(quality: Int = 90, progressive: Bool = false, orientation: Int = 1, cmyk: Bool = false)
        /// PNG: 8- or 16-bit, grey or RGB(A), palette (8-bit indexed), Adam7-interlaced.
        case png(sixteenBit: Bool = false, grey: Bool = false, palette: Bool = false, interlaced: Bool = false)
        /// WebP, lossy or lossless; `orientation` 1–8 is written as EXIF.
        case webp(quality: Int = 80, lossless: Bool = false, orientation: Int = 1)
        /// GIF (palette).
        case gif
        /// TIFF (deflate-compressed).
        case tiff

        /// The usual file extension.
        public var fileExtension: String {
            switch self {
            case .jpeg: return "jpg"
            case .png: return "png"
            case .webp: return "webp"
            case .gif: return "gif"
            case .tiff: return "tif"
            }
        }
    }

    /// The colour of the corner marker (pure red) drawn by `marker: true`.
    public static let markerColour: [UInt8] = [255, 0, 0]

    /// Encodes a `width` × `height` synthetic image.
    ///
    /// - Parameters:
    ///   - width: the stored width in pixels.
    ///   - height: the stored height in pixels.
    ///   - seed: the same seed always gives the same pixels.
    ///   - alpha: adds a smooth alpha channel (formats that carry alpha keep it).
    ///   - marker: paints the stored top-left eighth pure red, to check orientation handling.
    ///   - iccProfile: converts the sRGB pixels into this ICC profile (a libvips built-in name
    ///     such as "p3", or a profile file's path) and embeds it, as a camera or phone does;
    ///     an RGB, grey or CMYK profile, for every format that carries one (not GIF).
    ///   - format: the file format and its settings.
    public static func data(
        width: Int, height: Int, seed: Int = 1, alpha: Bool = false, marker: Bool = false,
        iccProfile: String? = nil, format: Format
    ) throws(VipsError) -> Data {
        try VipsRuntime.start()
        guard width > 0, height > 0 else { throw VipsError(.invalidArgument, "synthetic image must be at least 1×1") }
        var image = try VipsImageHandle.syntheticPhoto(
            width: width, height: height, seed: Int32(truncatingIfNeeded: seed), alpha: alpha)
        if marker {
            image = try image.paintingCorner(
                ink: alpha ? [255, 0, 0, 255] : [255, 0, 0], width: max(1, width / 8), height: max(1, height / 8))
        }
        if let iccProfile { image = try image.transformedFromSRGB(to: iccProfile) }
        let suffix: String
        switch format {
        case .jpeg(let quality, let progressive, let orientation, let cmyk):
            if alpha { image = try image.droppingAlpha() }
            if cmyk { image = try image.transformedFromSRGB(to: "cmyk") }
            if orientation != 1 { image = try image.settingOrientation(orientation) }
            suffix = ".jpg[Q=\(quality)\(progressive ? ",interlace" : "")]"
        case .png(let sixteenBit, let grey, let palette, let interlaced):
            if grey { image = try image.converted(to: .grey) }
            if sixteenBit { image = try image.converted(to: grey ? .grey16 : .rgb16) }
            var options: [String] = []
            if palette { options.append("palette") }
            if interlaced { options.append("interlace") }
            if sixteenBit { options.append("bitdepth=16") }
            suffix = ".png[\(options.joined(separator: ","))]"
        case .webp(let quality, let lossless, let orientation):
            if orientation != 1 { image = try image.settingOrientation(orientation) }
            suffix = lossless ? ".webp[lossless]" : ".webp[Q=\(quality)]"
        case .gif:
            suffix = ".gif"
        case .tiff:
            suffix = ".tif[compression=deflate]"
        }
        return try image.saved(suffix: suffix)
    }

    /// A decoded synthetic image (8-bit sRGB), for tests that start from pixels.
    public static func bitmap(width: Int, height: Int, seed: Int = 1, alpha: Bool = false) throws(VipsError) -> Bitmap {
        try VipsRuntime.start()
        let image = try VipsImageHandle.syntheticPhoto(
            width: width, height: height, seed: Int32(truncatingIfNeeded: seed), alpha: alpha)
        return try ImageDecoder.materialise(image, scale: 1, label: "synthesis")
    }
}
