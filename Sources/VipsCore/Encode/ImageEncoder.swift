import CVipsShim
import Foundation

/// Encodes bitmaps to JPEG, PNG, WebP, AVIF, GIF, JPEG XL, HEIC, TIFF, BMP or ICO (see `OutputFormat`).
public struct ImageEncoder: Sendable {
    /// Whether 3-channel JPEG output takes the direct libjpeg-turbo encoder
    /// (see `encodeJPEGDirectly`); false sends everything through libvips, for
    /// tests and comparisons.
    var usesDirectPaths = true

    /// An encoder; it holds no state, so one can be shared by every thread.
    public init() {}

    /// Encodes `bitmap` as `format`.
    ///
    /// Metadata is stripped unless `keepingMetadata` is set: then the EXIF
    /// block the bitmap's source carried (`BitmapSource.metadata`, kept when
    /// the decode was asked to) is written with its orientation reset to 1 —
    /// the pixels are already upright — and, when the source had an ICC
    /// profile, the sRGB profile the decoded pixels are in is embedded. A
    /// format without alpha (JPEG) flattens transparency onto `background`.
    ///
    /// `keepingColorProfile` overrides whether that sRGB profile is embedded
    /// (for a source that had a profile, in a format that stores one: not GIF,
    /// BMP or ICO); nil embeds it exactly when metadata is kept. `greyscale`
    /// writes the image in libvips' B_W colour space (one band, two with
    /// alpha: the luminance), for a source that was greyscale; BMP is always
    /// written as RGB(A).
    ///
    /// - Throws: `.invalidArgument` for settings out of range (and an ICO
    ///   over 256×256), `.encodeFailed` when libvips cannot write the format.
    public func encode(
        _ bitmap: Bitmap, as format: OutputFormat, keepingMetadata: Bool = false,
        background: Colour = .white, keepingColorProfile: Bool? = nil, greyscale: Bool = false
    ) throws(VipsError) -> EncodedImage {
        try format.validate()
        if case .bmp = format {
            return EncodedImage(
                data: try Self.bmp(bitmap), format: format, width: bitmap.width, height: bitmap.height)
        }
        if case .ico = format {
            guard bitmap.width <= 256, bitmap.height <= 256 else {
                throw VipsError(
                    .invalidArgument, "encode ico: \(bitmap.width)×\(bitmap.height) is over ICO's 256×256")
            }
            let png = try encode(
                bitmap, as: .png(), keepingMetadata: false, background: background, keepingColorProfile: false,
                greyscale: greyscale)
            return EncodedImage(
                data: Self.ico(png: png.data, width: bitmap.width, height: bitmap.height), format: format,
                width: bitmap.width, height: bitmap.height)
        }
        let embedsProfile =
            (keepingColorProfile ?? keepingMetadata) && format.storesColorProfile && !greyscale
            && bitmap.source?.metadata?.hadICCProfile == true
        // Without metadata to write, 3-channel JPEG needs no libvips (the same bytes; see encodeJPEGDirectly).
        // RGBA is flattened first, as libvips would (see `flattened`).
        if usesDirectPaths, !keepingMetadata, !embedsProfile, !greyscale,
            case .jpeg(let quality, let progressive, let chroma) = format,
            let opaque = bitmap.channels == 4 ? Self.flattened(bitmap, onto: background) : bitmap,
            let data = try Self.encodeJPEGDirectly(opaque, quality: quality, progressive: progressive, chroma: chroma)
        {
            return EncodedImage(data: data, format: format, width: bitmap.width, height: bitmap.height)
        }
        try VipsRuntime.start()
        let label = "encode \(format)"
        var image = try ImageDecoder.image(wrapping: bitmap)
        if !format.supportsAlpha, bitmap.channels == 4 {
            let colour = background.bands(3)
            image = try image.apply(.encodeFailed, "\(label): flatten") { input, output in
                colour.withUnsafeBufferPointer {
                    vl_flatten(LibVips.table, input, output, $0.baseAddress, Int32($0.count))
                }
            }
        }
        if greyscale {
            image = try image.apply(.encodeFailed, "\(label): greyscale") {
                vl_colourspace(LibVips.table, $0, $1, VIPS_INTERPRETATION_B_W)
            }
        }
        // The wrapped bitmap carries no metadata of its own: only what is attached here is written.
        let strip: gboolean = keepingMetadata || embedsProfile ? 0 : 1
        if keepingMetadata || embedsProfile, let metadata = bitmap.source?.metadata {
            // A private copy to attach fields to (the wrap is shared by nobody, but stays read-only).
            image = try image.apply(.encodeFailed, "\(label): metadata") {
                vl_copy_interpretation(
                    LibVips.table, $0, $1, greyscale ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB)
            }
            if keepingMetadata, let exif = metadata.exif {
                exif.withUnsafeBytes {
                    libvips.vips_image_set_blob_copy(image.pointer, "exif-data", $0.baseAddress, $0.count)
                }
            }
            libvips.vips_image_set_int(image.pointer, "orientation", 1)
            if embedsProfile, let profile = vl_srgb_profile(LibVips.table) {
                var length = 0
                if let bytes = libvips.vips_blob_get(profile, &length) {
                    libvips.vips_image_set_blob_copy(image.pointer, "icc-profile-data", bytes, length)
                }
                libvips.vips_area_unref(UnsafeMutableRawPointer(profile).assumingMemoryBound(to: VipsArea.self))
            }
        }
        var buffer: UnsafeMutableRawPointer? = nil
        var length = 0
        let status: Int32 = withExtendedLifetime(bitmap) {
            switch format {
            case .jpeg(let quality, let progressive, let chroma):
                let mode: VipsForeignSubsample
                switch chroma {
                case .auto: mode = VIPS_FOREIGN_SUBSAMPLE_AUTO
                case .on: mode = VIPS_FOREIGN_SUBSAMPLE_ON
                case .off: mode = VIPS_FOREIGN_SUBSAMPLE_OFF
                }
                return vl_jpegsave_options(
                    LibVips.table,
                    image.pointer, &buffer, &length, Int32(quality), progressive ? 1 : 0, mode, strip)
            case .png(let compression, let palette):
                return vl_pngsave_options(
                    LibVips.table, image.pointer, &buffer, &length, Int32(compression), palette ? 1 : 0, strip)
            case .webp(let quality, let lossless, let effort):
                return vl_webpsave_options(
                    LibVips.table,
                    image.pointer, &buffer, &length, Int32(quality), lossless ? 1 : 0, Int32(effort), strip)
            case .avif(let quality, let effort):
                return vl_avifsave_options(
                    LibVips.table, image.pointer, &buffer, &length, Int32(quality), Int32(effort), strip)
            case .gif:
                return vl_gifsave_options(LibVips.table, image.pointer, &buffer, &length, strip)
            case .jxl(let quality, let effort, let lossless):
                return vl_jxlsave_options(
                    LibVips.table, image.pointer, &buffer, &length, Int32(quality), Int32(effort), lossless ? 1 : 0,
                    strip)
            case .heic(let quality, let effort):
                return vl_heicsave_options(
                    LibVips.table, image.pointer, &buffer, &length, Int32(quality), Int32(effort), strip)
            case .tiff(let quality):
                return vl_tiffsave_options(LibVips.table, image.pointer, &buffer, &length, Int32(quality), strip)
            case .bmp, .ico:
                // Written in Swift above.
                return -1
            }
        }
        guard status == 0, let buffer else {
            throw VipsError(.encodeFailed, "\(label): \(VipsRuntime.takeErrorMessage(default: "no reason given"))")
        }
        VipsRuntime.discardErrorMessages()
        let data = Data(bytesNoCopy: buffer, count: length, deallocator: .custom { pointer, _ in g_free(pointer) })
        return EncodedImage(data: data, format: format, width: bitmap.width, height: bitmap.height)
    }
}
