import CGLib
import Foundation
import VipsCore
import VipsLoad

/// The image imgproxy's `watermark` option draws on results: imgproxy's
/// `IMGPROXY_WATERMARK_DATA`, `_PATH` or `_URL`, with `_OPACITY`.
///
/// Decoded once when it is made, within the decode limits it is given, so a
/// watermark that is not an image, or is over the limits, fails at start-up
/// with a `VipsError` rather than on the first request. The sizes a `scale`
/// asks for are decoded from its bytes when first needed (as imgproxy
/// scales it, fitting and enlarging) and kept: at most 16 of them and
/// 32 MiB together, the least recently used dropped first.
///
/// Set one as `ProcessingURLParser.watermark`; a URL whose `wm` opacity is
/// above 0 then gets it. Its `identity` (the SHA-256 of its bytes, and the
/// configured opacity) is part of every watermarked variant's cache key and
/// `ETag`, so a server given another watermark makes, and tags, new results.
///
/// ```swift
/// let watermark = try await WatermarkImage.load(
///     .path("/etc/images/logo.png"), opacity: 0.8, pipeline: pipeline, sources: policy)
/// configuration.urls.watermark = watermark
/// ```
public final class WatermarkImage: Sendable {
    /// Where a watermark's bytes come from.
    public enum Source: Sendable, Hashable {
        /// A file on this machine, read as it is (imgproxy's `IMGPROXY_WATERMARK_PATH`).
        case path(String)
        /// The encoded image itself (imgproxy's `IMGPROXY_WATERMARK_DATA`, once base64-decoded).
        case data(Data)
        /// A source URL, admitted by the server's `SourcePolicy` as an image
        /// URL's source is (`local:///` under the root, allowed `http(s)://`)
        /// and loaded by the pipeline (imgproxy's `IMGPROXY_WATERMARK_URL`).
        case url(String)
    }

    /// The configured opacity, above 0 and at most 1: what a URL's own opacity is multiplied by.
    public let opacity: Double
    /// Names the watermark in cache keys and `ETag`s: "sha256:" and the
    /// SHA-256 of its encoded bytes in hex, then "@" and the opacity when it is not 1.
    public let identity: String
    /// The decoded watermark at its own size: upright 8-bit sRGB, alpha kept.
    public let image: Bitmap
    /// The encoded bytes the scaled sizes are decoded from.
    private let bytes: Data
    private let decodeOptions: DecodeOptions
    private let variants = LockedState(Variants())

    /// Variants kept at most, and their bytes together at most.
    static let variantLimit = 16
    static let variantByteLimit = 32 << 20

    /// A watermark decoded from `data` within `decodeOptions`' limits, drawn at
    /// `opacity` (times each URL's).
    ///
    /// - Throws: `.invalidArgument` for an opacity not above 0 and at most 1;
    ///   the decoder's errors (`.unsupportedFormat`, `.corruptData`,
    ///   `.tooLarge`…), their messages starting with "watermark".
    public init(data: Data, opacity: Double = 1, decodeOptions: DecodeOptions = DecodeOptions()) throws(VipsError) {
        guard opacity.isFinite, opacity > 0, opacity <= 1 else {
            throw VipsError(.invalidArgument, "watermark: the opacity \(opacity) is not above 0 and at most 1")
        }
        self.opacity = opacity
        bytes = data
        self.decodeOptions = decodeOptions
        do throws(VipsError) {
            image = try ImageDecoder(options: decodeOptions).decode(.data(data))
        } catch {
            throw VipsError(error.kind, "watermark: \(error.message)")
        }
        identity = Self.digest(data) + (opacity == 1 ? "" : "@\(opacity)")
    }

    /// A watermark read from `source` and decoded, as `init(data:opacity:decodeOptions:)`:
    /// a path is read within the decode limits' `maxInputBytes`; a URL is
    /// admitted by `sources` (every redirect too) and loaded by `pipeline`,
    /// whose decode options are the ones used.
    ///
    /// - Throws: what `init(data:opacity:decodeOptions:)` throws; `.fileNotFound`,
    ///   `.permissionDenied` or `.tooLarge` for a path; `.sourceNotAllowed`
    ///   for a URL the policy refuses, and the load's errors.
    public static func load(
        _ source: Source, opacity: Double = 1, pipeline: ImagePipeline, sources: SourcePolicy
    ) async throws(VipsError) -> WatermarkImage {
        let decodeOptions = pipeline.configuration.decodeOptions
        let data: Data
        switch source {
        case .data(let bytes):
            data = bytes
        case .path(let path):
            data = try read(path, limit: decodeOptions.limits.maxInputBytes)
        case .url(let url):
            let resolved: ImageSource
            do throws(ProcessingURLError) {
                resolved = try sources.source(for: url)
            } catch {
                throw VipsError(
                    error.reason == .sourceNotFound ? .fileNotFound : .sourceNotAllowed,
                    "watermark URL: \(error.message)")
            }
            var request = ImageRequest(source: resolved)
            request.allowsRedirect = { sources.allowsRedirect(to: $0) }
            do throws(VipsError) {
                data = try await pipeline.data(for: request).contents()
            } catch {
                throw VipsError(error.kind, "watermark URL: \(error.message)", httpStatus: error.httpStatus)
            }
        }
        return try WatermarkImage(data: data, opacity: opacity, decodeOptions: decodeOptions)
    }

