import Foundation
import VipsCore
import VipsLoad

/// A decode step outside the server's process, for the formats whose
/// decoders are not trusted (libvips marks most opt-in loaders untrusted):
/// a crash or a hang there fails one request instead of the server.
///
/// The implementation decides which formats go to it (`isolates`, the one
/// place of that policy) and decodes the source's bytes to the request's
/// size and resize mode; the server then applies the request's processors,
/// encodes, and caches as for any other response. `vipsload serve` fills it
/// with its pool of decode worker processes (`--isolate`).
public protocol IsolatedDecoding: Sendable {
    /// Whether a source sniffed as `format` (nil when its first bytes name
    /// no known format) is decoded by `decode` instead of the pipeline.
    func isolates(_ format: ImageFormat?) -> Bool

    /// Decodes `input` (a file or bytes) as `request` asks: its size, scale,
    /// resize mode, `.allowUpscale` and `.keepMetadata`; not its processors.
    func decode(_ input: ImageInput, for request: ImageRequest) async -> Result<Bitmap, VipsError>
}
