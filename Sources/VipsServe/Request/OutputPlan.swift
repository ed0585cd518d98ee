import VipsCore

/// How a processed image is to be encoded: what the URL asked of the encoder.
public struct OutputPlan: Sendable, Hashable {
    /// The format the URL names (`f:`, `ext:` or its extension); nil when the
    /// server chooses (from `Accept` and the source's format).
    public let format: ProcessingOptions.Format?
    /// The quality the URL asks for (1–100); nil for the format's default.
    public let quality: Int?
    /// Whether the source's metadata is kept (`strip_metadata:0`); by default it is stripped.
    public let keepsMetadata: Bool
    /// What transparency is flattened onto for formats without alpha (JPEG):
    /// the URL's background, white without one.
    public let background: Colour

    /// A plan; each parameter is the property of that name.
    public init(format: ProcessingOptions.Format?, quality: Int?, keepsMetadata: Bool, background: Colour) {
        self.format = format
        self.quality = quality
        self.keepsMetadata = keepsMetadata
        self.background = background
    }

    /// The plan `options` ask for.
    public init(_ options: ProcessingOptions) {
        self.init(
            format: options.format, quality: options.quality == 0 ? nil : options.quality,
            keepsMetadata: !options.stripMetadata, background: options.background ?? .white)
    }

    /// The encoder settings for `format` (the URL's, or the one the server chose), with the URL's quality.
    public func outputFormat(_ format: ProcessingOptions.Format) -> OutputFormat {
        format.outputFormat(quality: quality)
    }

    /// The encoder settings of the URL's own format; nil when the server chooses.
    public var outputFormat: OutputFormat? { format.map(outputFormat) }
}
