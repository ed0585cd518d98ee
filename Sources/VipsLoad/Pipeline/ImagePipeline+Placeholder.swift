import Foundation
import VipsCore

extension ImagePipeline {
    /// The placeholder (BlurHash, ThumbHash, average colour) for `request`,
    /// from a small decode of its source: what an app shows while the real
    /// image loads.
    ///
    /// The source is decoded to fit `ImagePlaceholder.side` pixels, framed as
    /// the request frames it (its mode and the aspect of its box), through the
    /// pipeline like any request (coalesced, cached, at the request's
    /// priority); the encoders then run on the decode threads. Processors are
    /// not applied: a placeholder stands for the image's colours and layout,
    /// and a processor sized in pixels would not scale down with it.
    ///
    /// - Throws: as `image(for:)`.
    public nonisolated(nonsending) func placeholder(
        for request: ImageRequest
    ) async throws(VipsError)
        -> ImagePlaceholder
    {
        let bitmap = try await image(for: Self.placeholderRequest(for: request))
        let result = await engine.decodePool.run(priority: request.priority) {
            () -> Result<ImagePlaceholder, VipsError> in
            Result { () throws(VipsError) -> ImagePlaceholder in try ImagePlaceholder(bitmap) }
        }
        return try result.mapError { $0.about(request.source.description) }.get()
    }

    /// `request` as the small decode a placeholder is made from: its box
    /// scaled to fit `ImagePlaceholder.side` (its aspect kept), at scale 1,
    /// without processors, geometry or metadata.
    static func placeholderRequest(for request: ImageRequest) -> ImageRequest {
        var small = request
        small.processors = []
        // The whole source's aspect, as for a request of the original.
        small.geometry = nil
        small.options.remove(.keepMetadata)
        small.scale = 1
        let side = ImagePlaceholder.side
        if request.size.isBox, let box = request.size.pixelBox(scale: request.scale) {
            let longer = max(box.width, box.height)
            if longer > side {
                func scaled(_ length: Int) -> Int {
                    max(1, Int((Double(length) * Double(side) / Double(longer)).rounded()))
                }
                small.size = .fit(width: scaled(box.width), height: scaled(box.height))
            } else {
                small.size = .fit(width: box.width, height: box.height)
            }
        } else {
            // The original, or one side given: the source's own aspect.
            small.size = .maxPixelSize(side)
        }
        return small
    }
}
