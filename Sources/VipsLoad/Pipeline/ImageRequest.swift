import Foundation

/// What to load: a source, the size to decode it to, and how urgently.
///
/// Two requests whose `cacheKey`s are equal produce the same pixels, so the
/// pipeline decodes them once and serves both from that decode and from the
/// memory cache.
public struct ImageRequest: Sendable, Hashable, CustomStringConvertible {
    /// Where the encoded bytes come from.
    public var source: ImageSource
    /// The size to decode to, in points (pixels = points × `scale`). Default `.original`.
    public var size: TargetSize
    /// How the image is brought to `size`: fit inside it (the default), fill
    /// and crop, contain (letterbox) or stretch. Modes other than `.fit` need
    /// a box (`.fit` or `.maxPixelSize`). Part of the cache key.
    public var mode: ResizeMode
    /// Applied in order to the decoded bitmap, on the decode threads. Their
    /// identifiers are part of the cache key: a processed result is cached
    /// and coalesced under its own key, and shares the data load and the
    /// decode with every other request for the same source and geometry.
    /// Default none.
    public var processors: [any ImageProcessing]
    /// Pixels per point: the pixel box is `size` × `scale`, and the bitmap is
    /// tagged with this scale. Default 1.
    public var scale: Double
    /// How urgently the request is served relative to other waiting work.
    /// Default `.normal`. Not part of the cache key.
    public var priority: Priority
    /// Cache and decode options. Default none.
    public var options: Options
    /// Header fields sent with this request's download, merged over the
    /// pipeline's (`HTTPDataLoader.Configuration.headers`; a field set here
    /// wins). Not part of the cache key: identical requests in flight share
    /// one download, sent with the first one's fields. Default none.
    public var httpHeaders: [String: String] = [:]
    /// Asked about every redirect of this request's download before it is
    /// followed, after the pipeline's own check
    /// (`HTTPDataLoader.Configuration.allowsRedirect`, whose documentation
    /// says when and how it is called): a redirect must pass both, else the
    /// load fails with `.sourceNotAllowed` and nothing is sent to the target.
    /// For an owner that vets each request's source itself (a server's
    /// allow-list), so that a redirect cannot reach a source it would have
    /// refused. Applies to the pipeline's own HTTP loader, not to a custom
    /// `dataLoader`. Not part of the cache key or of equality: identical
    /// requests in flight share one download, checked with the first one's
    /// check (give every request of a pipeline the same one). Default nil.
    public var allowsRedirect: (@Sendable (URL) -> Bool)?
    /// The identity of the image in every cache, in place of the source's:
    /// requests with one `imageID` share memory and data-cache entries and
    /// one download, whatever their URLs (for example a signed URL whose
    /// signature changes). A file's version still applies. Default nil.
    public var imageID: String?
    /// Decides the decode from the image's header, in place of `size` and
    /// `mode`: the crop, the exact size and the result crop that depend on the
    /// image's own size or orientation (see `ImageGeometry` and `DecodePlan`).
    /// The decode still shrinks on load as far as the plan allows. Its
    /// `identifier` is part of the cache key, so equal identifiers must plan
    /// alike. `size` must be `.original` and `mode` `.fit` when it is set;
    /// `scale` only tags the bitmap. Default nil.
    public var geometry: (any ImageGeometry)?

    /// A request for `source`; every parameter but the source has its documented default.
    public init(
        source: ImageSource, size: TargetSize = .original, mode: ResizeMode = .fit, scale: Double = 1,
        priority: Priority = .normal, options: Options = [], processors: [any ImageProcessing] = []
    ) {
        self.source = source
        self.size = size
        self.mode = mode
        self.processors = processors
        self.scale = scale
        self.priority = priority
        self.options = options
    }

    /// A request for the image file at `path`.
    public init(
        path: String, size: TargetSize = .original, mode: ResizeMode = .fit, scale: Double = 1,
        priority: Priority = .normal, options: Options = [], processors: [any ImageProcessing] = []
    ) {
        self.init(
            source: .file(path), size: size, mode: mode, scale: scale, priority: priority, options: options,
            processors: processors)
    }

    /// A request for the image at `url`: `http(s)://` is downloaded (through
    /// the disk cache when one is configured), `file://` is read from disk.
    public init(
        url: URL, size: TargetSize = .original, mode: ResizeMode = .fit, scale: Double = 1,
        priority: Priority = .normal, options: Options = [], processors: [any ImageProcessing] = []
    ) {
        self.init(
            source: .url(url), size: size, mode: mode, scale: scale, priority: priority, options: options,
            processors: processors)
    }

