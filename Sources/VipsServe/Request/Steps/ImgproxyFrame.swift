import VipsCore

/// The orientations in imgproxy's pipeline for one source (processing/prepare.go
/// `ExtractGeometry`, crop.go, rotate_and_flip.go): imgproxy crops and scales
/// the image as stored, then turns it by the EXIF orientation (when
/// `auto_rotate` is on), by `rotate`, and flips it by `flip`. Its sizes are
/// those of the final frame; its crop is placed in the stored frame with the
/// gravity turned back (`storedGravity`).
///
/// The decoder's frame is upright (the EXIF orientation applied), so a crop in
/// the stored frame is mapped to it (`upright(_:)`), and the decoded bitmap is
/// brought to the final frame by `turns`.
struct ImgproxyFrame {
    /// The source's EXIF orientation, 1–8.
    let orientation: Int
    /// The stored (not yet oriented) size.
    let stored: (width: Int, height: Int)
    /// imgproxy's turn and mirror from the EXIF orientation (0 and false without `auto_rotate`).
    let angle: Int, flip: Bool
    let options: ProcessingOptions

    /// The frame of a source whose header says `info` (an upright size and its orientation).
    init(options: ProcessingOptions, info: ImageInfo) {
        let orientation = (1...8).contains(info.orientation) ? info.orientation : 1
        self.init(
            options: options, orientation: orientation,
            stored: orientation >= 5 ? (info.height, info.width) : (info.width, info.height))
    }

    /// The frame of an image stored `stored` with EXIF `orientation`.
    init(options: ProcessingOptions, orientation: Int, stored: (width: Int, height: Int)) {
        self.options = options
        self.orientation = orientation
        self.stored = stored
        (angle, flip) = options.autoRotate ? Self.angleFlip(orientation) : (0, false)
    }

    /// imgproxy's `angleFlip`: the clockwise turn, then the left–right mirror, that make an EXIF orientation upright.
    static func angleFlip(_ orientation: Int) -> (Int, Bool) {
        let angle: Int
        switch orientation {
        case 3, 4: angle = 180
        case 5, 6: angle = 90
        case 7, 8: angle = 270
        default: angle = 0
        }
        return (angle, [2, 4, 5, 7].contains(orientation))
    }

    /// Whether the final frame's sides are the stored image's swapped.
    var turned: Bool { (angle + options.rotate) % 180 == 90 }

    /// Whether the final frame's sides are the upright (decoded) image's swapped.
    var turnedFromUpright: Bool { turned != (orientation >= 5) }

    /// The final frame's size (imgproxy's `SrcWidth`, `SrcHeight`).
    var size: (width: Int, height: Int) { turned ? (stored.height, stored.width) : stored }

    /// imgproxy's geometry in the final frame.
    var geometry: ImgproxyGeometry {
        ImgproxyGeometry(options: options, sourceWidth: size.width, sourceHeight: size.height)
    }

    /// imgproxy's crop before resizing, in the stored frame; nil when it keeps everything.
    func storedCrop() -> DecodePlan.Crop? {
        let geometry = self.geometry
        guard geometry.cropWidth != 0 || geometry.cropHeight != 0 else { return nil }
        var (width, height) = (geometry.cropWidth, geometry.cropHeight)
        if turned { (width, height) = (height, width) }
        width = min(stored.width, ImgproxyGeometry.minNonZero(width, stored.width))
        height = min(stored.height, ImgproxyGeometry.minNonZero(height, stored.height))
        guard width < stored.width || height < stored.height else { return nil }
        let gravity = storedGravity(options.cropGravity ?? options.gravity)
        if gravity.kind == .smart { return .smart(width: width, height: height, gravity: .attention) }
        let origin = ImgproxyGeometry.position(
            outer: stored, inner: (width, height), gravity: gravity, dpr: 1)
        return .rect(x: origin.x, y: origin.y, width: width, height: height)
    }

    /// `gravity` turned back to the stored frame (imgproxy's `RotateAndFlip`,
    /// for `rotate` and `flip`, then for the EXIF orientation).
    func storedGravity(_ gravity: ProcessingOptions.Gravity) -> ProcessingOptions.Gravity {
        let turned = Self.rotateAndFlip(
            gravity, angle: options.rotate, flipX: options.flipHorizontal, flipY: options.flipVertical)
        return Self.rotateAndFlip(turned, angle: angle, flipX: flip, flipY: false)
    }

