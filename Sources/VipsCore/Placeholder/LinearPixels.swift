import Foundation

/// A bitmap's R, G and B in linear light, one `Double` each, alpha ignored:
/// what BlurHash reads.
struct LinearPixels {
    let width: Int
    let height: Int
    /// R, G, B per pixel, rows top to bottom.
    let values: [Double]

    init(_ bitmap: Bitmap) {
        let (width, height, channels) = (bitmap.width, bitmap.height, bitmap.channels)
        let table = SRGBTransfer.linear
        var values = [Double](repeating: 0, count: width * height * 3)
        bitmap.withUnsafeBytes { bytes in
            for pixel in 0..<(width * height) {
                for channel in 0..<3 { values[pixel * 3 + channel] = table[Int(bytes[pixel * channels + channel])] }
            }
        }
        self.width = width
        self.height = height
        self.values = values
    }
}
