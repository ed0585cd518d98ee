/// The size a decode should produce. Sizes are in points; the pixel size is
/// points × the request's `scale` (as UIKit's `UIImage(data:scale:)`).
public enum TargetSize: Sendable, Hashable, CustomStringConvertible {
    /// The image at its own size.
    case original
    /// Fit inside a square of this many points: the longer side becomes this.
    case maxPixelSize(Int)
    /// Fit inside a width × height box, keeping the aspect ratio.
    case fit(width: Int, height: Int)

    /// The pixel box for `scale`, or nil for `.original`. Each side is at
    /// least 1 and at most `Int32.max` (libvips' coordinate type), so no size
    /// or scale can trap the conversion; a NaN scale gives 1.
    public func pixelBox(scale: Double) -> (width: Int, height: Int)? {
        func px(_ points: Int) -> Int {
            let pixels = (Double(points) * scale).rounded()
            if pixels.isNaN || pixels < 1 { return 1 }
            return pixels < Double(Int32.max) ? Int(pixels) : Int(Int32.max)
        }
        switch self {
        case .original: return nil
        case .maxPixelSize(let side): return (px(side), px(side))
        case .fit(let width, let height): return (px(width), px(height))
        }
    }

    /// Whether a valid (positive) size is described.
    var isValid: Bool {
        switch self {
        case .original: return true
        case .maxPixelSize(let side): return side > 0
        case .fit(let width, let height): return width > 0 && height > 0
        }
    }

    public var description: String {
        switch self {
        case .original: return "original"
        case .maxPixelSize(let side): return "max\(side)"
        case .fit(let width, let height): return "\(width)x\(height)"
        }
    }
}
