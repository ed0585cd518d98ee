import Foundation

extension ImagePipeline {
    /// How a pipeline loads, decodes and caches. Every property documents its default.
    public struct Configuration: Sendable {
        /// Decodes (and in-memory downscales) running at once, each on a
        /// dedicated thread. Default: the number of active processor cores.
        public var decodeConcurrency: Int
        /// Data loads running at once. Default 6 (what a browser opens per host).
        public var dataLoadingConcurrency: Int
        /// The step that turns a source into encoded bytes. Default `DataLoader()`
        /// (files, in-memory data and `file://` URLs).
        public var dataLoader: any ImageDataLoading
        /// Decoded bitmaps kept in memory; nil for none. Default `MemoryCache()`
        /// (20% of physical memory, at most 512 MiB).
        public var memoryCache: MemoryCache?
        /// How images are decoded: limits, strictness, allowed formats. Default `DecodeOptions()`.
        public var decodeOptions: DecodeOptions
        /// Serve a smaller request by downscaling a larger bitmap of the same
        /// source already in the memory cache instead of decoding again.
        /// Default true.
        public var resizesFromLargerCachedImages: Bool

        public init(decodeConcurrency: Int = ProcessInfo.processInfo.activeProcessorCount,
                    dataLoadingConcurrency: Int = 6,
                    dataLoader: any ImageDataLoading = DataLoader(),
                    memoryCache: MemoryCache? = MemoryCache(),
                    decodeOptions: DecodeOptions = DecodeOptions(),
                    resizesFromLargerCachedImages: Bool = true) {
            self.decodeConcurrency = max(1, decodeConcurrency)
            self.dataLoadingConcurrency = max(1, dataLoadingConcurrency)
            self.dataLoader = dataLoader
            self.memoryCache = memoryCache
            self.decodeOptions = decodeOptions
            self.resizesFromLargerCachedImages = resizesFromLargerCachedImages
        }

        /// Fail on truncated or corrupt data instead of returning a partly
        /// grey image. Default false. (Shorthand for `decodeOptions.strict`.)
        public var isStrictDecoding: Bool {
            get { decodeOptions.strict }
            set { decodeOptions.strict = newValue }
        }

        /// Largest pixel count an image may declare. Default 100 megapixels.
        /// (Shorthand for `decodeOptions.limits.maxPixelCount`.)
        public var maxPixelCount: Int {
            get { decodeOptions.limits.maxPixelCount }
            set { decodeOptions.limits.maxPixelCount = newValue }
        }
    }
}
