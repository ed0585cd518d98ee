import Foundation

/// The sRGB transfer function (IEC 61966-2-1), both ways, as the placeholder
/// encoders use it: 8-bit sRGB to linear light through a table, and linear
/// light back to 8 bits.
enum SRGBTransfer {
    /// Linear light (0–1) for each 8-bit sRGB value.
    static let linear: [Double] = (0...255).map { byte in
        let value = Double(byte) / 255
        return value <= 0.04045 ? value / 12.92 : pow((value + 0.055) / 1.055, 2.4)
    }

    /// The 8-bit sRGB value of `linear` light, clamped to 0–1 first.
    static func encode(_ linear: Double) -> Int {
        let value = linear.isNaN ? 0 : min(max(linear, 0), 1)
        let encoded = value <= 0.003_130_8 ? value * 12.92 : 1.055 * pow(value, 1 / 2.4) - 0.055
        return Int(encoded * 255 + 0.5)
    }
}
