import Dispatch
import Foundation
import Synchronization
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
    /// Keep the source's metadata (`--keep-metadata`; the requests say so too, for the pipeline).
    let keepsMetadata: Bool
    /// Requests in flight at once.
    let window: Int
    /// Where inputs that must not be decoded in this process go: the worker
    /// pool, and which formats (sniffed from the first bytes; nil when
    /// unknown) it takes. Nil: the pipeline decodes everything.
    var isolation: Isolation?
    /// Where finished thumbnails are kept (`--cache-dir`); nil: nowhere.
    var cache: ThumbCache?
    /// Decodes started (`decodeCount`).
    private let decodes = DecodeCounter()

    /// `isolation`'s parts.
    struct Isolation: Sendable {
        let workers: WorkerPool
        let isolates: @Sendable (ImageFormat?) -> Bool
    }
    /// Encodes and writes; concurrent, its width bounded by `window`.
    private let encodeQueue = DispatchQueue(label: "vipsload-encode", qos: .userInitiated, attributes: .concurrent)

    init(
        pipeline: ImagePipeline, animated: Bool, keepsMetadata: Bool, window: Int,
        request: @escaping @Sendable (ImageSource) -> ImageRequest
    ) {
        self.pipeline = pipeline
        self.animated = animated
        self.keepsMetadata = keepsMetadata
        self.request = request
        self.window = max(1, window)
    }

    /// One input to make: its source, and its thumbnail's key in `cache`
    /// when it is known before loading (a local file's, from its identity).
    struct Input: Sendable {
        let source: ImageSource
        var cacheKey: String? = nil
    }

    /// What one input came to.
    enum Made: Sendable {
        /// Decoded (or failed), with the key to store its encoded thumbnail
        /// under in `cache` (nil: not stored).
        case decoded(Result<Output, VipsError>, storeKey: String?)
        /// A thumbnail `cache` held, encoded as it is written: nothing was decoded.
        case stored(Data)
    }

    /// Loads each input in `inputs`, in order of submission, and calls
    /// `finish(index, made, started)` on the encode queue for each (`started`:
    /// when the request was made, in `DispatchTime` nanoseconds); returns when
    /// every `finish` has returned.
    func run(
        _ inputs: [Input],
        finish: @escaping @Sendable (Int, Made, UInt64) -> Void
    ) async {
        guard !inputs.isEmpty else { return }
        await withTaskGroup(of: Void.self) { group in
            var next = 0
            func submit() {
                let index = next
                next += 1
                var request = self.request(inputs[index].source)
                request.options.formUnion(.disableMemoryCache)
                let cacheKey = inputs[index].cacheKey
                group.addTask {
                    let started = DispatchTime.now().uptimeNanoseconds
                    let made = await make(request, cacheKey: cacheKey)
                    await onEncodeQueue { finish(index, made, started) }
                }
            }
            while next < min(window, inputs.count) { submit() }
            while await group.next() != nil {
                if next < inputs.count { submit() }
            }
        }
    }

    /// Decodes run so far, in this process and in workers (a thumbnail from `cache` is none).
    var decodeCount: Int { decodes.value }

    /// One input: its stored thumbnail when `cache` has it, else decoded (see `decode`).
    private func make(_ request: ImageRequest, cacheKey: String?) async -> Made {
        guard let cache else { return .decoded(await decode(request), storeKey: nil) }
        if case .url(let url) = request.source.location, !url.isFileURL {
            return await makeDownload(request, url: url, cache)
        }
        guard let cacheKey else { return .decoded(await decode(request), storeKey: nil) }
        if let stored = await onEncodeQueue({ cache.thumbnail(for: cacheKey) }) { return .stored(stored) }
        return .decoded(await decode(request), storeKey: cacheKey)
    }

    /// A URL with `cache`: its original is loaded first (through the
    /// pipeline, which revalidates a stale one), so that the original's
    /// validators key its thumbnail; a stored thumbnail is used, else the
    /// same bytes are decoded.
    private func makeDownload(_ request: ImageRequest, url: URL, _ cache: ThumbCache) async -> Made {
        let data: ImageData
        do throws(VipsError) {
            data = try await pipeline.data(for: request)
        } catch {
            return .decoded(.failure(error), storeKey: nil)
        }
        let key = await onEncodeQueue { cache.key(url: url, original: pipeline.storedHTTPMetadata(for: request)) }
        if let key, let stored = await onEncodeQueue({ cache.thumbnail(for: key) }) { return .stored(stored) }
        return .decoded(await decodeDownloaded(data, request), storeKey: key)
    }

    /// Runs `body` (blocking file I/O, encoding) on the encode queue, never on Swift's cooperative pool.
    private func onEncodeQueue<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            encodeQueue.async { continuation.resume(returning: body()) }
        }
    }

    /// One input: in a worker when `isolation` takes its format, else by the pipeline.
    private func decode(_ request: ImageRequest) async -> Result<Output, VipsError> {
        if let isolation {
            switch request.source.location {
            case .file(let path) where isolation.isolates(IsolationFlags.sniff(path: path)):
                return await decodeInWorker(path: path, data: Data(), name: nil)
            case .data(let data, _) where isolation.isolates(ImageFormat.sniff(data.prefix(64))):
                return await decodeInWorker(path: nil, data: data, name: nil)
            case .url(let url) where !url.isFileURL:
                let data: ImageData
                do throws(VipsError) {
                    data = try await pipeline.data(for: request)
                } catch {
                    return .failure(error)
                }
                return await decodeDownloaded(data, request)
            default:
                break
            }
        }
        return await decodeHere(request)
    }

    /// A URL's loaded bytes (loaded through the pipeline: data cache,
    /// retries, shared loads, so that their format decides where they are
    /// decoded), decoded in a worker when `isolation` takes their format,
    /// else here; the same bytes are used, not downloaded again.
    private func decodeDownloaded(_ data: ImageData, _ request: ImageRequest) async -> Result<Output, VipsError> {
        // A download's file is a temporary or cache file: the decode is told
        // to name the URL instead, here or in a worker.
        let name = request.source.description
        var local = request
        switch data.input {
        case .file(let path):
            let result: Result<Output, VipsError>
            if isolation?.isolates(IsolationFlags.sniff(path: path)) == true {
                result = await decodeInWorker(path: path, data: Data(), name: name)
            } else {
                local.source = ImageSource.file(path).named(name)
                result = await decodeHere(local)
            }
            withExtendedLifetime(data) {}
            return result
        case .data(let bytes):
            if isolation?.isolates(ImageFormat.sniff(bytes.prefix(64))) == true {
                return await decodeInWorker(path: nil, data: bytes, name: name)
            }
            local.source = ImageSource.data(bytes, identifier: request.source.key).named(name)
            return await decodeHere(local)
        }
    }

    /// Decodes in one of `isolation`'s workers.
    private func decodeInWorker(path: String?, data: Data, name: String?) async -> Result<Output, VipsError> {
        guard let isolation else { return .failure(VipsError(.internal, "no decode workers")) }
        decodes.increment()
        return await isolation.workers.decode(
            path: path, data: data, name: name, animated: animated, keepMetadata: keepsMetadata)
    }

    /// Decodes through the pipeline: every frame with `animated`, else the still image.
    private func decodeHere(_ request: ImageRequest) async -> Result<Output, VipsError> {
        decodes.increment()
        do throws(VipsError) {
            return animated
                ? .success(.animation(try await pipeline.animatedImage(for: request)))
                : .success(.still(try await pipeline.image(for: request)))
        } catch {
            return .failure(error)
        }
    }
}

/// `ThumbEngine`'s count of decodes, shared by its copies.
private final class DecodeCounter: Sendable {
    private let count = Atomic<Int>(0)

    func increment() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}
