import Foundation

/// What an app or a page shows while the real image loads: a BlurHash, a
/// ThumbHash and the average colour, all computed from one small bitmap.
///
/// Make one from any bitmap with `init(_:)` (a larger one is first
/// downscaled to fit `ImagePlaceholder.side` × `side`), or let
/// `ImagePipeline.placeholder(for:)` decode the source small for it.
public struct ImagePlaceholder: Sendable, Hashable {
    /// The side, in pixels, of the box the bitmap is downscaled to fit
    /// before encoding: ThumbHash's own limit, and plenty for 4 × 3
    /// BlurHash components.
    public static let side = ThumbHash.maximumSide

    /// The BlurHash, 4 × 3 components (28 characters).
    public let blurHash: String
    /// The ThumbHash bytes (5 to 25).
    public let thumbHash: [UInt8]
    /// The average colour: the mean in linear light of the colours,
    /// weighted by alpha, written back as 8-bit sRGB; its alpha is the mean
    /// alpha. A mean in linear light is what the eye sees from afar (a mean
    /// of sRGB values comes out too dark).
    public let averageColour: Colour

    /// The ThumbHash as standard base64, the form its decoders take.
    public var thumbHashBase64: String { Data(thumbHash).base64EncodedString() }

    /// The average colour as `#rrggbb`, or `#rrggbbaa` when it is not opaque.
    public var averageColourHex: String {
        let channels =
            [averageColour.red, averageColour.green, averageColour.blue]
            + (averageColour.alpha == 255 ? [] : [averageColour.alpha])
        return "#" + channels.map { String(format: "%02x", $0) }.joined()
    }

    /// The placeholder of `bitmap`, downscaled first to fit `side` × `side`
    /// when larger (libvips, in memory).
    ///
    /// - Throws: the downscale's errors (`.internal`), which do not happen for a valid bitmap.
    public init(_ bitmap: Bitmap) throws(VipsError) {
        let small =
            max(bitmap.width, bitmap.height) > Self.side
            ? try ImageDecoder().resize(bitmap, to: .maxPixelSize(Self.side), scale: 1) : bitmap
        self.blurHash = try BlurHash.encode(small)
        self.thumbHash = try ThumbHash.encode(small)
        self.averageColour = Self.averageColour(of: small)
    }

    /// The alpha-weighted mean colour in linear light, and the mean alpha.
    private static func averageColour(of bitmap: Bitmap) -> Colour {
        let (count, channels) = (bitmap.width * bitmap.height, bitmap.channels)
        let table = SRGBTransfer.linear
        var sums = (0.0, 0.0, 0.0, 0.0)
        bitmap.withUnsafeBytes { bytes in
            for pixel in 0..<count {
                let offset = pixel * channels
                let alpha = channels == 4 ? Double(bytes[offset + 3]) / 255 : 1
                sums.0 += alpha * table[Int(bytes[offset])]
                sums.1 += alpha * table[Int(bytes[offset + 1])]
                sums.2 += alpha * table[Int(bytes[offset + 2])]
                sums.3 += alpha
            }
        }
        guard sums.3 > 0 else { return .transparent }
        func channel(_ sum: Double) -> UInt8 { UInt8(clamping: SRGBTransfer.encode(sum / sums.3)) }
        let alpha = UInt8(clamping: Int((sums.3 / Double(count) * 255).rounded()))
        return Colour(red: channel(sums.0), green: channel(sums.1), blue: channel(sums.2), alpha: alpha)
    }
}
