import Foundation

/// imgproxy's size arithmetic (processing/prepare.go: `calcScale`,
/// `calcSizes`; processing/calc_position.go), for one source size: how much
/// it is scaled, what the result is cropped to, the box extend pads to, and
/// the dpr that padding and offsets scale by. The processing steps use it
/// with the source's header (upright, after rotation) so their sizes are
/// imgproxy's, whatever the decode did.
struct ImgproxyGeometry: Equatable {
    /// The crop before resizing, in source pixels (0: none on that side).
    var cropWidth = 0, cropHeight = 0
    /// The size after scaling (the crop, or the source, scaled).
    var scaledWidth = 0, scaledHeight = 0
    /// The requested box in pixels (0 on a side not given).
    var targetWidth = 0, targetHeight = 0
    /// What the scaled image is cropped to (fill's crop; fill-down's aspect crop).
    var resultCropWidth = 0, resultCropHeight = 0
    /// Scale factors from the cropped source to the scaled image.
    var widthScale = 1.0, heightScale = 1.0
    /// The dpr as imgproxy applies it: lowered so the box is never larger than
    /// the image can fill without enlarging.
    var dprScale = 1.0
    /// The canvas `extend_aspect_ratio` pads the result to (0: none).
    var extendAspectRatioWidth = 0, extendAspectRatioHeight = 0

    /// The geometry of `options` for a `width` × `height` source (upright, rotated).
    init(options: ProcessingOptions, sourceWidth width: Int, sourceHeight height: Int) {
        cropWidth = Self.cropSize(width, options.cropWidth)
        cropHeight = Self.cropSize(height, options.cropHeight)
        let widthToScale = Self.minNonZero(cropWidth, width)
        let heightToScale = Self.minNonZero(cropHeight, height)
        let sourceWidth = Double(widthToScale), sourceHeight = Double(heightToScale)
        var widthShrink = 1.0, heightShrink = 1.0
        let targetW = options.width != 0 ? Double(options.width) : sourceWidth
        let targetH = options.height != 0 ? Double(options.height) : sourceHeight
        if targetW != sourceWidth { widthShrink = sourceWidth / targetW }
        if targetH != sourceHeight { heightShrink = sourceHeight / targetH }
        if widthShrink != 1 || heightShrink != 1 {
            let type = Self.effectiveType(options, sourceWidth: sourceWidth, sourceHeight: sourceHeight)
            if options.width == 0 && type != .force {
                widthShrink = heightShrink
            } else if options.height == 0 && type != .force {
                heightShrink = widthShrink
            } else if type == .fit {
                widthShrink = max(widthShrink, heightShrink)
                heightShrink = widthShrink
            } else if type == .fill || type == .fillDown {
                widthShrink = min(widthShrink, heightShrink)
                heightShrink = widthShrink
            }
        }
        widthShrink /= options.zoomWidth
        heightShrink /= options.zoomHeight
        var dpr = options.dpr
        if !options.enlarge {
            let minShrink = min(widthShrink, heightShrink)
            if minShrink < 1 {
                widthShrink /= minShrink
                heightShrink /= minShrink
                // With extend, the composition stays the same whatever the dpr.
                if !options.extend { dpr /= minShrink }
            }
            dpr = min(dpr, min(widthShrink, heightShrink))
        }
        if options.minWidth > 0 {
            let minShrink = sourceWidth / Double(options.minWidth)
            if minShrink < widthShrink {
                heightShrink /= widthShrink / minShrink
                widthShrink = minShrink
            }
        }
        if options.minHeight > 0 {
            let minShrink = sourceHeight / Double(options.minHeight)
            if minShrink < heightShrink {
                widthShrink /= heightShrink / minShrink
                heightShrink = minShrink
            }
        }
        widthShrink /= dpr
        heightShrink /= dpr
        widthShrink = min(widthShrink, sourceWidth)
        heightShrink = min(heightShrink, sourceHeight)
        widthScale = 1 / widthShrink
        heightScale = 1 / heightShrink
        dprScale = dpr
        targetWidth = Self.scale(options.width, dpr * options.zoomWidth)
        targetHeight = Self.scale(options.height, dpr * options.zoomHeight)
        scaledWidth = Self.scale(widthToScale, widthScale)
        scaledHeight = Self.scale(heightToScale, heightScale)
        resultCropWidth = targetWidth
        resultCropHeight = targetHeight
        if options.resizingType == .fillDown, !options.enlarge, scaledWidth > 0, scaledHeight > 0 {
            let widthDifference = Double(targetWidth) / Double(scaledWidth)
            let heightDifference = Double(targetHeight) / Double(scaledHeight)
            if widthDifference > heightDifference, widthDifference > 1, targetWidth > 0 {
                resultCropHeight = Self.scale(scaledWidth, Double(targetHeight) / Double(targetWidth))
                resultCropWidth = scaledWidth
            } else if heightDifference > widthDifference, heightDifference > 1, targetHeight > 0 {
                resultCropWidth = Self.scale(scaledHeight, Double(targetWidth) / Double(targetHeight))
                resultCropHeight = scaledHeight
            }
        }
        if options.extendAspectRatio, targetWidth > 0, targetHeight > 0 {
            let outWidth = Self.minNonZero(scaledWidth, resultCropWidth)
            let outHeight = Self.minNonZero(scaledHeight, resultCropHeight)
            let widthDifference = Double(targetWidth) / Double(outWidth)
            let heightDifference = Double(targetHeight) / Double(outHeight)
            if heightDifference > widthDifference {
                extendAspectRatioHeight = Self.scale(outWidth, Double(targetHeight) / Double(targetWidth))
                extendAspectRatioWidth = outWidth
            } else if widthDifference > heightDifference {
                extendAspectRatioWidth = Self.scale(outHeight, Double(targetWidth) / Double(targetHeight))
                extendAspectRatioHeight = outHeight
            }
        }
    }