    /// The order in which waiting work is started: higher first, first come
    /// first served within one priority.
    public enum Priority: Int, Sendable, Hashable, Comparable, CaseIterable {
        /// Work nobody waits for yet: prefetching, rows far off screen.
        case veryLow
        /// Work that may wait for everything else.
        case low
        /// The default.
        case normal
        /// Work the user is about to see.
        case high
        /// Work the user is waiting for now.
        case veryHigh

        public static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Per-request switches.
    public struct Options: OptionSet, Sendable, Hashable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        /// Do not look in the memory cache (the request is decoded, or joins an
        /// identical decode already in flight). Benchmarks use this.
        public static let disableMemoryCacheReads = Options(rawValue: 1 << 0)
        /// Do not store the result in the memory cache.
        public static let disableMemoryCacheWrites = Options(rawValue: 1 << 1)
        /// Neither read nor write the memory cache.
        public static let disableMemoryCache: Options = [.disableMemoryCacheReads, .disableMemoryCacheWrites]
        /// Enlarge images smaller than the target size (by default they keep
        /// their own size). Changes the pixels, so it is part of the cache key.
        public static let allowUpscale = Options(rawValue: 1 << 2)
        /// Keep the source's EXIF (and note its ICC profile) with the bitmap,
        /// for `ImagePipeline.encodedImage(for:as:keepingMetadata:)`. Part of
        /// the cache key (a bitmap without it cannot serve such a request).
        public static let keepMetadata = Options(rawValue: 1 << 3)
        /// Ignore cached data: skip the memory cache and the data cache when
        /// reading (the source is loaded again, a URL downloaded again), but
        /// still store the new results (pull-to-refresh). Never joins work in
        /// flight for requests without it.
        public static let reloadIgnoringCachedData = Options(rawValue: 1 << 4)
        /// Serve from the memory cache or the data cache only: a miss fails
        /// with `.notCached`, without a network request or a data loader call
        /// (offline mode). A stale data-cache entry is served as it is. Local
        /// files and in-memory data read by the pipeline itself are still read.
        public static let returnCacheDataDontLoad = Options(rawValue: 1 << 5)
        /// Do not look in the data cache (the source is loaded).
        public static let disableDataCacheReads = Options(rawValue: 1 << 6)
        /// Do not store what is loaded in the data cache.
        public static let disableDataCacheWrites = Options(rawValue: 1 << 7)
        /// Neither read nor write the data cache.
        public static let disableDataCache: Options = [.disableDataCacheReads, .disableDataCacheWrites]
        /// Show previews while a progressive JPEG downloads: as its scans
        /// complete, the scans so far are decoded at the request's size and
        /// through its processors, at most once per
        /// `ImagePipeline.Configuration.previewInterval`, and reach
        /// `ImageTask.events` (and `ImageSlot`) as `.preview`. Off by default,
        /// as in Nuke: a preview costs a decode. Baseline JPEGs (one scan,
        /// rows top to bottom: a preview would be a partly grey image, which
        /// Nuke does not show by default either) and other formats get none;
        /// interlaced PNGs too, since their passes end inside the zlib stream
        /// (finding one means inflating all that arrived, every time) and the
        /// PNG decoders here decode an interlaced image whole. Previews are
        /// decoded on the decode lane at `.veryLow` priority, behind final
        /// decodes, and never cached. Not part of the cache key.
        public static let progressivePreviews = Options(rawValue: 1 << 8)
        /// Never make this request's bitmap by downscaling a larger cached
        /// bitmap of the same source (`Configuration.resizesFromLargerCachedImages`),
        /// so its pixels depend only on the source and the request, not on what
        /// was cached before: such a downscale is close to a fresh decode but not
        /// byte-identical. A server whose strong `ETag` names the bytes needs
        /// this. A bitmap cached under the request's own key is still used. Not
        /// part of the cache key.
        public static let disableResizingFromLargerCachedImages = Options(rawValue: 1 << 9)

        /// The switches that change how the data is loaded: requests that
        /// differ in them never share a load or a decode.
        static let loadingVariant: Options = [
            .reloadIgnoringCachedData, .returnCacheDataDontLoad,
            .disableDataCacheReads, .disableDataCacheWrites
        ]
    }

