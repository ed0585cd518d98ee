extension VipsError.Kind {
    /// The source names a place the data loader cannot read from (for example
    /// an `http(s)` URL when no loader for it is configured, or an unknown scheme).
    public static let unsupportedSource = VipsError.Kind(rawValue: "unsupportedSource")
}
