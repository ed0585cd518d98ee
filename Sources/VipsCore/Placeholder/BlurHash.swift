import Foundation

/// The BlurHash encoding (https://blurha.sh): an image's colours as a few
/// cosine components, written as a short base-83 string that a client decodes
/// into a blurred stand-in (Wolt's reference decoders exist for most
/// platforms).
///
/// The encoder follows the reference algorithm exactly: sRGB is converted to
/// linear light, each component is the mean of the pixels times a
/// two-dimensional cosine basis (the DC term unnormalised, the AC terms
/// normalised by 2), the AC terms are quantised against their largest
/// magnitude, and the DC term is written back as sRGB. `scripts/check-placeholders.sh`
/// compares its strings with the reference `blurhash` package's.
public enum BlurHash {
    /// The component counts a BlurHash can hold on either axis.
    public static let componentRange = 1...9

    /// The BlurHash of `bitmap` with `componentsX` × `componentsY` components
    /// (4 × 3, the reference's recommendation for landscape images, unless
    /// given). BlurHash has no alpha: an RGBA bitmap is first flattened onto
    /// white exactly as VipsLoad flattens transparency for JPEG output
    /// (libvips' `flatten`, in sRGB, to 8 bits). The cost is
    /// components × pixels, so pass a small bitmap (`ImagePlaceholder` uses
    /// at most 100 × 100).
    ///
    /// - Throws: `.invalidArgument` when a component count is outside 1–9;
    ///   `.tooLarge` when there is no memory for the flattened copy of an RGBA bitmap.
    public static func encode(_ bitmap: Bitmap, componentsX: Int = 4, componentsY: Int = 3) throws(VipsError) -> String
    {
        guard componentRange.contains(componentsX), componentRange.contains(componentsY) else {
            throw VipsError(
                .invalidArgument, "BlurHash components must be 1–9 on each axis, not \(componentsX)×\(componentsY)")
        }
        var opaque = bitmap
        if bitmap.hasAlpha {
            guard let flattened = ImageEncoder.flattened(bitmap, onto: .white) else {
                throw VipsError(
                    .tooLarge, "no memory to flatten a \(bitmap.width)×\(bitmap.height) bitmap for its BlurHash")
            }
            opaque = flattened
        }
        let linear = LinearPixels(opaque)
        let (width, height) = (linear.width, linear.height)
        // The cosine bases, once per axis: cos(π·i·x / width) for every component i and column x.
        let basisX = cosineBasis(components: componentsX, samples: width)
        let basisY = cosineBasis(components: componentsY, samples: height)
        var factors: [(Double, Double, Double)] = []
        factors.reserveCapacity(componentsX * componentsY)
        // The reference's arithmetic, operation for operation (normalisation
        // times the two cosines, summed, then divided by the pixel count), so
        // that values on a quantisation boundary round as the reference's do.
        let pixelCount = Double(width * height)
        for j in 0..<componentsY {
            for i in 0..<componentsX {
                let normalisation = i == 0 && j == 0 ? 1.0 : 2.0
                var (r, g, b) = (0.0, 0.0, 0.0)
                for y in 0..<height {
                    let fy = basisY[j * height + y]
                    for x in 0..<width {
                        let basis = normalisation * basisX[i * width + x] * fy
                        let offset = (y * width + x) * 3
                        r += basis * linear.values[offset]
                        g += basis * linear.values[offset + 1]
                        b += basis * linear.values[offset + 2]
                    }
                }
                factors.append((r / pixelCount, g / pixelCount, b / pixelCount))
            }
        }

        var hash = ""
        hash.reserveCapacity(6 + 2 * factors.count)
        appendBase83((componentsX - 1) + (componentsY - 1) * 9, length: 1, to: &hash)
        let ac = factors.dropFirst()
        let maximumValue: Double
        if ac.isEmpty {
            maximumValue = 1
            appendBase83(0, length: 1, to: &hash)
        } else {
            let actualMaximum = ac.map { max(abs($0.0), abs($0.1), abs($0.2)) }.max() ?? 0
            let quantisedMaximum = clampInt((actualMaximum * 166 - 0.5).rounded(.down), 0, 82)
            maximumValue = Double(quantisedMaximum + 1) / 166
            appendBase83(quantisedMaximum, length: 1, to: &hash)
        }
        let dc = factors[0]
        let dcValue =
            (SRGBTransfer.encode(dc.0) << 16) + (SRGBTransfer.encode(dc.1) << 8) + SRGBTransfer.encode(dc.2)
        appendBase83(dcValue, length: 4, to: &hash)
        for factor in ac {
            func quantised(_ value: Double) -> Int {
                clampInt((signedSquareRoot(value / maximumValue) * 9 + 9.5).rounded(.down), 0, 18)
            }
            appendBase83(
                quantised(factor.0) * 19 * 19 + quantised(factor.1) * 19 + quantised(factor.2), length: 2, to: &hash)
        }
        return hash
    }

    /// `cos(π·i·s / samples)` for each component `i` (outer) and sample `s` (inner).
    private static func cosineBasis(components: Int, samples: Int) -> [Double] {
        var basis = [Double](repeating: 0, count: components * samples)
        for i in 0..<components {
            for s in 0..<samples {
                basis[i * samples + s] = cos(Double.pi * Double(i) * Double(s) / Double(samples))
            }
        }
        return basis
    }

    private static func signedSquareRoot(_ value: Double) -> Double {
        value < 0 ? -(-value).squareRoot() : value.squareRoot()
    }

    private static func clampInt(_ value: Double, _ lower: Int, _ upper: Int) -> Int {
        value.isNaN ? lower : Int(min(max(value, Double(lower)), Double(upper)))
    }

    /// BlurHash's 83 digits, in value order.
    private static let digits = Array(
        "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz#$%*+,-.:;=?@[]^_{|}~")

    /// Appends `value` as `length` base-83 digits, most significant first.
    private static func appendBase83(_ value: Int, length: Int, to hash: inout String) {
        var divisor = 1
        for _ in 1..<max(length, 1) { divisor *= 83 }
        for _ in 0..<length {
            hash.append(digits[(value / divisor) % 83])
            divisor /= 83
        }
    }
}
