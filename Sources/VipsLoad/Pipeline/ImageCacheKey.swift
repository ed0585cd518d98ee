/// The identity of a decoded bitmap: which source (and, for a file, which
/// version of it), at which pixel box, with or without upscaling.
///
/// Built from what changes the output pixels and nothing else, so
/// `.maxPixelSize(100)` at scale 2 and `.fit(width: 200, height: 200)` at
/// scale 1 share one key (and one cached bitmap). A file's key includes its
/// identity (device, inode, size, modification time), so a file replaced or
/// rewritten in place is a new key and is decoded again.
public struct ImageCacheKey: Sendable, Hashable, CustomStringConvertible {
    /// `ImageSource.key` of the source.
    public let sourceKey: String
    /// The file's identity when the request was made (nil for other sources).
    let version: FileIdentity?
    /// Pixel box width, 0 for the original size.
    let width: Int
    /// Pixel box height, 0 for the original size.
    let height: Int
    /// Whether images smaller than the box are enlarged (always false for the original size).
    let allowUpscale: Bool
    /// The resize mode, "" for fit.
    let geometry: String
    /// The processors' identifiers in order, "" for none.
    let processing: String

    init(
        sourceKey: String, version: FileIdentity? = nil, box: (width: Int, height: Int), allowUpscale: Bool,
        geometry: String = "", processing: String = ""
    ) {
        self.geometry = geometry
        self.processing = processing
        self.sourceKey = sourceKey
        self.version = version
        self.width = box.width
        self.height = box.height
        // Upscaling cannot change an original-size decode: keep one key for it.
        self.allowUpscale = box.width > 0 && allowUpscale
    }

    /// The source and version together: what one data load reads.
    var versionedSourceKey: String { version.map { sourceKey + "#" + $0.description } ?? sourceKey }

    /// The key of the decode a processed result is made from: the same
    /// source, box and mode without the processors.
    var withoutProcessing: ImageCacheKey {
        ImageCacheKey(
            sourceKey: sourceKey, version: version, box: (width, height), allowUpscale: allowUpscale,
            geometry: geometry)
    }

    /// Whether the key names a plain fit (no other mode, no processors): the
    /// only kind a larger cached bitmap can be downscaled to, or from.
    var isPlainFit: Bool { geometry.isEmpty && processing.isEmpty }

    /// Whether this key names the image at its own size.
    public var isOriginal: Bool { width == 0 }

    /// The source key, then the pixel box ("original" for the image's own size).
    public var description: String {
        (isOriginal ? "\(sourceKey) original" : "\(sourceKey) \(width)x\(height)\(allowUpscale ? " upscaled" : "")")
            + (geometry.isEmpty ? "" : " \(geometry)") + (processing.isEmpty ? "" : " [\(processing)]")
    }
}
