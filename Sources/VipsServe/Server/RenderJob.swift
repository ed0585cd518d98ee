import Foundation
import VipsCore
import VipsHTTP
import VipsLoad

/// One response to make: the pipeline request, how to encode its bitmap,
/// and the header fields and cache lifetime of the answer. Built on the
/// network thread from the URL (without decoding anything), made by a render.
struct RenderJob: Sendable {
    /// How the bitmap is encoded: imgproxy's `determineOutputFormat` and `saveImage`.
    struct Encoding: Sendable, Hashable {
        /// The format decided before the decode (the URL's, or one `Accept` chose);
        /// nil when it follows from the source (`preferred`).
        let format: ProcessingOptions.Format?
        /// The preferred formats (`ImageServer.OutputSettings.preferredFormats`).
        let preferred: [ProcessingOptions.Format]
        /// The quality of each format that has one.
        let qualities: [ProcessingOptions.Format: Int]
        /// `max_bytes`; 0 for none.
        let maxBytes: Int
        /// Whether the sRGB profile is embedded for a source that had a profile.
        let keepsColorProfile: Bool

        /// The format for `bitmap` (the processed result): the decided one, or
        /// the source's when preferred, else the first preferred format that
        /// holds the result's transparency, else the first. AVIF under 16
        /// pixels a side (libheif's minimum) is PNG with alpha, else JPEG.
        func format(for bitmap: Bitmap) -> ProcessingOptions.Format {
            var chosen: ProcessingOptions.Format
            if let format {
                chosen = format
            } else if let source = bitmap.source.flatMap({ ProcessingOptions.Format(source: $0.info.format) }),
                preferred.contains(source)
            {
                chosen = source
            } else {
                chosen = preferred.first { !bitmap.hasAlpha || $0.supportsAlpha } ?? preferred.first ?? .jpeg
            }
            if chosen == .avif, bitmap.width < 16 || bitmap.height < 16 { chosen = bitmap.hasAlpha ? .png : .jpeg }
            return chosen
        }

        /// The encoder settings of `format` at its quality.
        func outputFormat(_ format: ProcessingOptions.Format) -> OutputFormat {
            format.outputFormat(quality: format.hasQuality ? qualities[format] : nil)
        }
    }

    let key: RepresentationKey
    let request: ImageRequest
    let encoding: Encoding
    /// Keep the EXIF block (orientation reset to 1); stripped otherwise.
    let keepsMetadata: Bool
    /// What JPEG flattens transparency onto.
    let background: Colour
    /// `Cache-Control: public, max-age=` this many seconds.
    var maxAge: Int
    /// Whether the source is remote: its cached responses live at most `maxAge`.
    let isRemote: Bool
    /// The URL's geometry, for the render's memory estimate.
    let geometry: RenderMemoryEstimate.Geometry
    /// `Last-Modified`: a local file's modification time, or the origin's
    /// field once the source is loaded; nil for none.
    var lastModified: String? = nil
    /// The source's bytes, when a conditional request to the origin has
    /// loaded them already (the render uses them instead of loading again).
    var preloaded: ImageData? = nil
    /// `Content-Disposition` of a 200 answer (imgproxy sends one with every image).
    var disposition: ContentDisposition? = nil
    /// `raw` or `skip_processing`: the source's own bytes may be the answer.
    var unprocessed: Unprocessed? = nil

    /// The request fields the answer depends on besides the URL (`Vary`), in
    /// imgproxy's order: `Accept`, then the client hints.
    var vary: [String] = []
    /// The limits the source must keep (422 otherwise), checked once its bytes and header are known.
    var securityLimits = SecurityLimits()
    /// `Access-Control-Allow-Origin` (`ImageServer.Configuration.allowOrigin`); nil for none.
    var allowOrigin: String?

    /// The format the render is encoded in, when it is known before the decode.
    var knownFormat: OutputFormat? { encoding.format.map(encoding.outputFormat) }

