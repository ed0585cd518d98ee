import Dispatch
import Foundation
import VipsCore
import VipsLoad

/// Where a render's bitmap comes from: the pipeline, or, with an isolated
/// decode step (`ImageServer.Configuration.isolation`), a worker process for
/// the formats it isolates.
///
/// The source's first bytes decide: a local file's are read here, a remote
/// source is downloaded through the pipeline first (data cache, shared
/// loads), and decoded in this process from those same bytes when it stays
/// here. Cancellation reaches every step: the pipeline's load and decode,
/// and an isolated decode's worker.
struct IsolationSource: Sendable {
    let pipeline: ImagePipeline
    let isolation: (any IsolatedDecoding)?
    /// Blocking work off the cooperative pool: sniffing a file, processors
    /// after an isolated decode.
    let files: DispatchQueue

    init(pipeline: ImagePipeline, isolation: (any IsolatedDecoding)?) {
        self.pipeline = pipeline
        self.isolation = isolation
        files = DispatchQueue(label: "vipsload-serve-files", qos: .userInitiated, attributes: .concurrent)
    }

    /// The bitmap `request` asks for.
    func bitmap(for request: ImageRequest) async throws(VipsError) -> Bitmap {
        guard let isolation else { return try await pipeline.image(for: request) }
        if let path = request.source.filePath {
            guard isolation.isolates(await sniff(.file(path))) else { return try await pipeline.image(for: request) }
            return try await isolatedImage(.file(path), request, isolation)
        }
        if case .data(let bytes, _) = request.source.location {
            guard isolation.isolates(ImageFormat.sniff(bytes.prefix(64))) else {
                return try await pipeline.image(for: request)
            }
            return try await isolatedImage(.data(bytes), request, isolation)
        }
        let data = try await pipeline.data(for: request)
        defer { withExtendedLifetime(data) {} }
        if isolation.isolates(await sniff(data.input)) {
            return try await isolatedImage(data.input, request, isolation)
        }
        var local = request
        switch data.input {
        case .file(let path):
            // A download's file: its bitmap is not worth keeping under that name, and messages name the URL.
            local.source = ImageSource.file(path).named(request.source.description)
            local.options.insert(.disableMemoryCacheWrites)
        case .data(let bytes):
            local.source = ImageSource.data(bytes, identifier: request.source.key).named(request.source.description)
        }
        return try await pipeline.image(for: local)
    }

    /// An isolated decode, then the request's processors (on a queue of
    /// their own, not Swift's cooperative pool).
    private func isolatedImage(
        _ input: ImageInput, _ request: ImageRequest, _ isolation: any IsolatedDecoding
    ) async throws(VipsError) -> Bitmap {
        let decoded = try await isolation.decode(input, for: request).get()
        guard !request.processors.isEmpty else { return decoded }
        try Self.checkCancellation(request)
        let processors = request.processors
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Bitmap, VipsError>, Never>) in
            files.async {
                continuation.resume(
                    returning: Result { () throws(VipsError) -> Bitmap in
                        var bitmap = decoded
                        for processor in processors {
                            try processor.validate()
                            bitmap = try processor.process(bitmap)
                        }
                        return bitmap
                    })
            }
        }
        return try result.get()
    }

    /// Throws `.cancelled` once the calling task is cancelled.
    private static func checkCancellation(_ request: ImageRequest) throws(VipsError) {
        if Task.isCancelled { throw VipsError.cancelled(request.source.description) }
    }

    /// The format the first bytes of `input` name (a file's read on the files queue).
    func sniff(_ input: ImageInput) async -> ImageFormat? {
        switch input {
        case .data(let bytes):
            return ImageFormat.sniff(bytes.prefix(64))
        case .file(let path):
            return await withCheckedContinuation { continuation in
                files.async {
                    let handle = FileHandle(forReadingAtPath: path)
                    let prefix = (try? handle?.read(upToCount: 64)) ?? nil
                    try? handle?.close()
                    continuation.resume(returning: prefix.flatMap { ImageFormat.sniff($0) })
                }
            }
        }
    }
}