    /// `auto` resolved for a source: `fill` when the source and the box have the same orientation, else `fit`.
    static func effectiveType(
        _ options: ProcessingOptions, sourceWidth: Double, sourceHeight: Double
    ) -> ProcessingOptions.ResizingType {
        guard options.resizingType == .auto else { return options.resizingType }
        let targetW = options.width != 0 ? Double(options.width) : sourceWidth
        let targetH = options.height != 0 ? Double(options.height) : sourceHeight
        let sourceLandscape = sourceWidth - sourceHeight >= 0, targetLandscape = targetW - targetH >= 0
        return sourceLandscape == targetLandscape ? .fill : .fit
    }

    /// imgproxy's `CalcCropSize`: 0 none, ≥ 1 pixels, below 1 a fraction (at least 1 pixel).
    static func cropSize(_ size: Int, _ crop: Double) -> Int {
        if crop == 0 { return 0 }
        if crop >= 1 { return crop >= Double(Int32.max) ? Int(Int32.max) : Int(crop) }
        return max(1, scale(size, crop))
    }

    static func minNonZero(_ a: Int, _ b: Int) -> Int {
        if a == 0 { return b }
        if b == 0 { return a }
        return min(a, b)
    }

    /// `a × factor` rounded half away from zero (0 stays 0), clamped to libvips' coordinate range.
    static func scale(_ a: Int, _ factor: Double) -> Int {
        if a == 0 { return 0 }
        return clamped((Double(a) * factor).rounded())
    }

    /// `a × factor` rounded half to even.
    static func scaleToEven(_ a: Int, _ factor: Double) -> Int {
        if a == 0 { return 0 }
        return clamped((Double(a) * factor).rounded(.toNearestOrEven))
    }

    static func clamped(_ value: Double) -> Int {
        guard value.isFinite else { return value > 0 ? Int(Int32.max) : 0 }
        return Int(max(-Double(Int32.max), min(Double(Int32.max), value)))
    }

    /// imgproxy's `calcPosition` without overflow: the top-left corner of an
    /// `inner` rectangle placed in `outer` at `gravity` (smart gravity: the
    /// centre), offsets in pixels scaled by `dpr` or as fractions of `outer`.
    static func position(
        outer: (width: Int, height: Int), inner: (width: Int, height: Int), gravity: ProcessingOptions.Gravity,
        dpr: Double
    ) -> (x: Int, y: Int) {
        var left: Int, top: Int
        if gravity.kind == .focusPoint {
            left = scaleToEven(outer.width, gravity.x) - inner.width / 2
            top = scaleToEven(outer.height, gravity.y) - inner.height / 2
        } else {
            let offsetX =
                abs(gravity.x) >= 1
                ? clamped((gravity.x * dpr).rounded(.toNearestOrEven)) : scaleToEven(outer.width, gravity.x)
            let offsetY =
                abs(gravity.y) >= 1
                ? clamped((gravity.y * dpr).rounded(.toNearestOrEven)) : scaleToEven(outer.height, gravity.y)
            left = clamped((Double(outer.width - inner.width + 1) / 2).rounded(.toNearestOrEven)) + offsetX
            top = clamped((Double(outer.height - inner.height + 1) / 2).rounded(.toNearestOrEven)) + offsetY
            switch gravity.kind {
            case .north, .northEast, .northWest: top = offsetY
            case .south, .southEast, .southWest: top = outer.height - inner.height - offsetY
            default: break
            }
            switch gravity.kind {
            case .east, .northEast, .southEast: left = outer.width - inner.width - offsetX
            case .west, .northWest, .southWest: left = offsetX
            default: break
            }
        }
        left = max(0, min(left, outer.width - inner.width))
        top = max(0, min(top, outer.height - inner.height))
        return (left, top)
    }
}
