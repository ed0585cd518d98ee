@testable import VipsCore

extension ImageDecoder {
    /// A decoder with `options` that sends every input through libvips, never
    /// a direct path: the reference the direct paths' tests compare against.
    static func libvipsOnly(_ options: DecodeOptions = DecodeOptions()) -> ImageDecoder {
        var decoder = ImageDecoder(options: options)
        decoder.usesDirectPaths = false
        return decoder
    }
}
