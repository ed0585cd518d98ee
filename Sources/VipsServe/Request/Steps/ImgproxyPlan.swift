import VipsLoad

/// imgproxy's geometry as the decode's plan: from the source's header (its
/// upright size, turned by the URL's rotation), imgproxy's crop before
/// resizing (at the crop gravity, in source pixels) and its scaled size
/// (`ImgproxyGeometry`), in the orientation before the rotation that follows
/// the decode. The decoder shrinks on load as far as the scaled size allows
/// and cuts the crop at the shrunk scale, as imgproxy does, so no URL is
/// decoded at full size unless its output needs every pixel.
///
/// A smart gravity (`sm`) finds the crop, and fill's result crop, from the
/// pixels; the compass and focus-point result crops are `ResultCrop`'s, after
/// the rotation, as in imgproxy.
struct ImgproxyPlan: ImageGeometry {
    let options: ProcessingOptions

    var identifier: String { "imgproxy(\(options.canonicalSegments.joined(separator: "/")))" }

    func plan(for info: ImageInfo) -> DecodePlan {
        let turned = options.rotate % 180 == 90
        // imgproxy's frame: upright, then rotated.
        let (width, height) = turned ? (info.height, info.width) : (info.width, info.height)
        let geometry = ImgproxyGeometry(options: options, sourceWidth: width, sourceHeight: height)
        var crop: DecodePlan.Crop?
        let cropWidth = min(width, ImgproxyGeometry.minNonZero(geometry.cropWidth, width))
        let cropHeight = min(height, ImgproxyGeometry.minNonZero(geometry.cropHeight, height))
        if cropWidth < width || cropHeight < height {
            let gravity = options.cropGravity ?? options.gravity
            if gravity.kind == .smart {
                crop = .smart(
                    width: turned ? cropHeight : cropWidth, height: turned ? cropWidth : cropHeight,
                    gravity: .attention)
            } else {
                let origin = ImgproxyGeometry.position(
                    outer: (width, height), inner: (cropWidth, cropHeight), gravity: gravity, dpr: 1)
                let rect = Self.unrotated(
                    x: origin.x, y: origin.y, width: cropWidth, height: cropHeight, outer: (width, height),
                    rotate: options.rotate)
                crop = .rect(x: rect.x, y: rect.y, width: rect.width, height: rect.height)
            }
        }
        let scaledWidth = max(1, geometry.scaledWidth), scaledHeight = max(1, geometry.scaledHeight)
        var plan = DecodePlan(
            crop: crop, width: turned ? scaledHeight : scaledWidth, height: turned ? scaledWidth : scaledHeight)
        // A smart result crop is found from the pixels, before the rotation (the others are ResultCrop's, after it).
        let resultWidth = min(scaledWidth, ImgproxyGeometry.minNonZero(geometry.resultCropWidth, scaledWidth))
        let resultHeight = min(scaledHeight, ImgproxyGeometry.minNonZero(geometry.resultCropHeight, scaledHeight))
        if options.gravity.kind == .smart, resultWidth < scaledWidth || resultHeight < scaledHeight {
            plan.resultCrop = .smart(
                width: turned ? resultHeight : resultWidth, height: turned ? resultWidth : resultHeight,
                gravity: .attention)
        }
        return plan
    }

    /// The rectangle before a clockwise `rotate` (0, 90, 180, 270) of one at
    /// (`x`, `y`) in the rotated `outer` image.
    static func unrotated(
        x: Int, y: Int, width: Int, height: Int, outer: (width: Int, height: Int), rotate: Int
    ) -> (x: Int, y: Int, width: Int, height: Int) {
        switch rotate {
        case 90: return (y, outer.width - x - width, height, width)
        case 180: return (outer.width - x - width, outer.height - y - height, width, height)
        case 270: return (outer.height - y - height, x, height, width)
        default: return (x, y, width, height)
        }
    }
}
