import CVipsShim
import Foundation

/// The metadata of a source image that an encoder can carry over: its EXIF
/// block and whether it had an ICC profile.
public struct ImageMetadata: Sendable, Hashable {
    /// The raw EXIF block ("Exif\0\0" and the TIFF structure), if any.
    public let exif: Data?
    /// Whether the source embedded an ICC profile. Decoded pixels are
    /// converted to sRGB, so an encoder keeping metadata embeds the sRGB
    /// profile they are now in, never the source's (which would mislabel them).
    public let hadICCProfile: Bool

    /// Metadata: the EXIF block to keep (nil for none), and whether the source had an ICC profile.
    public init(exif: Data?, hadICCProfile: Bool) {
        self.exif = exif
        self.hadICCProfile = hadICCProfile
    }
}

extension ImageDecoder {
    /// Reads the EXIF block and notes the ICC profile of `input` from its
    /// header (no pixels are decoded).
    public func metadata(_ input: ImageInput) throws(VipsError) -> ImageMetadata {
        try VipsRuntime.start()
        let (size, prefix) = try input.sizeAndPrefix()
        guard size > 0, let format = ImageFormat.sniff(prefix), options.allowedFormats.contains(format),
            let loader = format.libvipsLoader
        else {
            throw VipsError(.unsupportedFormat, "\(name(of: input)): not a readable image format")
        }
        let metadata = try input.withSource { source throws(VipsError) -> ImageMetadata in
            let image = try Self.load(name(of: input)) {
                vl_load_named(LibVips.table, loader, source, VIPS_ACCESS_SEQUENTIAL, VIPS_FAIL_ON_NONE)
            }
            return ImageMetadata(exif: image.blob("exif-data"), hadICCProfile: image.blob("icc-profile-data") != nil)
        }
        VipsRuntime.discardErrorMessages()
        return metadata
    }
}

extension VipsImageHandle {
    /// A copy of a blob field, nil when absent or empty.
    func blob(_ name: String) -> Data? {
        guard libvips.vips_image_get_typeof(pointer, name) != 0 else { return nil }
        var bytes: UnsafeRawPointer? = nil
        var length = 0
        guard libvips.vips_image_get_blob(pointer, name, &bytes, &length) == 0, let bytes, length > 0 else {
            _ = VipsRuntime.takeErrorMessage(default: "")
            return nil
        }
        return Data(bytes: bytes, count: length)
    }
}