    /// The identity of the pixels this request produces: source, pixel box,
    /// upscaling, resize mode and processor identifiers. Priority, cache
    /// options and the scale tag are not part of it. (Without the file's
    /// version: the pipeline adds it when it serves the request.)
    public var cacheKey: ImageCacheKey {
        ImageCacheKey(
            sourceKey: imageID ?? source.key, box: size.pixelBox(scale: scale) ?? (0, 0),
            allowUpscale: options.contains(.allowUpscale), geometry: geometryKey, processing: processingKey)
    }

    /// The mode's part of the cache key ("" for fit, which every older key means).
    var geometryKey: String {
        var key = ""
        if case .fit = mode {} else { key = mode.description }
        if let geometry { key += "plan(\(geometry.identifier))" }
        if options.contains(.keepMetadata) { key += "+metadata" }
        return key
    }

    /// The processors' part of the cache key ("" for none).
    var processingKey: String { ImageProcessors.Composition.identifier(of: processors) }

    /// Equal when every field is, processors compared by their identifiers.
    public static func == (lhs: ImageRequest, rhs: ImageRequest) -> Bool {
        lhs.source == rhs.source && lhs.size == rhs.size && lhs.mode == rhs.mode && lhs.scale == rhs.scale
            && lhs.priority == rhs.priority && lhs.options == rhs.options && lhs.processingKey == rhs.processingKey
            && lhs.httpHeaders == rhs.httpHeaders && lhs.imageID == rhs.imageID
            && lhs.geometry?.identifier == rhs.geometry?.identifier
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(source)
        hasher.combine(size)
        hasher.combine(mode)
        hasher.combine(scale)
        hasher.combine(priority)
        hasher.combine(options)
        hasher.combine(processingKey)
        hasher.combine(imageID)
        hasher.combine(geometry?.identifier)
    }

    /// The source, then the size and scale, and any priority but `.normal`.
    public var description: String {
        "\(source) @ \(geometry.map { "plan(\($0.identifier))" } ?? "\(size)")×\(scale)"
            + (geometryKey.isEmpty || geometry != nil ? "" : " \(mode)")
            + (processors.isEmpty ? "" : " [\(processingKey)]") + (priority == .normal ? "" : " (\(priority))")
    }

    /// The request checked once, with its key (including the file's current
    /// version) and pixel box; `.invalidArgument` for a size or scale no
    /// decode can produce.
    func validated() throws(VipsError) -> ValidatedRequest {
        if options.contains(.returnCacheDataDontLoad),
            !options.isDisjoint(with: [.reloadIgnoringCachedData, .disableDataCacheReads])
        {
            throw VipsError(
                .invalidArgument,
                "returnCacheDataDontLoad contradicts "
                    + (options.contains(.reloadIgnoringCachedData)
                        ? "reloadIgnoringCachedData" : "disableDataCacheReads"),
                source: source.description)
        }
        guard size.isValid, scale > 0, scale.isFinite else {
            throw VipsError(
                .invalidArgument, "target size \(size) at scale \(scale) is not a valid size",
                source: source.description)
        }
        if geometry != nil, size != .original || mode != .fit {
            throw VipsError(
                .invalidArgument, "a request with a geometry takes its size from it, not \(size) \(mode)",
                source: source.description)
        }
        do throws(VipsError) {
            try mode.validate(for: size)
            for processor in processors { try processor.validate() }
        } catch {
            throw VipsError(.invalidArgument, error.message, source: source.description, underlying: error)
        }
        let box = size.pixelBox(scale: scale) ?? (0, 0)
        let key = ImageCacheKey(
            sourceKey: imageID ?? source.key, version: source.filePath.flatMap(FileIdentity.current(of:)),
            box: box, allowUpscale: options.contains(.allowUpscale),
            geometry: geometryKey, processing: processingKey)
        return ValidatedRequest(request: self, key: key)
    }
}

extension ImageRequest {
    /// Decodes `input` as this request asks: by its geometry's plan when it
    /// has one, else to its size by its mode.
    func decode(_ input: ImageInput, with decoder: ImageDecoder, allowUpscale: Bool) throws(VipsError) -> Bitmap {
        let keepsMetadata = options.contains(.keepMetadata)
        if let geometry {
            return try decoder.decode(input, geometry: geometry, scale: scale, keepingMetadata: keepsMetadata)
        }
        return try decoder.decode(
            input, size: size, mode: mode, scale: scale, allowUpscale: allowUpscale, keepingMetadata: keepsMetadata)
    }
}
