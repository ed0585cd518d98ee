import VipsLoad

/// imgproxy's geometry as the decode's plan: from the source's header (its
/// size and EXIF orientation), imgproxy's crop before resizing (placed in the
/// stored frame at the crop gravity turned back, as imgproxy does, then mapped
/// to the upright frame the decoder works in) and its scaled size
/// (`ImgproxyGeometry` in imgproxy's final frame: `ImgproxyFrame`), in the
/// upright frame, before the turns that follow the decode. The decoder
/// shrinks on load as far as the scaled size allows and cuts the crop at the
/// shrunk scale, as imgproxy does, so no URL is decoded at full size unless
/// its output needs every pixel (a `trim` does: it is planned from the
/// trimmed pixels, `ProcessingSteps.Trim`).
///
/// A smart gravity (`sm`) finds the crop, and fill's result crop, from the
/// pixels; the compass and focus-point result crops are `ResultCrop`'s, after
/// the turns, as in imgproxy.
struct ImgproxyPlan: ImageGeometry {
    let options: ProcessingOptions

    var identifier: String { "imgproxy(\(options.canonicalSegments.joined(separator: "/")))" }

    func plan(for info: ImageInfo) -> DecodePlan {
        // A trim needs every pixel first: `ProcessingSteps.Trim` plans the rest from the trimmed size.
        if options.trims { return .original(info) }
        // imgproxy's frames: its crop in the stored frame, its sizes in the final one (`ImgproxyFrame`).
        let frame = ImgproxyFrame(options: options, info: info)
        let geometry = frame.geometry
        let turned = frame.turnedFromUpright
        let scaledWidth = max(1, geometry.scaledWidth), scaledHeight = max(1, geometry.scaledHeight)
        var crop = frame.storedCrop().map(frame.upright)
        // Force scales each side on its own, as imgproxy's resize does: a crop of the whole image keeps the
        // decode off the fit's one scale (which lands within a pixel of the size, not on each side's scale).
        if crop == nil, geometry.widthScale != geometry.heightScale {
            crop = .rect(x: 0, y: 0, width: info.width, height: info.height)
        }
        var plan = DecodePlan(
            crop: crop, width: turned ? scaledHeight : scaledWidth, height: turned ? scaledWidth : scaledHeight)
        // A smart result crop is found from the pixels, before the turns (the others are ResultCrop's, after them).
        let resultWidth = min(scaledWidth, ImgproxyGeometry.minNonZero(geometry.resultCropWidth, scaledWidth))
        let resultHeight = min(scaledHeight, ImgproxyGeometry.minNonZero(geometry.resultCropHeight, scaledHeight))
        if options.gravity.kind == .smart, resultWidth < scaledWidth || resultHeight < scaledHeight {
            plan.resultCrop = .smart(
                width: turned ? resultHeight : resultWidth, height: turned ? resultWidth : resultHeight,
                gravity: .attention)
        }
        return plan
    }
}
