import CVipsShim

extension ImageProcessors {
    /// Cuts away the border that differs from a background colour by at most
    /// `threshold` (libvips' `find_trim`), as imgproxy's `trim` does:
    /// transparency is flattened onto magenta for the search, the background
    /// is `background` or else the top-left pixel's colour, and
    /// `equalHorizontal` / `equalVertical` cut as little from each of two
    /// opposite sides as from the one that needs less. An image that is all
    /// background is left as it is.
    public struct Trim: ImageProcessing {
        /// How far (per channel, 0–255) a pixel may differ from the background and still be trimmed.
        public let threshold: Double
        /// The colour trimmed; nil for the top-left pixel's.
        public let background: Colour?
        /// Cut as much from the left as from the right (the smaller of the two).
        public let equalHorizontal: Bool
        /// Cut as much from the top as from the bottom (the smaller of the two).
        public let equalVertical: Bool

        /// A trim; each parameter is the property of that name.
        public init(
            threshold: Double, background: Colour? = nil, equalHorizontal: Bool = false, equalVertical: Bool = false
        ) {
            self.threshold = threshold
            self.background = background
            self.equalHorizontal = equalHorizontal
            self.equalVertical = equalVertical
        }

        public var identifier: String {
            "vipsload.trim(\(threshold),\(background.map { "\($0)" } ?? "corner"),\(equalHorizontal),\(equalVertical))"
        }

        public func validate() throws(VipsError) {
            guard threshold.isFinite, threshold >= 0 else {
                throw .badParameter("trim", "threshold \(threshold) is not a finite number ≥ 0")
            }
        }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            try validate()
            let box = try bounds(of: bitmap)
            var (left, top, width, height) = box
            if equalHorizontal {
                let right = bitmap.width - left - width
                if right > left {
                    width += right - left
                } else if right < left {
                    (left, width) = (right, width + left - right)
                }
            }
            if equalVertical {
                let bottom = bitmap.height - top - height
                if bottom > top {
                    height += bottom - top
                } else if bottom < top {
                    (top, height) = (bottom, height + top - bottom)
                }
            }
            guard width > 0, height > 0, width < bitmap.width || height < bitmap.height else { return bitmap }
            return try ImageProcessors.Crop(x: left, y: top, width: width, height: height).process(bitmap)
        }

        /// `find_trim`'s box (left, top, width, height) of `bitmap` against the background.
        private func bounds(of bitmap: Bitmap) throws(VipsError) -> (Int, Int, Int, Int) {
            try VipsRuntime.start()
            let image = try ImageDecoder.image(wrapping: bitmap)
            return try withExtendedLifetime(bitmap) { () throws(VipsError) -> (Int, Int, Int, Int) in
                var searched = image
                // Transparency counts as magenta, as imgproxy flattens it for the search.
                if bitmap.channels == 4 {
                    let magenta: [Double] = [255, 0, 255]
                    searched = try image.apply(.internal, "trim: flatten") {
                        vl_flatten(LibVips.table, $0, $1, magenta, 3)
                    }
                }
                let colour: [Double]
                if let background {
                    colour = [Double(background.red), Double(background.green), Double(background.blue)]
                } else {
                    colour = Self.corner(of: bitmap)
                }
                var left: Int32 = 0, top: Int32 = 0, width: Int32 = 0, height: Int32 = 0
                let status = vl_find_trim(
                    LibVips.table, searched.pointer, &left, &top, &width, &height, threshold, colour,
                    Int32(colour.count))
                guard status == 0 else {
                    throw VipsError(.internal, "trim: \(VipsRuntime.takeErrorMessage(default: "find_trim failed"))")
                }
                VipsRuntime.discardErrorMessages()
                return (Int(left), Int(top), Int(width), Int(height))
            }
        }

