import VipsCore

/// The parts of imgproxy's pipeline after the planned decode (`ImgproxyPlan`:
/// the crop before resizing and the resize), as processors: the turns
/// (`Orient`), the result crop (`ResultCrop`), `Extend`,
/// `ExtendAspectRatio`, `Padding` and `Flatten`; and `Trim`, which plans the
/// geometry itself from the trimmed pixels.
///
/// Each computes imgproxy's sizes (`ImgproxyGeometry`) from the source's
/// header, which the decoded bitmap carries, so the sizes are imgproxy's
/// whatever the decode produced. Each identifier holds the canonical options
/// (its sizes depend on most of them).
enum ProcessingSteps {
    /// The geometry of `options` for the source `bitmap` was decoded from: its
    /// header's size in imgproxy's final frame (`ImgproxyFrame`: the EXIF
    /// orientation when auto-rotating, the rotation; the steps run after
    /// them); without a header, the bitmap's own size.
    static func geometry(_ options: ProcessingOptions, for bitmap: Bitmap) -> ImgproxyGeometry {
        guard let info = bitmap.source?.info else {
            return ImgproxyGeometry(options: options, sourceWidth: bitmap.width, sourceHeight: bitmap.height)
        }
        return ImgproxyFrame(options: options, info: info).geometry
    }

    /// `bitmap` cropped to `width` × `height` (each at most the bitmap's) at `gravity`.
    static func crop(
        _ bitmap: Bitmap, width: Int, height: Int, gravity: ProcessingOptions.Gravity, dpr: Double
    ) throws(VipsError) -> Bitmap {
        let width = min(width, bitmap.width), height = min(height, bitmap.height)
        guard width < bitmap.width || height < bitmap.height, width > 0, height > 0 else { return bitmap }
        let origin = ImgproxyGeometry.position(
            outer: (bitmap.width, bitmap.height), inner: (width, height), gravity: gravity, dpr: dpr)
        return try ImageProcessors.Crop(x: origin.x, y: origin.y, width: width, height: height).process(bitmap)
    }

    /// `bitmap` placed at (`x`, `y`) on a `width` × `height` canvas of
    /// `background` (transparent when nil): RGBA when the bitmap or the
    /// background has alpha. Pure memory copies, row by row.
    ///
    /// - Throws: `.invalidArgument` when the canvas would be larger than `limit` on a side.
    static func embed(
        _ bitmap: Bitmap, width: Int, height: Int, x: Int, y: Int, background: Colour?, limit: Int, step: String
    ) throws(VipsError) -> Bitmap {
        guard width <= limit, height <= limit else {
            throw VipsError(
                .invalidArgument, "\(step): the result would be \(width)×\(height), over the \(limit)-pixel limit")
        }
        guard x >= 0, y >= 0, x + bitmap.width <= width, y + bitmap.height <= height else {
            throw VipsError(.invalidArgument, "\(step): the image does not fit its canvas")
        }
        let fill = background ?? .transparent
        let channels = bitmap.channels == 4 || !fill.isOpaque ? 4 : 3
        let colour: [UInt8] =
            channels == 4 ? [fill.red, fill.green, fill.blue, fill.alpha] : [fill.red, fill.green, fill.blue]
        var pixels = [UInt8](repeating: 0, count: width * height * channels)
        pixels.withUnsafeMutableBufferPointer { canvas in
            if colour.contains(where: { $0 != 0 }) {
                for offset in stride(from: 0, to: canvas.count, by: channels) {
                    for channel in 0..<channels { canvas[offset + channel] = colour[channel] }
                }
            }
            bitmap.withUnsafeBytes { source in
                guard let sourceBase = source.baseAddress, let canvasBase = canvas.baseAddress else { return }
                let rowBytes = bitmap.width * bitmap.channels
                for row in 0..<bitmap.height {
                    let from = row * rowBytes
                    let to = ((y + row) * width + x) * channels
                    if channels == bitmap.channels {
                        UnsafeMutableRawPointer(canvasBase + to).copyMemory(
                            from: sourceBase + from, byteCount: rowBytes)
                    } else {
                        // RGB onto an RGBA canvas: opaque.
                        for pixel in 0..<bitmap.width {
                            let s = from + pixel * 3, d = to + pixel * 4
                            canvas[d] = source[s]
                            canvas[d + 1] = source[s + 1]
                            canvas[d + 2] = source[s + 2]
                            canvas[d + 3] = 255
                        }
                    }
                }
            }
        }
        return try Bitmap(width: width, height: height, channels: channels, scale: bitmap.scale, pixels: pixels)
            .withSource(bitmap.source)
    }

    /// `bitmap` composited over an opaque `background`: RGB.
    static func flatten(_ bitmap: Bitmap, onto background: Colour) throws(VipsError) -> Bitmap {
        guard bitmap.channels == 4 else { return bitmap }
        let count = bitmap.width * bitmap.height
        var pixels = [UInt8](repeating: 0, count: count * 3)
        let back = [UInt32(background.red), UInt32(background.green), UInt32(background.blue)]
        pixels.withUnsafeMutableBufferPointer { output in
            bitmap.withUnsafeBytes { source in
                for pixel in 0..<count {
                    let alpha = UInt32(source[pixel * 4 + 3])
                    for channel in 0..<3 {
                        let front = UInt32(source[pixel * 4 + channel])
                        output[pixel * 3 + channel] = UInt8((front * alpha + back[channel] * (255 - alpha) + 127) / 255)
                    }
                }
            }
        }
        return try Bitmap(width: bitmap.width, height: bitmap.height, channels: 3, scale: bitmap.scale, pixels: pixels)
            .withSource(bitmap.source)
    }
}
