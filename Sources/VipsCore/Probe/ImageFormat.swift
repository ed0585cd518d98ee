/// An image file format, as identified from the data's leading bytes or named
/// by the libvips loader that reads it.
public struct ImageFormat: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The format's name, as libvips' loader names it ("jpeg", "png", "heif", ...).
    public let rawValue: String
    /// The format named `rawValue`; any name is accepted (unknown ones match no loader).
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The format's name (`rawValue`).
    public var description: String { rawValue }

    /// JPEG (JFIF/EXIF), baseline or progressive.
    public static let jpeg = ImageFormat(rawValue: "jpeg")
    /// PNG, 8 or 16 bits per sample, with or without alpha.
    public static let png = ImageFormat(rawValue: "png")
    /// WebP, lossy or lossless, still or animated.
    public static let webp = ImageFormat(rawValue: "webp")
    /// GIF, still or animated.
    public static let gif = ImageFormat(rawValue: "gif")
    /// TIFF.
    public static let tiff = ImageFormat(rawValue: "tiff")
    /// HEIF/HEIC (libheif), read by default.
    public static let heif = ImageFormat(rawValue: "heif")
    /// AVIF (AV1 in HEIF), read by default.
    public static let avif = ImageFormat(rawValue: "avif")
    /// SVG, rendered by librsvg; off by default (`DecodeOptions.allowedFormats`).
    public static let svg = ImageFormat(rawValue: "svg")
    /// PDF, rendered by poppler; off by default.
    public static let pdf = ImageFormat(rawValue: "pdf")
    /// JPEG 2000; off by default.
    public static let jp2k = ImageFormat(rawValue: "jp2k")
    /// JPEG XL; off by default.
    public static let jxl = ImageFormat(rawValue: "jxl")
    /// BMP (Windows and OS/2 bitmaps), read by default by VipsCore's own decoder (libvips 8.14 reads it
    /// only through ImageMagick, which VipsLoad never calls).
    public static let bmp = ImageFormat(rawValue: "bmp")
    /// ICO (Windows icons, favicons), read by default by VipsCore's own decoder: the entry that best fits the
    /// requested size, PNG or BMP, with its AND mask.
    public static let ico = ImageFormat(rawValue: "ico")
    /// CUR (Windows cursors, icons with a hot spot), read by default as ICO is.
    public static let cur = ImageFormat(rawValue: "cur")
    /// TGA (Truevision Targa), read by default by VipsCore's own decoder. TGA has no magic number: it is
    /// recognised by a strict header check, after every other format.
    public static let tga = ImageFormat(rawValue: "tga")
    /// PPM/PGM/PBM/PFM (netpbm); off by default.
    public static let ppm = ImageFormat(rawValue: "ppm")

    /// Whether a file of this format stores the image at several sizes and a decode picks the one
    /// that fits the size asked for (ICO and CUR): a smaller size is then never made from a larger
    /// decoded one, which would replace the file's own drawing at that size by a downscale.
    package var storesSeveralSizes: Bool { self == .ico || self == .cur }

    /// The formats read by default: the raster formats of the web and of cameras, and the bitmaps,
    /// icons and Targa files VipsCore decodes itself.
    public static let defaultAllowed: Set<ImageFormat> = [
        .jpeg, .png, .webp, .gif, .tiff, .heif, .avif, .bmp, .ico, .cur, .tga
    ]

    /// Identifies a format from the first bytes of the data (16 are enough), or
    /// returns nil. File names and MIME types are never trusted for this.
    public static func sniff<Bytes: Collection<UInt8>>(_ prefix: Bytes) -> ImageFormat? {
        let b = Array(prefix.prefix(32))
        func starts(_ magic: [UInt8], at offset: Int = 0) -> Bool {
            b.count >= offset + magic.count && Array(b[offset..<offset + magic.count]) == magic
        }
        if starts([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if starts([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if starts(Array("GIF87a".utf8)) || starts(Array("GIF89a".utf8)) { return .gif }
        if starts(Array("RIFF".utf8)) && starts(Array("WEBP".utf8), at: 8) { return .webp }
        if starts([0x49, 0x49, 0x2A, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2A])
            || starts([0x49, 0x49, 0x2B, 0x00]) || starts([0x4D, 0x4D, 0x00, 0x2B])
        {
            return .tiff
        }
        if starts(Array("ftyp".utf8), at: 4), b.count >= 12 {
            let brand = String(decoding: b[8..<12], as: UTF8.self)
            switch brand {
            case "avif", "avis": return .avif
            case "heic", "heix", "hevc", "hevx", "heim", "heis", "mif1", "msf1": return .heif
            default: return nil
            }
        }
        if starts([0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20]) || starts([0xFF, 0x4F, 0xFF, 0x51]) { return .jp2k }
        if starts([0xFF, 0x0A]) || starts([0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20]) { return .jxl }
        if starts(Array("%PDF".utf8)) { return .pdf }
        if starts(Array("BM".utf8)) { return .bmp }
        if ICODirectory.isPlausible(b, type: 1) { return .ico }
        if ICODirectory.isPlausible(b, type: 2) { return .cur }
        if b.count >= 2, b[0] == UInt8(ascii: "P"), (UInt8(ascii: "1")...UInt8(ascii: "6")).contains(b[1]) {
            return .ppm
        }
        // SVG is text: skip a UTF-8 BOM and leading white space, then look for markup.
        var text = b[...]
        if text.starts(with: [0xEF, 0xBB, 0xBF]) { text = text.dropFirst(3) }
        text = text.drop(while: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D })
        if text.starts(with: Array("<svg".utf8)) || text.starts(with: Array("<?xml".utf8)) { return .svg }
        // A document type comes first in many exported files; HTML's never names svg.
        let doctype = Array("<!doctype svg".utf8)
        if text.count >= doctype.count, zip(text, doctype).allSatisfy({ $0 | 0x20 == $1 | 0x20 }) { return .svg }
        // A bare DIB (a BMP without its file header) and TGA have no magic number, only a header that must make sense.
        if BMPHeader.isPlausibleDIB(b) { return .bmp }
        // Last: TGA has no magic number, only a header that must make sense.
        if TGAHeader.isPlausible(b) { return .tga }
        return nil
    }

    /// The libvips loader that reads this format from a source, or nil when libvips has none
    /// (BMP, ICO, CUR and TGA: VipsCore's own decoders read them; see `CodecRegistry`).
    ///
    /// The decoder calls this loader by name rather than letting libvips guess from the bytes:
    /// the guess falls back to other loaders, ImageMagick's among them, when the data is broken.
    var libvipsLoader: String? {
        switch self {
        case .jpeg: return "jpegload_source"
        case .png: return "pngload_source"
        case .webp: return "webpload_source"
        case .gif: return "gifload_source"
        case .tiff: return "tiffload_source"
        case .heif, .avif: return "heifload_source"
        case .svg: return "svgload_source"
        case .pdf: return "pdfload_source"
        case .jp2k: return "jp2kload_source"
        case .jxl: return "jxlload_source"
        case .ppm: return "ppmload_source"
        default: return nil
        }
    }

    /// The format a libvips loader reads, from its nickname ("jpegload_source" → jpeg).
    static func fromLoader(_ loader: String) -> ImageFormat {
        var name = loader
        for suffix in ["_source", "_buffer", "_file"] where name.hasSuffix(suffix) {
            name.removeLast(suffix.count)
        }
        if name.hasSuffix("load") { name.removeLast(4) }
        switch name {
        case "jp2k": return .jp2k
        case "magick", "magick7", "magick6": return ImageFormat(rawValue: "magick")
        default: return ImageFormat(rawValue: name)
        }
    }
}
