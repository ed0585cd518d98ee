import VipsCore

extension ProcessingSteps {
    /// imgproxy's watermark (processing/watermark.go), the last step of its
    /// pipeline: the configured `WatermarkImage`, scaled when the URL asks
    /// (`WatermarkLayout`), drawn over the result at its position, or tiled
    /// over all of it, at the URL's opacity times the configured one. A
    /// scaled watermark is at most `limit` pixels a side (the result limit).
    struct Watermark: ImageProcessing {
        let options: ProcessingOptions
        let image: WatermarkImage
        let limit: Int

        var identifier: String {
            "vipsserve.watermark(\(image.identity),\(options.canonicalSegments.joined(separator: "/")))"
        }

        func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let opacity = options.watermark.opacity * image.opacity
            guard opacity > 0 else { return bitmap }
            let layout = try WatermarkLayout(
                options.watermark, result: (bitmap.width, bitmap.height),
                watermark: (image.image.width, image.image.height),
                dpr: ProcessingSteps.geometry(options, for: bitmap).dprScale)
            guard layout.width <= limit, layout.height <= limit else {
                throw VipsError(
                    .invalidArgument,
                    "watermark: scaled to \(layout.width)×\(layout.height), over the \(limit)-pixel limit")
            }
            let overlay: Bitmap
            do throws(VipsError) {
                overlay = try image.scaled(width: layout.width, height: layout.height)
            } catch {
                // The bytes decoded at start-up: only the size the URL asks for can fail.
                throw VipsError(error.kind == .tooLarge ? .invalidArgument : .internal, error.message)
            }
            return try ProcessingSteps.composite(overlay, onto: bitmap, layout: layout, opacity: opacity)
        }
    }

    /// `overlay` (the watermark at `layout`'s size) drawn over `base` where
    /// `layout` puts it, its alpha times `opacity`: Porter-Duff over, with
    /// straight alpha, each channel truncated to 8 bits as libvips'
    /// `composite` (imgproxy's) does. The result has `base`'s channels: an
    /// opaque result stays opaque, a transparent one gains coverage.
    static func composite(
        _ overlay: Bitmap, onto base: Bitmap, layout: WatermarkLayout, opacity: Double
    ) throws(VipsError) -> Bitmap {
        let width = base.width, height = base.height
        let baseChannels = base.channels, overlayChannels = overlay.channels
        let overlayWidth = overlay.width, overlayHeight = overlay.height
        var pixels = base.withUnsafeBytes { [UInt8]($0) }
        pixels.withUnsafeMutableBufferPointer { output in
            overlay.withUnsafeBytes { source in
                guard let out = output.baseAddress, let top = source.baseAddress?.assumingMemoryBound(to: UInt8.self)
                else { return }
                /// One overlay pixel over one output pixel.
                func blend(_ x: Int, _ y: Int, _ overlayX: Int, _ overlayY: Int) {
                    let s = top + (overlayY * overlayWidth + overlayX) * overlayChannels
                    let d = out + (y * width + x) * baseChannels
                    let over = (overlayChannels == 4 ? Double(s[3]) / 255 : 1) * opacity
                    guard over > 0 else { return }
                    if baseChannels == 3 {
                        // An opaque base: its coverage stays 1, no division.
                        if over >= 1 {
                            (d[0], d[1], d[2]) = (s[0], s[1], s[2])
                            return
                        }
                        let keep = 1 - over
                        for channel in 0..<3 {
                            d[channel] = Self.truncated(Double(s[channel]) * over + Double(d[channel]) * keep)
                        }
                        return
                    }
                    let under = Double(d[3]) / 255
                    let weight = under * (1 - over)
                    let covered = over + weight
                    for channel in 0..<3 {
                        d[channel] = Self.truncated((Double(s[channel]) * over + Double(d[channel]) * weight) / covered)
                    }
                    d[3] = Self.truncated(covered * 255)
                }
                switch layout.placement {
                case .at(let left, let top):
                    for y in max(0, top)..<min(height, top + overlayHeight) {
                        for x in max(0, left)..<min(width, left + overlayWidth) { blend(x, y, x - left, y - top) }
                    }
                case .tiled(let tile):
                    for y in 0..<height {
                        let overlayY = (y + tile.originY) % tile.height - tile.padTop
                        guard (0..<overlayHeight).contains(overlayY) else { continue }
                        var tileX = tile.originX % tile.width
                        for x in 0..<width {
                            let overlayX = tileX - tile.padLeft
                            if (0..<overlayWidth).contains(overlayX) { blend(x, y, overlayX, overlayY) }
                            tileX += 1
                            if tileX == tile.width { tileX = 0 }
                        }
                    }
                }
            }
        }
        return try Bitmap(width: width, height: height, channels: baseChannels, scale: base.scale, pixels: pixels)
            .withSource(base.source)
    }

    /// `value` (0–255) truncated to a byte as libvips' cast does; a hair
    /// above is added so a value that is whole in exact arithmetic stays whole.
    @inline(__always)
    static func truncated(_ value: Double) -> UInt8 {
        UInt8(max(0, min(255, value + 1e-7)))
    }
}

