import CVipsShim

extension ImageProcessors {
    /// Composites an overlay bitmap (a watermark) over the image at a compass
    /// gravity, with `opacity` 0–1 multiplied into the overlay's own alpha.
    public struct Overlay: ImageProcessing {
        /// The bitmap drawn on top (no larger than the base).
        public let overlay: Bitmap
        /// Where the overlay sits on the base.
        public let gravity: Gravity
        /// The overlay's opacity, 0 (invisible) to 1.
        public let opacity: Double
        private let contentHash: UInt64

        /// Draws `overlay` on the image at `gravity` with `opacity`.
        public init(_ overlay: Bitmap, gravity: Gravity = .southEast, opacity: Double = 1) {
            self.overlay = overlay
            self.gravity = gravity
            self.opacity = opacity
            // FNV-1a over the pixels: stable across runs, so usable in disk keys too.
            contentHash = overlay.withUnsafeBytes { bytes in
                var hash: UInt64 = 0xcbf2_9ce4_8422_2325
                for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
                return hash
            }
        }

        public var identifier: String {
            "vipsload.overlay(\(String(contentHash, radix: 16)),\(overlay.width)x\(overlay.height)x\(overlay.channels),\(gravity),\(opacity))"
        }

        public func validate() throws(VipsError) {
            guard opacity.isFinite, (0...1).contains(opacity) else {
                throw .badParameter("overlay", "opacity \(opacity) is outside 0–1")
            }
            guard !gravity.isSmart else {
                throw .badParameter("overlay", "an overlay is placed by a compass gravity, not \(gravity)")
            }
        }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            try validate()
            guard overlay.width <= bitmap.width, overlay.height <= bitmap.height else {
                throw .badParameter(
                    "overlay",
                    "the \(overlay.width)×\(overlay.height) overlay is larger than the \(bitmap.width)×\(bitmap.height) image"
                )
            }
            let origin = gravity.origin(whole: (bitmap.width, bitmap.height), part: (overlay.width, overlay.height))
            let overlayImage = try ImageDecoder.image(wrapping: overlay)
            return try withExtendedLifetime(overlay) { () throws(VipsError) -> Bitmap in
                try BitmapOperation.run(bitmap, "overlay") { image throws(VipsError) in
                    var top = try BitmapOperation.withAlpha(overlayImage, "overlay")
                    if opacity < 1 {
                        let scale: [Double] = [1, 1, 1, opacity], offset: [Double] = [0, 0, 0, 0]
                        top = try top.apply(.internal, "overlay: opacity") { input, output in
                            vl_linear(LibVips.table, input, output, scale, offset, 4)
                        }
                        top = try top.apply(.internal, "overlay: opacity") {
                            vl_cast(LibVips.table, $0, $1, VIPS_FORMAT_UCHAR)
                        }
                    }
                    let composed = try image.apply(.internal, "overlay") {
                        vl_composite_over(LibVips.table, $0, top.pointer, $1, Int32(origin.x), Int32(origin.y))
                    }
                    let sRGB = try composed.apply(.internal, "overlay") {
                        vl_copy_interpretation(LibVips.table, $0, $1, VIPS_INTERPRETATION_sRGB)
                    }
                    guard bitmap.channels == 3, sRGB.bands == 4 else { return sRGB }
                    // An opaque base stays opaque: drop the alpha composite adds.
                    return try sRGB.apply(.internal, "overlay") { vl_extract_bands(LibVips.table, $0, $1, 0, 3) }
                }
            }
        }
    }
}
