import Foundation

/// A codec of VipsCore's own (BMP, ICO/CUR, TGA): the only decoder of its format, reading a
/// header from the input's mapped bytes and decoding every image it accepts itself. Each one
/// supplies only `readHeader`; the mapping, `decodesAlone` and the route come from here.
protocol RasterCodec: DirectCodec {
    /// The header read from `bytes` (the whole input), or a typed error saying what is wrong with it.
    func readHeader(_ bytes: ByteView, label: String) throws(VipsError) -> Header
}

extension RasterCodec {
    var decodesAlone: Bool { true }

    /// The input mapped (a file) or borrowed (data), for as long as `body` runs.
    func withHeader<R>(
        _ input: ImageInput, options: DecodeOptions, label: String, _ body: (CodecHeader<Header>) throws(VipsError) -> R
    ) throws(VipsError) -> R {
        try input.withMappedBytes(label: label) { raw throws(VipsError) in
            try body(.read(try readHeader(ByteView(bytes: raw), label: label)))
        }
    }

    /// Always direct: there is no other decoder to hand over to.
    func route(_ header: Header, options: DecodeOptions) -> DecodeRoute { .direct }
}

/// A defect a lenient decode works around (pixel data or a mask cut short): strict mode throws
/// `error`; lenient mode goes on and counts it as this thread's warning, so the bitmap reports
/// `BitmapSource.decodedLeniently` as a lenient JPEG or PNG decode of damaged data does.
func tolerate(_ error: @autoclosure () -> VipsError, strict: Bool) throws(VipsError) {
    let error = error()
    if strict { throw error }
    VipsRuntime.countWarning(error.message)
}