/// Where imgproxy's watermark goes on one result, and at what size
/// (processing/watermark.go's `prepareWatermark` and `applyWatermark`).
///
/// - Size: with a `scale`, the watermark fits (enlarged if need be) in the
///   result's size times the scale, each side rounded half to even and at
///   least 1 (imgproxy's fit at dpr 1 with enlarge); without one, its own size.
/// - A compass position: imgproxy's `calcPosition` with overflow allowed (the
///   offsets may push it partly off the result, at least a pixel staying on),
///   offsets of at least 1 in pixels times the dpr, below 1 a fraction of the
///   result's side.
/// - `re`: the watermark padded by the offsets (half before it, rounded
///   down, the rest after) into a tile, repeated an odd number of times each
///   way to cover the result, and the pattern's centre put on the result's
///   (libvips' `replicate` cut to the result).
struct WatermarkLayout: Equatable {
    /// How the copy or copies are placed.
    enum Placement: Equatable {
        /// One copy with its top-left corner at (`left`, `top`) of the result (either may be negative).
        case at(left: Int, top: Int)
        /// Copies repeated over the whole result.
        case tiled(Tile)
    }

    /// The repeated tile: the watermark at (`padLeft`, `padTop`) of a `width` ×
    /// `height` tile (transparent around it; negative padding cuts into it),
    /// and the tile pattern's pixel at the result's top-left corner.
    struct Tile: Equatable {
        var width: Int, height: Int
        var padLeft: Int, padTop: Int
        var originX: Int, originY: Int
    }

    /// The watermark's size.
    var width: Int, height: Int
    var placement: Placement

    /// The layout of `spec` on a `result`-sized image for a `watermark`-sized
    /// watermark, offsets scaled by `dpr` (imgproxy's dpr scale).
    ///
    /// - Throws: `.invalidArgument` when `re`'s negative spacing leaves no tile.
    init(
        _ spec: ProcessingOptions.Watermark, result: (width: Int, height: Int),
        watermark: (width: Int, height: Int), dpr: Double
    ) throws(VipsError) {
        (width, height) = watermark
        if spec.scale > 0 {
            var fit = ProcessingOptions()
            fit.width = max(ImgproxyGeometry.scaleToEven(result.width, spec.scale), 1)
            fit.height = max(ImgproxyGeometry.scaleToEven(result.height, spec.scale), 1)
            fit.enlarge = true
            let geometry = ImgproxyGeometry(
                options: fit, sourceWidth: watermark.width, sourceHeight: watermark.height)
            (width, height) = (max(1, geometry.scaledWidth), max(1, geometry.scaledHeight))
        }
        let offsetX = Self.offset(spec.x, side: result.width, dpr: dpr)
        let offsetY = Self.offset(spec.y, side: result.height, dpr: dpr)
        guard spec.position == .replicate else {
            placement = Self.position(
                spec.position, outer: result, inner: (width, height), offset: (offsetX, offsetY))
            return
        }
        let tileWidth = width + offsetX, tileHeight = height + offsetY
        guard tileWidth > 0, tileHeight > 0 else {
            throw VipsError(
                .invalidArgument, "watermark: the spacing \(offsetX)×\(offsetY) leaves no room for the watermark")
        }
        // An odd count each way, so one copy sits at the centre; the pattern cut to the result at its centre.
        let across = Self.odd(Self.ceilingDivision(result.width, tileWidth))
        let down = Self.odd(Self.ceilingDivision(result.height, tileHeight))
        placement = .tiled(
            Tile(
                width: tileWidth, height: tileHeight, padLeft: offsetX / 2, padTop: offsetY / 2,
                originX: (across * tileWidth - result.width) / 2, originY: (down * tileHeight - result.height) / 2))
    }

    /// An offset in pixels: at least 1 in magnitude, points times the dpr; below, a fraction of `side`.
    static func offset(_ value: Double, side: Int, dpr: Double) -> Int {
        abs(value) >= 1
            ? ImgproxyGeometry.clamped((value * dpr).rounded(.toNearestOrEven))
            : ImgproxyGeometry.scaleToEven(side, value)
    }

    /// imgproxy's `calcPosition` with overflow allowed, for a compass position.
    static func position(
        _ position: ProcessingOptions.Watermark.Position, outer: (width: Int, height: Int),
        inner: (width: Int, height: Int), offset: (x: Int, y: Int)
    ) -> Placement {
        var left = ImgproxyGeometry.clamped((Double(outer.width - inner.width + 1) / 2).rounded(.toNearestOrEven))
        var top = ImgproxyGeometry.clamped((Double(outer.height - inner.height + 1) / 2).rounded(.toNearestOrEven))
        left += offset.x
        top += offset.y
        switch position {
        case .north, .northEast, .northWest: top = offset.y
        case .south, .southEast, .southWest: top = outer.height - inner.height - offset.y
        default: break
        }
        switch position {
        case .east, .northEast, .southEast: left = outer.width - inner.width - offset.x
        case .west, .northWest, .southWest: left = offset.x
        default: break
        }
        left = max(1 - inner.width, min(left, outer.width - 1))
        top = max(1 - inner.height, min(top, outer.height - 1))
        return .at(left: left, top: top)
    }

    static func ceilingDivision(_ a: Int, _ b: Int) -> Int { (a + b - 1) / b }
    static func odd(_ count: Int) -> Int { count % 2 == 0 ? count + 1 : count }
}
