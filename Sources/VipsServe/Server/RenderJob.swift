import Foundation
import VipsCore
import VipsHTTP
import VipsLoad

/// One response to make: the pipeline request, how to encode its bitmap,
/// and the header fields and cache lifetime of the answer. Built on the
/// network thread from the URL (without decoding anything), made by a render.
struct RenderJob: Sendable {
    /// How the bitmap is encoded.
    enum Encoding: Sendable, Hashable {
        /// In this format.
        case format(OutputFormat)
        /// Negotiated for a client that takes neither AVIF nor WebP: PNG for
        /// a bitmap with alpha, else this JPEG.
        case sourceFamily(jpeg: OutputFormat, png: OutputFormat)

        /// The format for `bitmap`.
        func format(for bitmap: Bitmap) -> OutputFormat {
            switch self {
            case .format(let format): return format
            case .sourceFamily(let jpeg, let png): return bitmap.hasAlpha ? png : jpeg
            }
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
    let maxAge: Int
    /// Whether the format was negotiated from `Accept` (`Vary: Accept`).
    let variesByAccept: Bool
    /// Whether the source is remote: its cached responses live at most `maxAge`.
    let isRemote: Bool
    /// The URL's geometry, for the render's memory estimate.
    let geometry: RenderMemoryEstimate.Geometry
    /// The limits the source must keep (422 otherwise), checked once its bytes and header are known.
    var securityLimits = SecurityLimits()
    /// `Access-Control-Allow-Origin` (`ImageServer.Configuration.allowOrigin`); nil for none.
    var allowOrigin: String?

    /// The format the render is encoded in, when it is known before the decode.
    var knownFormat: OutputFormat? {
        if case .format(let format) = encoding { return format }
        return nil
    }

    /// The header fields every answer of this job carries (200 and 304 alike).
    var headers: [(String, String)] {
        var fields = [("ETag", key.entityTag), ("Cache-Control", "public, max-age=\(maxAge)")]
        if variesByAccept { fields.append(("Vary", "Accept")) }
        if let allowOrigin { fields += Self.corsHeaders(allowOrigin) }
        return fields
    }

    /// How long a cached response of this job may be served; nil for as long
    /// as it is kept (a local source's key changes with the file).
    var cacheLifetime: Int? { isRemote ? maxAge : nil }

    /// The 200 response for `body`, encoded as `format`.
    func response(body: Data, format: ImageFormat) -> HTTPResponse? {
        HTTPResponse(
            status: 200, body: body,
            headers: headers + [("Content-Type", Self.contentType(format)), ("X-Content-Type-Options", "nosniff")])
    }

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
        default: return "application/octet-stream"
        }
    }
}