    /// The header fields every answer of this job carries (200 and 304 alike).
    var headers: [(String, String)] {
        var fields = [("ETag", key.entityTag), ("Cache-Control", "public, max-age=\(maxAge)")]
        if !vary.isEmpty { fields.append(("Vary", vary.joined(separator: ", "))) }
        if let lastModified { fields.append(("Last-Modified", lastModified)) }
        if let allowOrigin { fields += Self.corsHeaders(allowOrigin) }
        return fields
    }

    /// `bitmap` encoded as this job asks, on `pipeline`'s threads: in the
    /// format `encoding` chooses for it, grey for a greyscale source, and
    /// with `max_bytes`, saved again at lower qualities until it fits
    /// (imgproxy's `saveImageToFitBytes`: from the format's quality down by a
    /// quarter, a half or three quarters by how far over it is, stopping at 10;
    /// the last try is the answer even when over).
    func encode(
        _ bitmap: Bitmap, pipeline: ImagePipeline, priority: ImageRequest.Priority, label: String
    ) async throws(VipsError) -> EncodedImage {
        let format = encoding.format(for: bitmap)
        let grey = bitmap.source.map { Self.isGreyscale($0.info) } ?? false
        var output = encoding.outputFormat(format)
        while true {
            let encoded = try await pipeline.encode(
                bitmap, as: output, keepingMetadata: keepsMetadata, background: background,
                keepingColorProfile: encoding.keepsColorProfile, greyscale: grey, priority: priority, label: label)
            guard encoding.maxBytes > 0, format.hasQuality, let quality = output.quality,
                encoded.data.count > encoding.maxBytes, quality > 10
            else { return encoded }
            let excess = Double(encoded.data.count) / Double(encoding.maxBytes)
            let factor = excess > 3 ? 0.25 : excess > 1.5 ? 0.5 : 0.75
            let lowered = Int((Double(quality) * factor).rounded())
            output = output.withQuality(max(1, min(quality - 1, lowered)))
        }
    }

    /// Whether a source header is greyscale: one band, or two with alpha.
    static func isGreyscale(_ info: ImageInfo) -> Bool {
        info.bands == 1 || (info.bands == 2 && info.hasAlpha)
    }

    /// How long a cached response of this job may be served; nil for as long
    /// as it is kept (a local source's key changes with the file).
    var cacheLifetime: Int? { isRemote ? maxAge : nil }

    /// The 200 response for `body`, encoded as `format`.
    func response(body: Data, format: ImageFormat) -> HTTPResponse? {
        HTTPResponse(
            status: 200, body: body,
            headers: headers + [("Content-Type", Self.contentType(format)), ("X-Content-Type-Options", "nosniff")]
                + (disposition.map { [("Content-Disposition", $0.value(for: format))] } ?? [])
                // A source's own bytes (raw:1) may be an SVG with scripts: imgproxy's stream handler's policy.
                + (unprocessed == .raw ? [("Content-Security-Policy", Self.rawContentSecurityPolicy)] : []))
    }

    /// The `Content-Security-Policy` of a `raw:1` answer, imgproxy's.
    static let rawContentSecurityPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"

    /// The 304 response.
    func notModified() -> HTTPResponse? {
        HTTPResponse(status: 304, headers: headers)
    }

    /// The CORS header fields for `origin`, as imgproxy sends them.
    static func corsHeaders(_ origin: String) -> [(String, String)] {
        [("Access-Control-Allow-Origin", origin), ("Access-Control-Allow-Methods", "GET, OPTIONS")]
    }

    /// The media type of an output format.
    static func contentType(_ format: ImageFormat) -> String {
        switch format {
        case .jpeg: return "image/jpeg"
        case .png: return "image/png"
        case .webp: return "image/webp"
        case .avif: return "image/avif"
        case .gif: return "image/gif"
        case .jxl: return "image/jxl"
        case .heif: return "image/heif"
        case .tiff: return "image/tiff"
        case .bmp: return "image/bmp"
        case .ico: return "image/x-icon"
        default: return "application/octet-stream"
        }
    }
}
