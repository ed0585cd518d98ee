import Foundation

/// An 8-bit sRGB colour with straight alpha: a background for `contain`, for
/// flattening transparency onto (JPEG output), and for shaped processors.
public struct Colour: Sendable, Hashable, CustomStringConvertible {
    /// Red, 0–255.
    public var red: UInt8
    /// Green, 0–255.
    public var green: UInt8
    /// Blue, 0–255.
    public var blue: UInt8
    /// 255 is opaque, 0 fully transparent.
    public var alpha: UInt8

    /// A colour from 8-bit channels; `alpha` 255 (the default) is opaque.
    public init(red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8 = 255) {
        (self.red, self.green, self.blue, self.alpha) = (red, green, blue, alpha)
    }

    /// Opaque white.
    public static let white = Colour(red: 255, green: 255, blue: 255)
    /// Opaque black.
    public static let black = Colour(red: 0, green: 0, blue: 0)
    /// Fully transparent (black under the alpha).
    public static let transparent = Colour(red: 0, green: 0, blue: 0, alpha: 0)

    /// Parses "white", "black", "transparent", "#rgb", "#rrggbb", "#rrggbbaa"
    /// (the "#" optional) or "r,g,b[,a]" with components 0–255.
    ///
    /// - Throws: `.invalidArgument` for anything else.
    public init(parsing text: String) throws(VipsError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        switch trimmed {
        case "white": self = .white; return
        case "black": self = .black; return
        case "transparent", "none": self = .transparent; return
        default: break
        }
        if trimmed.contains(",") {
            let parts = trimmed.split(separator: ",", omittingEmptySubsequences: false).map {
                UInt8($0.trimmingCharacters(in: .whitespaces))
            }
            guard parts.count == 3 || parts.count == 4, let r = parts[0], let g = parts[1], let b = parts[2] else {
                throw VipsError(.invalidArgument, "colour \"\(text)\" is not r,g,b[,a] with components 0–255")
            }
            let a = parts.count == 4 ? parts[3] : 255
            guard let a else { throw VipsError(.invalidArgument, "colour \"\(text)\" has a bad alpha") }
            self.init(red: r, green: g, blue: b, alpha: a)
            return
        }
        var hex = trimmed.hasPrefix("#") ? String(trimmed.dropFirst()) : trimmed
        if hex.count == 3 { hex = hex.map { "\($0)\($0)" }.joined() }
        guard hex.count == 6 || hex.count == 8, let value = UInt32(hex, radix: 16) else {
            throw VipsError(.invalidArgument, "colour \"\(text)\" is not a name, #rrggbb[aa] or r,g,b[,a]")
        }
        let full = hex.count == 6 ? value << 8 | 0xFF : value
        self.init(
            red: UInt8(full >> 24 & 0xFF), green: UInt8(full >> 16 & 0xFF), blue: UInt8(full >> 8 & 0xFF),
            alpha: UInt8(full & 0xFF))
    }

    /// Whether the colour is fully opaque.
    public var isOpaque: Bool { alpha == 255 }

    /// "#rrggbbaa".
    public var description: String {
        "#"
            + [red, green, blue, alpha].map { byte in
                let digits = String(byte, radix: 16)
                return digits.count == 1 ? "0" + digits : digits
            }.joined()
    }

    /// The bands libvips draws with: 3 for an RGB image, 4 for RGBA.
    func bands(_ count: Int) -> [Double] {
        let rgb = [Double(red), Double(green), Double(blue)]
        return count == 4 ? rgb + [Double(alpha)] : rgb
    }
}
