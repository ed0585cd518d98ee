import Foundation

/// Encoded image bytes ready for the decoder: in memory, or in a file that
/// libvips reads incrementally (so a large download never sits whole in memory).
///
/// Shared by every request for the same source in flight (one read serves all
/// sizes). A temporary file is removed when the last reference goes away.
public final class ImageData: Sendable {
    /// What the decoder reads.
    public let input: ImageInput
    /// Encoded size in bytes.
    public let byteCount: Int
    private let temporaryPath: String?
    /// Whether the bytes were read from the pipeline's data cache (a disk-cache
    /// hit) rather than loaded from their source.
    let isFromDataCache: Bool
    /// The data this wraps, kept alive (and its temporary file with it).
    private let wrapped: ImageData?
    /// The first bytes, when the loader or cache already read them (empty
    /// otherwise): the decoder then sniffs the format from them and does not
    /// open the file again to do so.
    let leadingBytes: [UInt8]
    /// The `ETag` and `Last-Modified` of the HTTP response the bytes came
    /// from (for a data-cache hit, the ones stored with the entry, as last
    /// revalidated); nil for a local source, data in memory, a custom
    /// loader's result, or a response that had neither.
    public let validators: HTTPValidators?

    /// Encoded bytes for the decoder, as a loader returns them.
    ///
    /// - Parameters:
    ///   - input: the bytes: a file the decoder reads, or data in memory.
    ///   - byteCount: the encoded size in bytes.
    ///   - removingFileOnRelease: true when `input` is a temporary file
    ///     this object owns and deletes when released.
    public convenience init(input: ImageInput, byteCount: Int, removingFileOnRelease: Bool = false) {
        self.init(input: input, byteCount: byteCount, leadingBytes: [], removingFileOnRelease: removingFileOnRelease)
    }

    /// Data whose first bytes the loader or cache has read already.
    init(
        input: ImageInput, byteCount: Int, leadingBytes: [UInt8], removingFileOnRelease: Bool = false,
        validators: HTTPValidators? = nil
    ) {
        self.input = input
        self.byteCount = byteCount
        self.leadingBytes = leadingBytes
        self.validators = validators
        isFromDataCache = false
        wrapped = nil
        if removingFileOnRelease, case .file(let path) = input {
            temporaryPath = path
        } else {
            temporaryPath = nil
        }
    }

    /// The same bytes, marked as read from the data cache, with the
    /// validators the entry was stored with (`data`'s own when nil).
    init(fromDataCache data: ImageData, validators: HTTPValidators? = nil) {
        input = data.input
        byteCount = data.byteCount
        temporaryPath = nil
        isFromDataCache = true
        leadingBytes = data.leadingBytes
        self.validators = validators ?? data.validators
        wrapped = data
    }

    /// The same bytes with the validators of the response that delivered
    /// or revalidated them; `data` itself when `validators` is nil.
    static func with(_ validators: HTTPValidators?, _ data: ImageData) -> ImageData {
        guard let validators, !validators.isEmpty, validators != data.validators else { return data }
        return ImageData(data, validators: validators)
    }

    private init(_ data: ImageData, validators: HTTPValidators) {
        input = data.input
        byteCount = data.byteCount
        temporaryPath = nil
        isFromDataCache = data.isFromDataCache
        leadingBytes = data.leadingBytes
        self.validators = validators
        wrapped = data
    }

    deinit {
        if let temporaryPath { unlink(temporaryPath) }
    }

    /// The bytes, read into memory when they are in a file (for callers that
    /// hand them on whole, such as a stored thumbnail or response).
    ///
    /// - Throws: `.io` when the file cannot be read.
    public func contents() throws(VipsError) -> Data {
        switch input {
        case .data(let bytes):
            return bytes
        case .file(let path):
            guard let bytes = FileManager.default.contents(atPath: path) else {
                throw VipsError(.io, "cannot read \(path)")
            }
            return bytes
        }
    }
}

/// The step that turns an `ImageSource` into encoded bytes.
///
/// One protocol, one default implementation (`DataLoader`); the pipeline calls
/// it once per source in flight, however many requests share that source.
/// Implementations throw whatever they meet (Foundation's file and URL errors,
/// `CancellationError`, a `VipsError` of their own) and must stop their work
/// promptly on cancel; the pipeline reports a failure once, as a `VipsError`
/// about the source (`VipsError.init(loading:source:)`: the error itself is its
/// `underlying`). The "Custom loaders" article shows one.
public protocol ImageDataLoading: Sendable {
    /// Loads the encoded bytes for `source`.
    ///
    /// - Throws: any error; the pipeline's callers get it as a `VipsError`
    ///   (`VipsError.init(loading:source:)`), a `VipsError` as it is thrown.
    func loadData(for source: ImageSource) async throws -> ImageData

    /// The loader's network and disk-cache counters, which
    /// `ImagePipeline.metrics` includes; nil (the default) for a loader that
    /// keeps none.
    var networkMetrics: HTTPLoaderMetrics? { get }
}

extension ImageDataLoading {
    public var networkMetrics: HTTPLoaderMetrics? { nil }
}
