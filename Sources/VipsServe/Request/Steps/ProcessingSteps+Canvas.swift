import VipsCore

extension ProcessingSteps {
    /// imgproxy's `extend`: a result smaller than the box is placed on a canvas
    /// of the box's size at the extend gravity, filled with the background
    /// (transparent without one).
    struct Extend: ImageProcessing {
        let options: ProcessingOptions
        let limit: Int

        var identifier: String { "vipsserve.extend(\(options.canonicalSegments.joined(separator: "/")))" }

        func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let geometry = ProcessingSteps.geometry(options, for: bitmap)
            let width = max(geometry.targetWidth, bitmap.width), height = max(geometry.targetHeight, bitmap.height)
            guard width != bitmap.width || height != bitmap.height else { return bitmap }
            let origin = ImgproxyGeometry.position(
                outer: (width, height), inner: (bitmap.width, bitmap.height), gravity: options.extendGravity,
                dpr: geometry.dprScale)
            return try ProcessingSteps.embed(
                bitmap, width: width, height: height, x: origin.x, y: origin.y, background: options.background,
                limit: limit, step: "extend")
        }
    }

    /// imgproxy's `padding`: each side grown by its padding (scaled by the dpr,
    /// rounded to even), filled with the background (transparent without one).
    struct Padding: ImageProcessing {
        let options: ProcessingOptions
        let limit: Int

        var identifier: String { "vipsserve.padding(\(options.canonicalSegments.joined(separator: "/")))" }

        func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let dpr = ProcessingSteps.geometry(options, for: bitmap).dprScale
            let padding = options.padding
            let top = ImgproxyGeometry.scaleToEven(padding.top, dpr)
            let right = ImgproxyGeometry.scaleToEven(padding.right, dpr)
            let bottom = ImgproxyGeometry.scaleToEven(padding.bottom, dpr)
            let left = ImgproxyGeometry.scaleToEven(padding.left, dpr)
            guard top + right + bottom + left > 0 else { return bitmap }
            return try ProcessingSteps.embed(
                bitmap, width: bitmap.width + left + right, height: bitmap.height + top + bottom, x: left, y: top,
                background: options.background, limit: limit, step: "padding")
        }
    }

    /// imgproxy's flattening when a background is set: transparency composited
    /// onto it, whatever the output format.
    struct Flatten: ImageProcessing {
        let background: Colour

        var identifier: String { "vipsserve.flatten(\(background))" }

        func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            try ProcessingSteps.flatten(bitmap, onto: background)
        }
    }
}
