import Foundation
import VipsCore

extension ImagePipeline {
    /// The decoded bitmap for `request`, with the source's header, where it
    /// came from and whether its data was damaged. `image(for:)` is the short form.
    ///
    /// - Throws: as `image(for:)`.
    public nonisolated(nonsending) func response(for request: ImageRequest) async throws(VipsError) -> ImageResponse {
        switch start(request) {
        case .hit(let bitmap):
            return ImageResponse(bitmap: bitmap, origin: .memoryCache)
        case .failed(let error):
            throw error
        case .task(let task):
            let bitmap = try await task.image
            return ImageResponse(bitmap: bitmap, origin: task.origin ?? .load)
        }
    }

    /// The bitmap for `request` encoded as `format`. The encode runs on the
    /// pipeline's decode threads at the request's priority, never on the
    /// caller's. With `keepingMetadata` the source's EXIF is written with its
    /// orientation reset to 1 (and the sRGB profile when it had a profile);
    /// the request is then loaded with `.keepMetadata`. By default metadata is
    /// stripped. Transparency is flattened onto `background` for JPEG.
    ///
    /// - Throws: `.invalidArgument` for format settings out of range; the
    ///   load's, decode's or processors' errors; `.encodeFailed`.
    public nonisolated(nonsending) func encodedImage(
        for request: ImageRequest, as format: OutputFormat,
        keepingMetadata: Bool = false,
        background: Colour = .white
    ) async throws(VipsError) -> EncodedImage {
        try format.validate()
        var request = request
        if keepingMetadata { request.options.insert(.keepMetadata) }
        let bitmap = try await image(for: request)
        return try await encode(
            bitmap, as: format, keepingMetadata: keepingMetadata, background: background, priority: request.priority,
            label: request.source.description)
    }

    /// `bitmap` encoded as `format` on the pipeline's decode threads, at
    /// `priority` (never on the caller's thread). Cancelling the calling task
    /// stops the encode: a queued one never starts, a running one stops at
    /// libvips' next region (an encoder call that does all its work at once,
    /// such as libheif's AVIF encode, runs to its end first). For a bitmap the caller
    /// already has, such as one whose format is chosen from its own alpha, or
    /// one decoded elsewhere. `keepingMetadata` and `background` are as for
    /// `encodedImage(for:as:keepingMetadata:background:)`, `keepingColorProfile`
    /// and `greyscale` as for `ImageEncoder.encode(_:as:keepingMetadata:background:keepingColorProfile:greyscale:)`;
    /// errors name `label`.
    ///
    /// - Throws: `.invalidArgument` for format settings out of range; `.encodeFailed`.
    public nonisolated(nonsending) func encode(
        _ bitmap: Bitmap, as format: OutputFormat, keepingMetadata: Bool = false, background: Colour = .white,
        keepingColorProfile: Bool? = nil, greyscale: Bool = false,
        priority: ImageRequest.Priority = .normal, label: String = "image"
    ) async throws(VipsError) -> EncodedImage {
        try format.validate()
        do throws(VipsError) {
            return try await engine.decodePool.runStoppable(priority: priority, label: label) {
                () throws(VipsError) -> EncodedImage in
                try ImageEncoder().encode(
                    bitmap, as: format, keepingMetadata: keepingMetadata, background: background,
                    keepingColorProfile: keepingColorProfile, greyscale: greyscale)
            }
        } catch {
            throw error.about(label)
        }
    }
}
