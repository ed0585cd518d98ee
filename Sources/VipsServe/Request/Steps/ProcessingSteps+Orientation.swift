import VipsCore

extension ProcessingSteps {
    /// imgproxy's turns after the resize: the decoded (upright) image back to
    /// its stored orientation when `auto_rotate` is off, then `rotate`, then
    /// `flip` (`ImgproxyFrame.turns`). The source's EXIF orientation comes from its header.
    struct Orient: ImageProcessing {
        let options: ProcessingOptions

        var identifier: String { "vipsserve.orient(\(options.canonicalSegments.joined(separator: "/")))" }

        func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let orientation = bitmap.source?.info.orientation ?? 1
            let frame = ImgproxyFrame(
                options: options, orientation: (1...8).contains(orientation) ? orientation : 1,
                stored: (bitmap.width, bitmap.height))
            var output = bitmap
            for step in frame.turns(fromUpright: true) { output = try step.process(output) }
            return output
        }
    }

    /// imgproxy's `trim`, first of all, on the stored image (libvips'
    /// `find_trim`: `ImageProcessors.Trim`), then the rest of imgproxy's
    /// geometry planned from the trimmed size (`ImgproxyPlan`) and carried out
    /// on its pixels, as imgproxy recalculates its parameters after a trim. The
    /// bitmap's source then describes the trimmed image (its size; its format,
    /// orientation and pages stay the source's), so the steps after it size
    /// themselves from it, as imgproxy's do.
    struct Trim: ImageProcessing {
        let options: ProcessingOptions

        var identifier: String { "vipsserve.trim(\(options.canonicalSegments.joined(separator: "/")))" }

        func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            guard let threshold = options.trimThreshold else { return bitmap }
            let source = bitmap.source
            var info =
                source?.info
                ?? ImageInfo(
                    width: bitmap.width, height: bitmap.height, format: .png, bands: bitmap.channels,
                    hasAlpha: bitmap.channels == 4, orientation: 1, pages: 1)
            let orientation = (1...8).contains(info.orientation) ? info.orientation : 1
            let (angle, flip) = ImgproxyFrame.angleFlip(orientation)
            // imgproxy trims the image as stored: the EXIF orientation undone first, and done again after.
            var image = bitmap
            if flip { image = try ImageProcessors.Flip(.horizontal).process(image) }
            if let back = ImageProcessors.Rotate.Angle(rawValue: (360 - angle) % 360) {
                image = try ImageProcessors.Rotate(back).process(image)
            }
            image = try ImageProcessors.Trim(
                threshold: threshold, background: options.trimColour, equalHorizontal: options.trimEqualHorizontal,
                equalVertical: options.trimEqualVertical
            ).process(image)
            if let turn = ImageProcessors.Rotate.Angle(rawValue: angle) {
                image = try ImageProcessors.Rotate(turn).process(image)
            }
            if flip { image = try ImageProcessors.Flip(.horizontal).process(image) }
            (info.width, info.height) = (image.width, image.height)
            var untrimmed = options
            untrimmed.trimThreshold = nil
            let plan = ImgproxyPlan(options: untrimmed).plan(for: info)
            return try plan.apply(to: image).withSource(
                BitmapSource(
                    info: info, decodedLeniently: source?.decodedLeniently ?? false,
                    fromDataCache: source?.fromDataCache ?? false, metadata: source?.metadata,
                    loadShrink: source?.loadShrink))
        }
    }

    /// imgproxy's `extend_aspect_ratio`: the result placed on a canvas of the
    /// box's aspect ratio (as large as the result on one side) at its gravity,
    /// filled with the background (transparent without one).
    struct ExtendAspectRatio: ImageProcessing {
        let options: ProcessingOptions
        let limit: Int

        var identifier: String { "vipsserve.extendAspectRatio(\(options.canonicalSegments.joined(separator: "/")))" }

        func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let geometry = ProcessingSteps.geometry(options, for: bitmap)
            guard geometry.extendAspectRatioWidth > 0, geometry.extendAspectRatioHeight > 0 else { return bitmap }
            let width = max(geometry.extendAspectRatioWidth, bitmap.width)
            let height = max(geometry.extendAspectRatioHeight, bitmap.height)
            guard width != bitmap.width || height != bitmap.height else { return bitmap }
            let origin = ImgproxyGeometry.position(
                outer: (width, height), inner: (bitmap.width, bitmap.height),
                gravity: options.extendAspectRatioGravity, dpr: geometry.dprScale)
            return try ProcessingSteps.embed(
                bitmap, width: width, height: height, x: origin.x, y: origin.y, background: options.background,
                limit: limit, step: "extend_aspect_ratio")
        }
    }
}
