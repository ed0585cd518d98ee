import Dispatch
import Foundation
import VipsCore
import VipsLoad

/// Runs thumbnail jobs through one `ImagePipeline`: every input, local file,
/// URL or standard input, is loaded and decoded by the pipeline; encoding and
/// writing run on a dedicated dispatch queue, never on Swift's cooperative
/// pool, so they cannot starve the tasks that feed the pipeline.
///
/// At most `window` requests are in flight at once, so a run over a million
/// inputs holds a bounded number of tasks and decoded bitmaps.
struct ThumbEngine: Sendable {
    /// What one input became: a still image, or every frame of an animation.
    enum Output: Sendable {
        case still(Bitmap)
        case animation(AnimatedBitmap)
    }

    let pipeline: ImagePipeline
    /// The request for each source (size, mode, options).
    let request: @Sendable (ImageSource) -> ImageRequest
    /// Decode every frame of animated inputs (`--animated`).
    let animated: Bool
    /// Requests in flight at once.
    let window: Int
    /// The decode of an input that must not run in this process (`WorkerPool`),
    /// or nil for the inputs the pipeline decodes.
    var isolatedDecode: (@Sendable (ImageSource) async -> Result<Bitmap, VipsError>?)?
    /// Encodes and writes; concurrent, its width bounded by `window`.
    private let encodeQueue = DispatchQueue(label: "vipsload-encode", qos: .userInitiated, attributes: .concurrent)

    init(pipeline: ImagePipeline, animated: Bool, window: Int, request: @escaping @Sendable (ImageSource) -> ImageRequest) {
        self.pipeline = pipeline
        self.animated = animated
        self.request = request
        self.window = max(1, window)
    }

    /// Loads each source in `sources`, in order of submission, and calls
    /// `finish(index, result, started)` on the encode queue for each (`started`:
    /// when the request was made, in `DispatchTime` nanoseconds); returns when
    /// every `finish` has returned.
    func run(_ sources: [ImageSource],
             finish: @escaping @Sendable (Int, Result<Output, VipsError>, UInt64) -> Void) async {
        guard !sources.isEmpty else { return }
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            func submit() {
                let index = next
                next += 1
                var request = self.request(sources[index])
                request.options.formUnion(.disableMemoryCache)
                let animated = self.animated
                let source = sources[index]
                let isolatedDecode = self.isolatedDecode
                group.addTask {
                    let started = DispatchTime.now().uptimeNanoseconds
                    let result: Result<Output, VipsError>
                    if let isolated = await isolatedDecode?(source) {
                        result = isolated.map { .still($0) }
                    } else {
                        do throws(VipsError) {
                            result = animated ? .success(.animation(try await pipeline.animatedImage(for: request)))
                                              : .success(.still(try await pipeline.image(for: request)))
                        } catch {
                            result = .failure(error)
                        }
                    }
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        encodeQueue.async {
                            finish(index, result, started)
                            continuation.resume()
                        }
                    }
                }
            }
            while next < min(window, sources.count) { submit() }
            while await group.next() != nil {
                if next < sources.count { submit() }
            }
        }
    }
}
