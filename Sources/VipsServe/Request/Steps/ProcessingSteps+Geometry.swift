import VipsCore

extension ProcessingSteps {
    /// imgproxy's crop before resizing and its scaling, on a bitmap decoded at
    /// full size (the decode cannot crop first, nor choose `auto`'s mode or
    /// place a focus point before it knows the image): the crop at its gravity,
    /// then a downscale to imgproxy's scaled size. It never enlarges (libvips'
    /// in-memory resize only shrinks): `enlarge` is ignored on this path.
    struct FullSizeResize: ImageProcessing {
        let options: ProcessingOptions

        var identifier: String { "vipsserve.fullSizeResize(\(options.canonicalSegments.joined(separator: "/")))" }

        func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let geometry = ProcessingSteps.geometry(options, for: bitmap)
            var current = bitmap
            if geometry.cropWidth > 0 || geometry.cropHeight > 0 {
                current = try ProcessingSteps.crop(
                    current, width: ImgproxyGeometry.minNonZero(geometry.cropWidth, current.width),
                    height: ImgproxyGeometry.minNonZero(geometry.cropHeight, current.height),
                    gravity: options.cropGravity ?? options.gravity, dpr: 1)
            }
            let width = max(1, geometry.scaledWidth), height = max(1, geometry.scaledHeight)
            if width < current.width || height < current.height {
                let resized = try ImageDecoder().resize(current, to: .fit(width: width, height: height), scale: 1)
                current = resized.withScale(current.scale).withSource(current.source)
            }
            return current
        }
    }

    /// imgproxy's crop of the scaled image to the result: fill's crop to the
    /// box (where the decode's own crop differs, with a dpr lowered for a small
    /// image) and fill-down's crop to the box's aspect ratio, at `gravity`
    /// (smart gravity: the centre, the decode having cropped smartly already).
    struct ResultCrop: ImageProcessing {
        let options: ProcessingOptions

        var identifier: String { "vipsserve.resultCrop(\(options.canonicalSegments.joined(separator: "/")))" }

        func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let geometry = ProcessingSteps.geometry(options, for: bitmap)
            return try ProcessingSteps.crop(
                bitmap, width: ImgproxyGeometry.minNonZero(geometry.resultCropWidth, bitmap.width),
                height: ImgproxyGeometry.minNonZero(geometry.resultCropHeight, bitmap.height),
                gravity: options.gravity, dpr: geometry.dprScale)
        }
    }
}