    /// The bytes of the regular file at `path`, at most `limit` of them.
    private static func read(_ path: String, limit: Int) throws(VipsError) -> Data {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let kind: VipsError.Kind = errno == EACCES ? .permissionDenied : .fileNotFound
            throw VipsError(kind, "watermark: \(path): \(String(cString: strerror(errno)))")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw VipsError(.fileNotFound, "watermark: \(path): not a regular file")
        }
        guard Int(info.st_size) <= limit else {
            throw VipsError(.tooLarge, "watermark: \(path): \(info.st_size) bytes, over the \(limit)-byte limit")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw VipsError(.permissionDenied, "watermark: \(path): cannot be read")
        }
        return data
    }

    /// The watermark scaled to exactly `width` × `height` (the size imgproxy's
    /// fit gives), decoded from its bytes the first time and kept.
    ///
    /// - Throws: the decoder's errors; `.tooLarge` for a size over the decode limits.
    func scaled(width: Int, height: Int) throws(VipsError) -> Bitmap {
        if width == image.width, height == image.height { return image }
        let key = Size(width: width, height: height)
        if let kept = variants.withLock({ $0.take(key) }) { return kept }
        let bitmap: Bitmap
        do throws(VipsError) {
            bitmap = try ImageDecoder(options: decodeOptions).decode(
                .data(bytes), geometry: ExactSize(width: width, height: height))
        } catch {
            throw VipsError(error.kind, "watermark: \(error.message)")
        }
        variants.withLock { $0.keep(bitmap, for: key) }
        return bitmap
    }

    /// The variants kept, least recently used first.
    private struct Variants {
        var order: [Size] = []
        var bitmaps: [Size: Bitmap] = [:]
        var bytes = 0

        mutating func take(_ key: Size) -> Bitmap? {
            guard let bitmap = bitmaps[key] else { return nil }
            if let index = order.firstIndex(of: key) { order.append(order.remove(at: index)) }
            return bitmap
        }

        mutating func keep(_ bitmap: Bitmap, for key: Size) {
            guard bitmaps[key] == nil, bitmap.cost <= WatermarkImage.variantByteLimit else { return }
            while !order.isEmpty,
                order.count >= WatermarkImage.variantLimit || bytes + bitmap.cost > WatermarkImage.variantByteLimit
            {
                let dropped = order.removeFirst()
                bytes -= bitmaps.removeValue(forKey: dropped)?.cost ?? 0
            }
            order.append(key)
            bitmaps[key] = bitmap
            bytes += bitmap.cost
        }
    }

    /// How many variants are kept now (for tests).
    var keptVariants: Int { variants.withLock { $0.order.count } }

    private struct Size: Hashable {
        let width: Int, height: Int
    }

    /// The whole image, resized to exactly one size.
    private struct ExactSize: ImageGeometry {
        let width: Int, height: Int
        var identifier: String { "watermark(\(width)x\(height))" }
        func plan(for info: ImageInfo) -> DecodePlan { DecodePlan(width: width, height: height) }
    }

    /// "sha256:" and GLib's SHA-256 of `data` in hex.
    private static func digest(_ data: Data) -> String {
        let digest = data.withUnsafeBytes { raw -> UnsafeMutablePointer<gchar>? in
            g_compute_checksum_for_data(
                G_CHECKSUM_SHA256, raw.bindMemory(to: guchar.self).baseAddress, gsize(raw.count))
        }
        // GLib returns nil only for a checksum type it lacks: XXH3-128 then names the bytes as stably.
        guard let digest else { return "xxh3:" + XXH3.hex128(of: data) }
        defer { g_free(digest) }
        return "sha256:" + String(cString: digest)
    }
}
