/// A step applied to a decoded bitmap: crop, shape, filter, overlay, or
/// anything a user writes.
///
/// The `identifier` names the output: two processors with equal identifiers
/// must turn equal bitmaps into equal bitmaps. The pipeline puts the
/// identifiers of a request's processors, in order, into its cache key, so
/// processed results are cached (and coalesced) under their own keys, apart
/// from the unprocessed decode. Include every parameter in it, and a prefix
/// of your own (as `"com.example.sepia(0.8)"`).
///
/// Processors run on the pipeline's decode threads, never under a lock. A
/// bad parameter is a `VipsError` of kind `.invalidArgument`: `validate()`
/// for what can be checked before anything is loaded, `process(_:)` for what
/// depends on the image (a crop outside it, a radius larger than it).
public protocol ImageProcessing: Sendable {
    /// A stable name for what the processor does, with every parameter; part of cache keys.
    var identifier: String { get }
    /// Checks the parameters that do not depend on the image. Default: accepts everything.
    func validate() throws(VipsError)
    /// The processed bitmap.
    func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap
}

extension ImageProcessing {
    /// Accepts everything.
    public func validate() throws(VipsError) {}
}

/// The built-in processors, done by libvips: each returns an 8-bit sRGB
/// bitmap (RGBA when it gains transparency) and keeps the input's `source`.
public enum ImageProcessors {
    /// Several processors applied in order, as one: its identifier is theirs
    /// joined, and it validates every one of them.
    public struct Composition: ImageProcessing {
        /// The processors, first applied first.
        public let processors: [any ImageProcessing]

        /// The processors, applied in order.
        public init(_ processors: [any ImageProcessing]) {
            self.processors = processors
        }

        public var identifier: String { Self.identifier(of: processors) }

        public func validate() throws(VipsError) {
            for processor in processors { try processor.validate() }
        }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            var current = bitmap
            for processor in processors {
                let output = try processor.process(current)
                current = output.source == nil ? output.withSource(current.source) : output
            }
            return current
        }

        /// The identifiers of `processors`, in order, as one string ("" for none).
        public static func identifier(of processors: [any ImageProcessing]) -> String {
            processors.map(\.identifier).joined(separator: "|")
        }
    }
}

extension VipsError {
    /// A bad processor parameter.
    static func badParameter(_ processor: String, _ detail: String) -> VipsError {
        VipsError(.invalidArgument, "\(processor): \(detail)")
    }
}
