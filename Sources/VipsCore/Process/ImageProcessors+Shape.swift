import CVipsShim
import Foundation

extension ImageProcessors {
    /// Rounds the corners with radius `radius` pixels (anti-aliased): the
    /// output has alpha, transparent outside the rounded rectangle. JPEG output
    /// flattens it onto the encoder's background.
    public struct RoundedCorners: ImageProcessing {
        /// The corners' radius in pixels (at most half the shorter side).
        public let radius: Double

        /// Rounds the corners with `radius` pixels; the output gains alpha.
        public init(radius: Double) { self.radius = radius }

        public var identifier: String { "vipsload.roundedCorners(\(radius))" }

        public func validate() throws(VipsError) {
            guard radius.isFinite, radius > 0 else {
                throw .badParameter("rounded corners", "radius \(radius) must be positive and finite")
            }
        }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            try validate()
            guard radius <= Double(min(bitmap.width, bitmap.height)) / 2 else {
                throw .badParameter(
                    "rounded corners", "radius \(radius) is larger than half the \(bitmap.width)×\(bitmap.height) image"
                )
            }
            return try ShapeMask.apply(to: bitmap, radius: radius, label: "rounded corners")
        }
    }

    /// Crops to the centred square and makes it a circle (anti-aliased,
    /// transparent outside).
    public struct Circle: ImageProcessing {
        /// Cuts the largest centred circle; the output gains alpha.
        public init() {}

        public var identifier: String { "vipsload.circle" }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let side = min(bitmap.width, bitmap.height)
            let square = try Crop(
                x: (bitmap.width - side) / 2, y: (bitmap.height - side) / 2, width: side, height: side
            )
            .process(bitmap)
            return try ShapeMask.apply(to: square, radius: Double(side) / 2, label: "circle")
        }
    }
}

/// The alpha mask of a rounded rectangle, multiplied into a bitmap's alpha.
enum ShapeMask {
    static func apply(to bitmap: Bitmap, radius: Double, label: String) throws(VipsError) -> Bitmap {
        let (width, height) = (bitmap.width, bitmap.height)
        // Coverage of each pixel centre by the rounded rectangle: distance
        // past the inner rectangle, against the radius, with a pixel of ramp.
        var mask = [UInt8](repeating: 0, count: width * height)
        let halfWidth = Double(width) / 2, halfHeight = Double(height) / 2
        for y in 0..<height {
            let dy = max(0, abs(Double(y) + 0.5 - halfHeight) - (halfHeight - radius))
            for x in 0..<width {
                let dx = max(0, abs(Double(x) + 0.5 - halfWidth) - (halfWidth - radius))
                let coverage = min(1, max(0, radius - (dx * dx + dy * dy).squareRoot() + 0.5))
                mask[y * width + x] = UInt8((coverage * 255).rounded())
            }
        }
        return try BitmapOperation.run(bitmap, label) { image throws(VipsError) in
            let copied = mask.withUnsafeBytes { bytes in
                libvips.vips_image_new_from_memory_copy(
                    bytes.baseAddress, bytes.count, Int32(width), Int32(height), 1, VIPS_FORMAT_UCHAR)
            }
            guard let copied else {
                throw VipsError(
                    .internal, "\(label): mask: \(VipsRuntime.takeErrorMessage(default: "cannot make an image"))")
            }
            let maskImage = VipsImageHandle(copied)
            let rgb = try image.apply(.internal, label) { vl_extract_bands(LibVips.table, $0, $1, 0, 3) }
            var alpha = maskImage
            if image.bands == 4 {
                // Keep the image's own transparency: alpha × mask / 255.
                let own = try image.apply(.internal, label) { vl_extract_bands(LibVips.table, $0, $1, 3, 1) }
                let product = try own.apply(.internal, label) { vl_multiply(LibVips.table, $0, maskImage.pointer, $1) }
                let scaled = try product.apply(.internal, label) { vl_linear1(LibVips.table, $0, $1, 1.0 / 255, 0) }
                alpha = try scaled.apply(.internal, label) { vl_cast(LibVips.table, $0, $1, VIPS_FORMAT_UCHAR) }
            }
            let joined = try rgb.apply(.internal, label) { vl_bandjoin2(LibVips.table, $0, alpha.pointer, $1) }
            return try joined.apply(.internal, label) {
                vl_copy_interpretation(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
            }
        }
    }
}
