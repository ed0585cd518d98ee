import CVipsShim

/// Runs libvips operations over a bitmap's pixels and materialises the
/// result as a new 8-bit sRGB bitmap: the one way geometry, processors and
/// encoders turn a `Bitmap` into a libvips image and back.
enum BitmapOperation {
    /// `body` builds lazy operations on a libvips view of `bitmap` (no copy);
    /// the result is normalised to 8-bit sRGB with 3 or 4 bands and copied out,
    /// tagged with the bitmap's scale. Failures are `kind`, named by `label`.
    static func run(
        _ bitmap: Bitmap, _ label: String,
        _ body: (VipsImageHandle) throws(VipsError) -> VipsImageHandle
    ) throws(VipsError) -> Bitmap {
        try VipsRuntime.start()
        let image = try ImageDecoder.image(wrapping: bitmap)
        let result = try withExtendedLifetime(bitmap) { () throws(VipsError) -> Bitmap in
            let output = try ImageDecoder.normalise(try body(image), label: label)
            return try ImageDecoder.materialise(output, scale: bitmap.scale, label: label)
        }
        VipsRuntime.discardErrorMessages()
        return result.carrying(bitmap)
    }

    /// The image with an alpha band added (opaque) when it has none.
    static func withAlpha(_ image: VipsImageHandle, _ label: String) throws(VipsError) -> VipsImageHandle {
        guard image.bands == 3 else { return image }
        return try image.apply(.internal, "\(label): alpha") { vl_bandjoin_const1(LibVips.table, $0, $1, 255) }
    }

    /// The `width` × `height` area at `x`, `y`.
    static func extract(
        _ image: VipsImageHandle, x: Int, y: Int, width: Int, height: Int,
        _ label: String
    ) throws(VipsError) -> VipsImageHandle {
        if x == 0, y == 0, width == image.width, height == image.height { return image }
        return try image.apply(.internal, "\(label): crop") {
            vl_extract_area(LibVips.table, $0, $1, Int32(x), Int32(y), Int32(width), Int32(height))
        }
    }
}

extension Bitmap {
    /// This bitmap's pixels with `other`'s description of its source.
    func carrying(_ other: Bitmap) -> Bitmap {
        withSource(other.source)
    }
}
