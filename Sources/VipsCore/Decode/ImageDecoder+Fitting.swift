extension ImageDecoder {
    /// Fits a bitmap that a format's only decoder made at the image's own size
    /// (see `DirectCodec.decodesAlone`) to `request`, as the libvips path fits
    /// a loaded image: libvips over the bitmap's memory (no copy), the fast
    /// mode's bicubic reduce or `vips_thumbnail`, upscaling when asked and
    /// within the limits. The original size returns the bitmap as it is,
    /// without starting libvips.
    func fitted(_ bitmap: Bitmap, _ request: DecodeRequest, label: String) throws(VipsError) -> Bitmap {
        guard let box = request.box else { return bitmap.withScale(request.scale) }
        let (width, height): (Int, Int)
        if request.allowUpscale {
            try checkUpscale(bitmap, box: box, label: label)
            (width, height) = (box.width, box.height)
        } else {
            (width, height) = (min(box.width, bitmap.width), min(box.height, bitmap.height))
            if width == bitmap.width && height == bitmap.height || fits(bitmap, width, height) {
                return bitmap.withScale(request.scale)
            }
        }
        let image = try Self.image(wrapping: bitmap)
        return try withExtendedLifetime(bitmap) { () throws(VipsError) -> Bitmap in
            try finish(
                image, width: width, height: height, allowUpscale: request.allowUpscale, scale: request.scale,
                label: label)
        }
    }

    /// Whether the bitmap already has the size a fit into width × height gives.
    private func fits(_ bitmap: Bitmap, _ width: Int, _ height: Int) -> Bool {
        guard
            let output = ThumbnailSize.fitting(
                width: bitmap.width, height: bitmap.height, into: (width, height), swapped: false)
        else { return true }
        return output.width == bitmap.width && output.height == bitmap.height
    }

    /// An upscaled bitmap obeys the limits too.
    private func checkUpscale(_ bitmap: Bitmap, box: (width: Int, height: Int), label: String) throws(VipsError) {
        let fit = min(Double(box.width) / Double(bitmap.width), Double(box.height) / Double(bitmap.height))
        guard fit > 1 else { return }
        func side(_ pixels: Int) -> Int { Int(min((Double(pixels) * fit).rounded(), Double(Int32.max))) }
        let output = ImageInfo(
            storedWidth: side(bitmap.width), height: side(bitmap.height), format: .bmp, bands: bitmap.channels,
            hasAlpha: bitmap.hasAlpha, orientation: 1)
        try options.limits.check(output, label: "\(label) upscaled")
    }
}
