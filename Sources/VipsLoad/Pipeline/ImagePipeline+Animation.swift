import Foundation
import VipsCore

extension ImagePipeline {
    /// Every frame of an animated GIF or WebP at `request`, each fitted to
    /// its size (points × scale) with the same geometry, with delays and loop
    /// count; a still image is one frame. The opt-in counterpart of
    /// `image(for:)`, which gives the first frame.
    ///
    /// The bytes come through the pipeline's data loading as `data(for:)`
    /// loads them (data cache, lanes, a load of the same source in flight
    /// joined); the decode runs on its decode threads at the request's priority. The
    /// frames are neither cached nor coalesced; the decoder's limits apply to
    /// all frames together. `request.mode` must be `.fit` and it must have no processors or geometry.
    ///
    /// - Throws: `.invalidArgument` for another mode, processors or a geometry; the load's and decode's errors.
    public nonisolated(nonsending) func animatedImage(
        for request: ImageRequest
    ) async throws(VipsError) -> AnimatedBitmap {
        _ = try request.validated()
        guard case .fit = request.mode, request.processors.isEmpty, request.geometry == nil else {
            throw VipsError(
                .invalidArgument, "animations are fitted, without processors or a geometry",
                source: request.source.description)
        }
        let data = try await self.data(for: request)
        let decoder = engine.decoder(for: data, named: request.source.description)
        let limit = engine.decodeTimeLimit
        let result = await engine.decodePool.run(priority: request.priority) {
            () -> Result<AnimatedBitmap, VipsError> in
            Result { () throws(VipsError) -> AnimatedBitmap in
                try withExtendedLifetime(data) { () throws(VipsError) -> AnimatedBitmap in
                    // Stopped cooperatively at the limit (the caller waits for the thread here).
                    try DecodeCancellation().run(timeLimit: limit) { () throws(VipsError) -> AnimatedBitmap in
                        try decoder.decodeAnimation(data.input, size: request.size, scale: request.scale)
                    }
                }
            }
        }
        return try result.mapError { $0.decodeError(naming: request.source.description) }.get()
    }
}
