import Foundation

/// The ThumbHash encoding (https://evanw.github.io/thumbhash/): an image's
/// luminance, colour and alpha as a few cosine components in at most 25
/// bytes, which keeps the aspect ratio and alpha that BlurHash drops.
///
/// The encoder follows Evan Wallace's reference (JavaScript) exactly:
/// pixels are composited onto their own average colour and converted to
/// LPQA (luminance, yellow–blue, red–green, alpha), each channel's DCT is
/// kept up to a triangle of components (7 luminance components on the longer
/// side, 5 when there is alpha; 3 × 3 for P and Q; 5 × 5 for alpha), and the
/// AC terms are quantised to 4 bits against their largest magnitude.
/// Rounding is the reference's `Math.round` (half away from zero for the
/// non-negative values it rounds). `scripts/check-placeholders.sh` compares
/// the bytes with the `thumbhash` package's.
public enum ThumbHash {
    /// The largest side ThumbHash encodes, in pixels.
    public static let maximumSide = 100

    /// The ThumbHash of `bitmap`, 5 to 25 bytes.
    ///
    /// - Throws: `.invalidArgument` when a side exceeds `maximumSide`
    ///   (`ImagePlaceholder` downscales first).
    public static func encode(_ bitmap: Bitmap) throws(VipsError) -> [UInt8] {
        let (width, height, channels) = (bitmap.width, bitmap.height, bitmap.channels)
        guard width <= maximumSide, height <= maximumSide else {
            throw VipsError(
                .invalidArgument,
                "ThumbHash encodes at most \(maximumSide)×\(maximumSide) pixels, not \(width)×\(height)")
        }
        let count = width * height
        // The average colour, weighted by alpha. The arithmetic is the
        // reference's, operation for operation (`alpha / 255 * value`), so
        // that even a flat image's AC terms, which are rounding noise, match.
        var (averageR, averageG, averageB, averageA) = (0.0, 0.0, 0.0, 0.0)
        var rgba = [Double](repeating: 0, count: count * 4)
        bitmap.withUnsafeBytes { bytes in
            for pixel in 0..<count {
                let source = pixel * channels
                let alpha = channels == 4 ? Double(bytes[source + 3]) / 255 : 1
                for channel in 0..<3 { rgba[pixel * 4 + channel] = Double(bytes[source + channel]) }
                rgba[pixel * 4 + 3] = alpha
                averageR += alpha / 255 * rgba[pixel * 4]
                averageG += alpha / 255 * rgba[pixel * 4 + 1]
                averageB += alpha / 255 * rgba[pixel * 4 + 2]
                averageA += alpha
            }
        }
        if averageA > 0 {
            averageR /= averageA
            averageG /= averageA
            averageB /= averageA
        }
        let hasAlpha = averageA < Double(count)
        let luminanceLimit = hasAlpha ? 5.0 : 7.0
        let longer = Double(max(width, height))
        let lx = max(1, jsRound(luminanceLimit * Double(width) / longer))
        let ly = max(1, jsRound(luminanceLimit * Double(height) / longer))

        // LPQA, composited atop the average colour.
        var l = [Double](repeating: 0, count: count)
        var p = l
        var q = l
        var a = l
        for pixel in 0..<count {
            let alpha = rgba[pixel * 4 + 3]
            let r = averageR * (1 - alpha) + alpha / 255 * rgba[pixel * 4]
            let g = averageG * (1 - alpha) + alpha / 255 * rgba[pixel * 4 + 1]
            let b = averageB * (1 - alpha) + alpha / 255 * rgba[pixel * 4 + 2]
            l[pixel] = (r + g + b) / 3
            p[pixel] = (r + g) / 2 - b
            q[pixel] = r - g
            a[pixel] = alpha
        }

        let luminance = encodeChannel(l, width: width, height: height, nx: max(3, lx), ny: max(3, ly))
        let yellowBlue = encodeChannel(p, width: width, height: height, nx: 3, ny: 3)
        let redGreen = encodeChannel(q, width: width, height: height, nx: 3, ny: 3)
        let alphaChannel = hasAlpha ? encodeChannel(a, width: width, height: height, nx: 5, ny: 5) : nil

        let isLandscape = width > height
        let header24 =
            jsRound(63 * luminance.dc) | (jsRound(31.5 + 31.5 * yellowBlue.dc) << 6)
            | (jsRound(31.5 + 31.5 * redGreen.dc) << 12) | (jsRound(31 * luminance.scale) << 18)
            | ((hasAlpha ? 1 : 0) << 23)
        let header16 =
            (isLandscape ? ly : lx) | (jsRound(63 * yellowBlue.scale) << 3) | (jsRound(63 * redGreen.scale) << 9)
            | ((isLandscape ? 1 : 0) << 15)
        var hash: [UInt8] = [
            UInt8(truncatingIfNeeded: header24), UInt8(truncatingIfNeeded: header24 >> 8),
            UInt8(truncatingIfNeeded: header24 >> 16), UInt8(truncatingIfNeeded: header16),
            UInt8(truncatingIfNeeded: header16 >> 8)
        ]
        if let alphaChannel {
            hash.append(
                UInt8(truncatingIfNeeded: jsRound(15 * alphaChannel.dc) | (jsRound(15 * alphaChannel.scale) << 4)))
        }
        // The AC terms, two 4-bit values per byte, low nibble first.
        var nibbles: [Int] = []
        for channel in [luminance, yellowBlue, redGreen] + (alphaChannel.map { [$0] } ?? []) {
            nibbles += channel.ac.map { jsRound(15 * $0) }
        }
        for index in stride(from: 0, to: nibbles.count, by: 2) {
            let high = index + 1 < nibbles.count ? nibbles[index + 1] : 0
            hash.append(UInt8(truncatingIfNeeded: nibbles[index] | (high << 4)))
        }
        return hash
    }

    /// One channel's DCT: the DC term, the AC terms (mapped to 0–1 around
    /// their largest magnitude `scale`), row by row up to the triangle
    /// `cx · ny < nx · (ny − cy)`.
    private static func encodeChannel(
        _ channel: [Double], width: Int, height: Int, nx: Int, ny: Int
    ) -> (dc: Double, ac: [Double], scale: Double) {
        var dc = 0.0
        var ac: [Double] = []
        var scale = 0.0
        var fx = [Double](repeating: 0, count: width)
        for cy in 0..<ny {
            var cx = 0
            while cx * ny < nx * (ny - cy) {
                for x in 0..<width { fx[x] = cos(Double.pi / Double(width) * Double(cx) * (Double(x) + 0.5)) }
                var f = 0.0
                for y in 0..<height {
                    let fy = cos(Double.pi / Double(height) * Double(cy) * (Double(y) + 0.5))
                    for x in 0..<width { f += channel[x + y * width] * fx[x] * fy }
                }
                f /= Double(width * height)
                if cx > 0 || cy > 0 {
                    ac.append(f)
                    scale = max(scale, abs(f))
                } else {
                    dc = f
                }
                cx += 1
            }
        }
        if scale > 0 {
            ac = ac.map { 0.5 + 0.5 / scale * $0 }
        }
        return (dc, ac, scale)
    }

    /// JavaScript's `Math.round`: the nearest integer, halves rounded up.
    private static func jsRound(_ value: Double) -> Int {
        let rounded = (value + 0.5).rounded(.down)
        return rounded.isFinite ? Int(min(max(rounded, -1e9), 1e9)) : 0
    }
}
