import VipsCore

/// `vipsload --version`: this release and the libvips it runs against.
enum Version {
    /// The VipsLoad release this binary was built from.
    static let vipsLoad = "0.1.0"

    /// "vipsload 0.1.0 (VipsLoad 0.1.0, libvips 8.14.1)".
    static var text: String {
        "vipsload \(vipsLoad) (VipsLoad \(vipsLoad), libvips \(VipsRuntime.libraryVersion))"
    }
}
