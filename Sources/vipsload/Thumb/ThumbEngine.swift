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
    /// Where inputs that must not be decoded in this process go: the worker
    /// pool, and which formats (sniffed from the first bytes; nil when
    /// unknown) it takes. Nil: the pipeline decodes everything.
    var isolation: Isolation?

    /// `isolation`'s parts.
    struct Isolation: Sendable {
        let workers: WorkerPool
        let isolates: @Sendable (ImageFormat?) -> Bool
    }
    /// Encodes and writes; concurrent, its width bounded by `window`.
    private let encodeQueue = DispatchQueue(label: "vipsload-encode", qos: .userInitiated, attributes: .concurrent)

    init(
        pipeline: ImagePipeline, animated: Bool, window: Int, request: @escaping @Sendable (ImageSource) -> ImageRequest
    ) {
        self.pipeline = pipeline
        self.animated = animated
        self.request = request
        self.window = max(1, window)
    }

    /// Loads each source in `sources`, in order of submission, and calls
    /// `finish(index, result, started)` on the encode queue for each (`started`:
    /// when the request was made, in `DispatchTime` nanoseconds); returns when
    /// every `finish` has returned.
    func run(
        _ sources: [ImageSource],
        finish: @escaping @Sendable (Int, Result<Output, VipsError>, UInt64) -> Void
    ) async {
        guard !sources.isEmpty else { return }
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            func submit() {
                let index = next
                next += 1
                var request = self.request(sources[index])
                request.options.formUnion(.disableMemoryCache)
                group.addTask {
                    let started = DispatchTime.now().uptimeNanoseconds
                    let result = await decode(request)
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

    /// One input: in a worker when `isolation` takes its format, else by the pipeline.
    private func decode(_ request: ImageRequest) async -> Result<Output, VipsError> {
        if let isolation {
            switch request.source.location {
            case .file(let path) where isolation.isolates(IsolationFlags.sniff(path: path)):
                return await isolation.workers.decode(path: path)
            case .data(let data, _) where isolation.isolates(ImageFormat.sniff(data.prefix(64))):
                return await isolation.workers.decode(path: nil, data: data)
            case .url(let url) where !url.isFileURL:
                return await decodeDownload(request, isolation)
            default:
                break
            }
        }
        return await decodeHere(request)
    }

    /// A URL's bytes are loaded first (through the pipeline: data cache,
    /// retries, shared loads), so that their format decides where they are
    /// decoded; decoded here, the same bytes are used, not downloaded again.
    private func decodeDownload(_ request: ImageRequest, _ isolation: Isolation) async -> Result<Output, VipsError> {
        let data: ImageData
        do throws(VipsError) {
            data = try await pipeline.data(for: request)
        } catch {
            return .failure(error)
        }
        let result: Result<Output, VipsError>
        var local = request
        switch data.input {
        case .file(let path):
            if isolation.isolates(IsolationFlags.sniff(path: path)) {
                result = await isolation.workers.decode(path: path)
            } else {
                local.source = .file(path)
                result = await decodeHere(local)
            }
            // A download's file is a temporary or cache file: messages name the URL instead.
            withExtendedLifetime(data) {}
            return result.mapError { $0.naming(request.source, insteadOf: path) }
        case .data(let bytes):
            if isolation.isolates(ImageFormat.sniff(bytes.prefix(64))) {
                return await isolation.workers.decode(path: nil, data: bytes)
            }
            local.source = .data(bytes, identifier: request.source.key)
            return await decodeHere(local)
        }
    }

    /// Decodes through the pipeline: every frame with `animated`, else the still image.
    private func decodeHere(_ request: ImageRequest) async -> Result<Output, VipsError> {
        do throws(VipsError) {
            return animated
                ? .success(.animation(try await pipeline.animatedImage(for: request)))
                : .success(.still(try await pipeline.image(for: request)))
        } catch {
            return .failure(error)
        }
    }
}