        /// The top-left pixel's colour, flattened onto magenta when it has alpha (what the search sees).
        private static func corner(of bitmap: Bitmap) -> [Double] {
            guard let pixel = bitmap.pixel(x: 0, y: 0) else { return [0, 0, 0] }
            guard bitmap.channels == 4 else { return pixel.prefix(3).map(Double.init) }
            let alpha = Double(pixel[3]) / 255
            return zip(pixel.prefix(3), [255.0, 0, 255]).map { front, back in
                (Double(front) * alpha + back * (1 - alpha)).rounded()
            }
        }
    }

    /// Pixelates into `size` × `size` blocks, as imgproxy's `pixelate`: the
    /// image is extended by mirroring to whole blocks, each block is its
    /// pixels' average (libvips' `shrink`), repeated over the block (`zoom`),
    /// and the extension cut away again. A size of 1 or less changes nothing;
    /// one over the image's longer side is that side.
    public struct Pixelate: ImageProcessing {
        /// The blocks' side, in pixels.
        public let size: Int

        /// Blocks of `size` pixels a side.
        public init(size: Int) { self.size = size }

        public var identifier: String { "vipsload.pixelate(\(size))" }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            let size = min(size, max(bitmap.width, bitmap.height))
            guard size > 1 else { return bitmap }
            let width = bitmap.width, height = bitmap.height
            let wholeWidth = (width + size - 1) / size * size, wholeHeight = (height + size - 1) / size * size
            return try BitmapOperation.run(bitmap, "pixelate") { image throws(VipsError) -> VipsImageHandle in
                var output = image
                if wholeWidth > width || wholeHeight > height {
                    output = try output.apply(.internal, "pixelate: extend") {
                        vl_embed_mirror(LibVips.table, $0, $1, 0, 0, Int32(wholeWidth), Int32(wholeHeight))
                    }
                }
                output = try output.apply(.internal, "pixelate: shrink") {
                    vl_shrink(LibVips.table, $0, $1, Double(size), Double(size))
                }
                output = try output.apply(.internal, "pixelate: zoom") {
                    vl_zoom(LibVips.table, $0, $1, Int32(size), Int32(size))
                }
                return try BitmapOperation.extract(output, x: 0, y: 0, width: width, height: height, "pixelate")
            }
        }
    }

    /// Scales to exactly `width` × `height`, each side on its own (libvips'
    /// `resize` with Lanczos 3, premultiplied when the image has alpha).
    public struct Resize: ImageProcessing {
        /// The size the bitmap is scaled to, in pixels.
        public let width: Int, height: Int

        /// A resize to `width` × `height` pixels.
        public init(width: Int, height: Int) {
            self.width = width
            self.height = height
        }

        public var identifier: String { "vipsload.resize(\(width)x\(height))" }

        public func validate() throws(VipsError) {
            guard width > 0, height > 0, width <= Int(Int32.max), height <= Int(Int32.max) else {
                throw .badParameter("resize", "size \(width)×\(height) is not positive")
            }
        }

        public func process(_ bitmap: Bitmap) throws(VipsError) -> Bitmap {
            try validate()
            guard width != bitmap.width || height != bitmap.height else { return bitmap }
            let (width, height) = (width, height)
            return try BitmapOperation.run(bitmap, "resize") { image throws(VipsError) -> VipsImageHandle in
                let xScale = Double(width) / Double(image.width), yScale = Double(height) / Double(image.height)
                func resized(_ input: VipsImageHandle) throws(VipsError) -> VipsImageHandle {
                    try input.apply(.internal, "resize") {
                        vl_resize_kernel(LibVips.table, $0, $1, xScale, yScale, VIPS_KERNEL_LANCZOS3)
                    }
                }
                var output: VipsImageHandle
                if image.hasAlpha {
                    let format = image.bandFormat
                    let premultiplied = try image.apply(.internal, "resize") { vl_premultiply(LibVips.table, $0, $1) }
                    let straight = try resized(premultiplied).apply(.internal, "resize") {
                        vl_unpremultiply(LibVips.table, $0, $1)
                    }
                    output = try straight.apply(.internal, "resize") { vl_cast(LibVips.table, $0, $1, format) }
                } else {
                    output = try resized(image)
                }
                // vips_resize rounds each side from its scale: a side a pixel long is cut back, one short embedded.
                if output.width != width || output.height != height {
                    output = try output.apply(.internal, "resize") {
                        vl_embed_mirror(LibVips.table, $0, $1, 0, 0, Int32(width), Int32(height))
                    }
                }
                return output
            }
        }
    }
}

extension DecodePlan {
    /// The plan carried out on pixels already decoded (upright, at the size
    /// of the header it was made for): the crop (a smart one found from the
    /// pixels), the exact resize (`ImageProcessors.Resize`), then the result
    /// crop. For a plan whose input is only known after processing, as a trim's.
    ///
    /// - Throws: `.invalidArgument` when a crop does not lie within what it crops.
    public func apply(to bitmap: Bitmap) throws(VipsError) -> Bitmap {
        let info = ImageInfo(
            width: bitmap.width, height: bitmap.height, format: bitmap.source?.info.format ?? .png,
            bands: bitmap.channels, hasAlpha: bitmap.channels == 4, orientation: 1, pages: 1)
        try validate(for: info)
        var output = bitmap
        if let crop { output = try ImageDecoder.crop(output, crop, label: "plan") }
        output = try ImageProcessors.Resize(width: width, height: height).process(output)
        if let resultCrop { output = try ImageDecoder.crop(output, resultCrop, label: "plan") }
        return output
    }
}
