import CVipsShim
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
        var image = try photo(width: width, height: height, seed: Int32(truncatingIfNeeded: seed), alpha: alpha)
        if marker {
            image = try image.apply(.internal, "marker") { input, out in
                out.pointee = libvips.vips_image_copy_memory(input)
                return out.pointee == nil ? -1 : 0
            }
            var ink: [Double] = alpha ? [255, 0, 0, 255] : [255, 0, 0]
            let status = vl_draw_rect(
                LibVips.table,
                image.pointer, &ink, Int32(ink.count), 0, 0,
                Int32(max(1, width / 8)), Int32(max(1, height / 8)))
            guard status == 0 else {
                throw VipsError(.internal, "marker: \(VipsRuntime.takeErrorMessage(default: "draw failed"))")
            }
        }
        if let iccProfile {
            image = try image.apply(.internal, "ICC \(iccProfile)") {
                vl_icc_transform(LibVips.table, $0, $1, iccProfile, "srgb")
            }
        }
        let suffix: String
        switch format {
        case .jpeg(let quality, let progressive, let orientation, let cmyk):
            if alpha { image = try image.apply(.internal, "flatten") { vl_extract_bands(LibVips.table, $0, $1, 0, 3) } }
            if cmyk {
                image = try image.apply(.internal, "cmyk") { vl_icc_transform(LibVips.table, $0, $1, "cmyk", "srgb") }
            }
            if orientation != 1 {
                image = try image.apply(.internal, "copy") {
                    vl_copy_interpretation(LibVips.table, $0, $1, libvips.vips_image_get_interpretation($0))
                }
                libvips.vips_image_set_int(image.pointer, "orientation", Int32(orientation))
            }
            suffix = ".jpg[Q=\(quality)\(progressive ? ",interlace" : "")]"
        case .png(let sixteenBit, let grey, let palette, let interlaced):
            if grey {
                image = try image.apply(.internal, "grey") {
                    vl_colourspace(LibVips.table, $0, $1, VIPS_INTERPRETATION_B_W)
                }
            }
            if sixteenBit {
                image = try image.apply(.internal, "16-bit") {
                    vl_colourspace(LibVips.table, $0, $1, grey ? VIPS_INTERPRETATION_GREY16 : VIPS_INTERPRETATION_RGB16)
                }
            }
            var options: [String] = []
            if palette { options.append("palette") }
            if interlaced { options.append("interlace") }
            if sixteenBit { options.append("bitdepth=16") }
            suffix = ".png[\(options.joined(separator: ","))]"
        case .webp(let quality, let lossless, let orientation):
            if orientation != 1 {
                image = try image.apply(.internal, "copy") {
                    vl_copy_interpretation(LibVips.table, $0, $1, libvips.vips_image_get_interpretation($0))
                }
                libvips.vips_image_set_int(image.pointer, "orientation", Int32(orientation))
            }
            suffix = lossless ? ".webp[lossless]" : ".webp[Q=\(quality)]"
        case .gif:
            suffix = ".gif"
        case .tiff:
            suffix = ".tif[compression=deflate]"
        }
        var buffer: UnsafeMutableRawPointer? = nil
        var length = 0
        guard vl_write_to_buffer(LibVips.table, image.pointer, suffix, &buffer, &length) == 0, let buffer else {
            throw VipsError(
                .encodeFailed, "synthesise \(suffix): \(VipsRuntime.takeErrorMessage(default: "save failed"))")
        }
        return Data(bytesNoCopy: buffer, count: length, deallocator: .custom { pointer, _ in g_free(pointer) })
    }

    /// A decoded synthetic image (8-bit sRGB), for tests that start from pixels.
    public static func bitmap(width: Int, height: Int, seed: Int = 1, alpha: Bool = false) throws(VipsError) -> Bitmap {
        try VipsRuntime.start()
        let image = try photo(width: width, height: height, seed: Int32(truncatingIfNeeded: seed), alpha: alpha)
        return try ImageDecoder.materialise(image, scale: 1, label: "synthesis")
    }

    /// The lazy libvips image: 3 bands (4 with alpha), 8-bit sRGB.
    private static func photo(width: Int, height: Int, seed: Int32, alpha: Bool) throws(VipsError) -> VipsImageHandle {
        let w = Int32(clamping: width), h = Int32(clamping: height)
        let large = max(Int32(8), max(w, h) / 3), medium = max(Int32(4), max(w, h) / 14),
            small = max(Int32(2), max(w, h) / 60)
        func channel(_ index: Int32) throws(VipsError) -> VipsImageHandle {
            let s = seed &* 31 &+ index &* 7
            // Perlin output is roughly -1...1; weight three octaves, then map to 0...255.
            let a = try VipsImageHandle.make(.internal, "perlin") { vl_perlin(LibVips.table, $0, w, h, large, s) }
            let b = try VipsImageHandle.make(.internal, "perlin") { vl_perlin(LibVips.table, $0, w, h, medium, s &+ 1) }
            let c = try VipsImageHandle.make(.internal, "perlin") { vl_perlin(LibVips.table, $0, w, h, small, s &+ 2) }
            let a1 = try a.apply(.internal, "linear") { vl_linear1(LibVips.table, $0, $1, 110, 128) }
            let b1 = try b.apply(.internal, "linear") { vl_linear1(LibVips.table, $0, $1, 45, 0) }
            let c1 = try c.apply(.internal, "linear") { vl_linear1(LibVips.table, $0, $1, 18, 0) }
            // Hard-edged shapes: thresholded medium octave.
            let edges = try b.apply(.internal, "edges") { vl_more_const1(LibVips.table, $0, $1, 0.2) }
            let e1 = try edges.apply(.internal, "linear") { vl_linear1(LibVips.table, $0, $1, 0.25, 0) }
            let noise = try VipsImageHandle.make(.internal, "noise") {
                vl_gaussnoise(LibVips.table, $0, w, h, 0, 5, s &+ 3)
            }
            var sum = try VipsImageHandle.make(.internal, "add") { vl_add(LibVips.table, a1.pointer, b1.pointer, $0) }
            for layer in [c1, e1, noise] {
                let previous = sum
                sum = try VipsImageHandle.make(.internal, "add") {
                    vl_add(LibVips.table, previous.pointer, layer.pointer, $0)
                }
            }
            return try sum.apply(.internal, "cast") { vl_cast(LibVips.table, $0, $1, VIPS_FORMAT_UCHAR) }
        }
        let r = try channel(0), g = try channel(1), b = try channel(2)
        var rgb = try VipsImageHandle.make(.internal, "bandjoin") {
            vl_bandjoin3(LibVips.table, r.pointer, g.pointer, b.pointer, $0)
        }
        if alpha {
            let a = try VipsImageHandle.make(.internal, "perlin") {
                vl_perlin(LibVips.table, $0, w, h, large, seed &+ 99)
            }
            let a1 = try a.apply(.internal, "linear") { vl_linear1(LibVips.table, $0, $1, 160, 150) }
            let a2 = try a1.apply(.internal, "cast") { vl_cast(LibVips.table, $0, $1, VIPS_FORMAT_UCHAR) }
            let previous = rgb
            rgb = try VipsImageHandle.make(.internal, "bandjoin") {
                vl_bandjoin2(LibVips.table, previous.pointer, a2.pointer, $0)
            }
        }
        return try rgb.apply(.internal, "sRGB") {
            vl_copy_interpretation(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
        }
    }
}