    /// A rectangle of the stored frame in the upright (decoded) frame: the EXIF orientation applied to it.
    func upright(_ crop: DecodePlan.Crop) -> DecodePlan.Crop {
        switch crop {
        case .smart(let width, let height, let gravity):
            return orientation >= 5 ? .smart(width: height, height: width, gravity: gravity) : crop
        case .rect(let x, let y, let width, let height):
            let (w, h) = stored
            switch orientation {
            case 2: return .rect(x: w - x - width, y: y, width: width, height: height)
            case 3: return .rect(x: w - x - width, y: h - y - height, width: width, height: height)
            case 4: return .rect(x: x, y: h - y - height, width: width, height: height)
            case 5: return .rect(x: y, y: x, width: height, height: width)
            case 6: return .rect(x: h - y - height, y: x, width: height, height: width)
            case 7: return .rect(x: h - y - height, y: w - x - width, width: height, height: width)
            case 8: return .rect(x: y, y: w - x - width, width: height, height: width)
            default: return crop
            }
        }
    }

    /// The turns and mirrors that bring an image of the upright frame (`fromUpright`) or of the
    /// stored frame to the final frame: back to the stored orientation without `auto_rotate`, then `rotate`, then `flip`.
    func turns(fromUpright: Bool) -> [any ImageProcessing] {
        var steps: [any ImageProcessing] = []
        func rotate(_ angle: Int) {
            if let turn = ImageProcessors.Rotate.Angle(rawValue: (angle % 360 + 360) % 360) {
                steps.append(ImageProcessors.Rotate(turn))
            }
        }
        if fromUpright, !options.autoRotate {
            // Undo the EXIF orientation: its mirror, then its turn backwards.
            let (exifAngle, exifFlip) = Self.angleFlip(orientation)
            if exifFlip { steps.append(ImageProcessors.Flip(.horizontal)) }
            rotate(-exifAngle)
        } else if !fromUpright {
            rotate(angle)
            if flip { steps.append(ImageProcessors.Flip(.horizontal)) }
        }
        rotate(options.rotate)
        if options.flipHorizontal { steps.append(ImageProcessors.Flip(.horizontal)) }
        if options.flipVertical { steps.append(ImageProcessors.Flip(.vertical)) }
        return steps
    }

    /// imgproxy's `GravityOptions.RotateAndFlip`: the gravity that, placed
    /// before a clockwise turn by `angle` and the flips, lands where `gravity` does after them.
    static func rotateAndFlip(
        _ gravity: ProcessingOptions.Gravity, angle: Int, flipX: Bool, flipY: Bool
    ) -> ProcessingOptions.Gravity {
        typealias Kind = ProcessingOptions.Gravity.Kind
        var g = gravity
        if flipX {
            let map: [Kind: Kind] = [
                .east: .west, .west: .east, .northWest: .northEast, .northEast: .northWest, .southWest: .southEast,
                .southEast: .southWest
            ]
            g.kind = map[g.kind] ?? g.kind
            switch g.kind {
            case .centre, .north, .south: g.x = -g.x
            case .focusPoint: g.x = 1 - g.x
            default: break
            }
        }
        if flipY {
            let map: [Kind: Kind] = [
                .north: .south, .south: .north, .northWest: .southWest, .northEast: .southEast,
                .southWest: .northWest, .southEast: .northEast
            ]
            g.kind = map[g.kind] ?? g.kind
            switch g.kind {
            case .centre, .east, .west: g.y = -g.y
            case .focusPoint: g.y = 1 - g.y
            default: break
            }
        }
        let angle = angle % 360
        let rotations: [Int: [Kind: Kind]] = [
            90: [
                .north: .west, .east: .north, .south: .east, .west: .south, .northWest: .southWest,
                .northEast: .northWest, .southWest: .southEast, .southEast: .northEast
            ],
            180: [
                .north: .south, .east: .west, .south: .north, .west: .east, .northWest: .southEast,
                .northEast: .southWest, .southWest: .northEast, .southEast: .northWest
            ],
            270: [
                .north: .east, .east: .south, .south: .west, .west: .north, .northWest: .northEast,
                .northEast: .southEast, .southWest: .northWest, .southEast: .southWest
            ]
        ]
        guard let map = rotations[angle] else { return g }
        g.kind = map[g.kind] ?? g.kind
        switch angle {
        case 90:
            switch g.kind {
            case .centre, .east, .west: (g.x, g.y) = (g.y, -g.x)
            case .focusPoint: (g.x, g.y) = (g.y, 1 - g.x)
            default: (g.x, g.y) = (g.y, g.x)
            }
        case 180:
            switch g.kind {
            case .centre: (g.x, g.y) = (-g.x, -g.y)
            case .north, .south: g.x = -g.x
            case .east, .west: g.y = -g.y
            case .focusPoint: (g.x, g.y) = (1 - g.x, 1 - g.y)
            default: break
            }
        default:
            switch g.kind {
            case .centre, .north, .south: (g.x, g.y) = (-g.y, g.x)
            case .focusPoint: (g.x, g.y) = (1 - g.y, g.x)
            default: (g.x, g.y) = (g.y, g.x)
            }
        }
        return g
    }
}
