import VipsCore

extension ProcessingSteps {
    /// imgproxy's crop of the scaled image to the result, after the rotation:
    /// fill's crop to the box and fill-down's crop to the box's aspect ratio,
    /// at the URL's gravity (a smart one is the decode's: `ImgproxyPlan`).
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
