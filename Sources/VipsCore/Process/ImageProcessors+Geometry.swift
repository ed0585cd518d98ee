import CVipsShim

extension ImageProcessors {
    /// Crops to a rectangle in pixels (origin top left).
    public struct Crop: ImageProcessing {
        /// The rectangle, in the processed bitmap's pixels, from its top-left corner.
        public let x: Int, y: Int, width: Int, height: Int

        /// Crops to the rectangle at (`x`, `y`) of `width`×`height`, which must lie inside the image.
        public init(x: Int, y: Int, width: Int, height: Int) {
            (self.x, self.y, self.width, self.height) = (x, y, width, height)
        }

        public var identifier: String { "vipsload.crop(\(x),\(y),\(width)x\(height))" }

        public func validate() throws(VipsError) {
            guard x >= 0, y >= 0, width > 0, height > 0 else {
                throw .badParameter(
                    "crop", "rectangle \(x),\(y) \(width)×\(height) needs a non-negative origin and a positive size")
            }
        }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            try validate()
            guard x <= bitmap.width - width, y <= bitmap.height - height else {
                throw .badParameter(
                    "crop",
                    "rectangle \(x),\(y) \(width)×\(height) lies outside the \(bitmap.width)×\(bitmap.height) image")
            }
            return try BitmapOperation.run(bitmap, "crop") { image throws(VipsError) in
                try BitmapOperation.extract(image, x: x, y: y, width: width, height: height, "crop")
            }
        }
    }

    /// Rotates clockwise by a quarter, half or three-quarter turn.
    public struct Rotate: ImageProcessing {
        /// A clockwise turn.
        public enum Angle: Int, Sendable, Hashable {
            /// Quarter turns, clockwise.
            case degrees90 = 90, degrees180 = 180, degrees270 = 270
        }

        /// How far the image turns, clockwise.
        public let angle: Angle

        /// Turns the image clockwise by `angle`.
        public init(_ angle: Angle) { self.angle = angle }

        public var identifier: String { "vipsload.rotate(\(angle.rawValue))" }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let vipsAngle: VipsAngle
            switch angle {
            case .degrees90: vipsAngle = VIPS_ANGLE_D90
            case .degrees180: vipsAngle = VIPS_ANGLE_D180
            case .degrees270: vipsAngle = VIPS_ANGLE_D270
            }
            return try BitmapOperation.run(bitmap, "rotate") { image throws(VipsError) in
                try image.apply(.internal, "rotate") { vl_rot(LibVips.table, $0, $1, vipsAngle) }
            }
        }
    }

    /// Mirrors left to right (`horizontal`) or top to bottom (`vertical`).
    public struct Flip: ImageProcessing {
        /// Which way an image is mirrored.
        public enum Axis: String, Sendable, Hashable {
            /// Left becomes right (or top becomes bottom, for `vertical`).
            case horizontal, vertical
        }

        /// Which way the image is mirrored.
        public let axis: Axis

        /// Mirrors the image along `axis`.
        public init(_ axis: Axis) { self.axis = axis }

        public var identifier: String { "vipsload.flip(\(axis.rawValue))" }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let direction = axis == .horizontal ? VIPS_DIRECTION_HORIZONTAL : VIPS_DIRECTION_VERTICAL
            return try BitmapOperation.run(bitmap, "flip") { image throws(VipsError) in
                try image.apply(.internal, "flip") { vl_flip(LibVips.table, $0, $1, direction) }
            }
        }
    }
}
