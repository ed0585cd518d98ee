/// The direct PNG path's resize, fed one decoded row at a time: a box shrink
/// by whole factors as the rows arrive (so a large PNG never exists at full
/// size), then a Catmull-Rom reduce of what is left, the two steps
/// `vips_resize` takes with `VIPS_KERNEL_CUBIC` (`vips_shrinkh`/`vips_shrinkv`
/// by `floor(factor / gap)`, gap 2, then `vips_reduceh`/`vips_reducev`).
///
/// Works on 1–4 channels of 8- or 16-bit samples. Images with alpha are
/// resized premultiplied, as libvips does, and box-shrunk by the factor the
/// libvips fast path uses for them (see `ImageDecoder.fastResidualResize`).
/// Box averages are kept as 16-bit values (an 8-bit sample `v` counts as
/// `v × 257`), so nothing is rounded to 8 bits before the last step.
struct BoxCubicShrinker {
    /// Channels per pixel in the input (alpha last, when there is one).
    let channels: Int
    let hasAlpha: Bool
    let sixteenBit: Bool
    let width: Int, height: Int
    let outWidth: Int, outHeight: Int
    /// The box factors.
    let shrinkX: Int, shrinkY: Int
    /// The box-shrunk size (a partial box repeats the edge pixel, as libvips does; one
    /// beyond it, where libvips rounds the size down, is dropped).
    let boxWidth: Int, boxHeight: Int
    let plan: Plan

    /// Column sums of the rows of the current box row.
    private var sums: [UInt32]
    /// The box-shrunk image, 16-bit values, premultiplied when there is alpha.
    private(set) var box: [UInt16]
    /// One premultiplied 16-bit row (16-bit input only).
    private var wide: [UInt32]
    private var rowsInBox = 0
    private var boxRow = 0

    /// How libvips' fast path reduces an image of this size to `out`: the
    /// whole box factors, the box-shrunk size, and the scale left for the
    /// cubic reduce (in box pixels per output pixel, as libvips maps it).
    struct Plan: Equatable {
        var shrinkX = 1, shrinkY = 1
        var boxWidth: Int, boxHeight: Int
        var scaleX: Double, scaleY: Double
    }

    static func plan(width: Int, height: Int, outWidth: Int, outHeight: Int, hasAlpha: Bool) -> Plan {
        // vips_reduce{h,v} with gap 2: shrink{h,v} by floor(in / out / 2) (at least 1, size
        // rounded up), then the cubic reduce by (in / out) / shrink on what is left.
        func axis(_ size: Int, _ out: Int, first: Int) -> (shrink: Int, box: Int, scale: Double) {
            // The fast path's premultiplied box shrink first (vips_shrink: the size rounded).
            let shrunk = first > 1 ? max(1, Int((Double(size) / Double(first)).rounded())) : size
            let gap = max(1, Int((Double(shrunk) / Double(out) / 2).rounded(.down)))
            let box = (shrunk + gap - 1) / gap
            return (first * gap, box, Double(shrunk) / Double(out) / Double(gap))
        }
        var first = 1
        if hasAlpha {
            let whole = Int((Double(min(width / outWidth, height / outHeight)) / 1.5).rounded(.down))
            if whole >= 2 { first = whole }
        }
        let x = axis(width, outWidth, first: first), y = axis(height, outHeight, first: first)
        return Plan(shrinkX: x.shrink, shrinkY: y.shrink, boxWidth: x.box, boxHeight: y.box, scaleX: x.scale, scaleY: y.scale)
    }

    /// Bytes the shrinker holds for this reduce (its sums, its box image, the cubic pass between).
    static func workingBytes(width: Int, height: Int, outWidth: Int, outHeight: Int, channels: Int, hasAlpha: Bool) -> Int {
        let plan = plan(width: width, height: height, outWidth: outWidth, outHeight: outHeight, hasAlpha: hasAlpha)
        return channels * (width * 8 + plan.boxWidth * plan.boxHeight * 2 + outWidth * plan.boxHeight * 4)
    }

    init(width: Int, height: Int, channels: Int, hasAlpha: Bool, sixteenBit: Bool, outWidth: Int, outHeight: Int) {
        self.width = width
        self.height = height
        self.channels = channels
        self.hasAlpha = hasAlpha
        self.sixteenBit = sixteenBit
        self.outWidth = outWidth
        self.outHeight = outHeight
        plan = Self.plan(width: width, height: height, outWidth: outWidth, outHeight: outHeight, hasAlpha: hasAlpha)
        (shrinkX, shrinkY, boxWidth, boxHeight) = (plan.shrinkX, plan.shrinkY, plan.boxWidth, plan.boxHeight)
        sums = [UInt32](repeating: 0, count: width * channels)
        box = [UInt16](repeating: 0, count: boxWidth * boxHeight * channels)
        wide = sixteenBit || hasAlpha ? [UInt32](repeating: 0, count: width * channels) : []
    }

    /// Adds one decoded row: `width` pixels of `stride` samples (8- or 16-bit, host order),
    /// of which the first `channels` are used (a 16-bit decode always carries alpha).
    mutating func add(row: UnsafeRawPointer, stride: Int) {
        guard boxRow < boxHeight else { return }
        addToSums(row, stride: stride, times: 1)
        rowsInBox += 1
        if rowsInBox == shrinkY {
            finishBoxRow()
        } else if boxRow * shrinkY + rowsInBox == height {
            // The last, partial box: the last row stands in for the missing ones (vips_embed's copy).
            addToSums(row, stride: stride, times: shrinkY - rowsInBox)
            finishBoxRow()
        }
    }

    private mutating func addToSums(_ row: UnsafeRawPointer, stride: Int, times: Int) {
        let count = width * channels
        let channels = channels
        sums.withUnsafeMutableBufferPointer { sums in
            guard let sums = sums.baseAddress else { return }
            if !sixteenBit && !hasAlpha && stride == channels {
                // The common case, kept simple enough to vectorise.
                let bytes = row.assumingMemoryBound(to: UInt8.self)
                let factor = UInt32(times)
                for i in 0..<count { sums[i] &+= UInt32(bytes[i]) &* factor }
                return
            }
            wide.withUnsafeMutableBufferPointer { wide in
                guard let wide = wide.baseAddress else { return }
                let colours = hasAlpha ? channels - 1 : channels
                if sixteenBit {
                    let samples = row.assumingMemoryBound(to: UInt16.self)
                    for x in 0..<width {
                        let source = samples + x * stride, target = wide + x * channels
                        if hasAlpha {
                            // Premultiplied in the 16-bit domain.
                            let alpha = UInt32(source[stride - 1])
                            for k in 0..<colours { target[k] = (UInt32(source[k]) * alpha + 32767) / 65535 }
                            target[colours] = alpha
                        } else {
                            for k in 0..<colours { target[k] = UInt32(source[k]) }
                        }
                    }
                } else {
                    // 8-bit with alpha: colour × alpha (up to 65025), scaled when the box is finished.
                    let bytes = row.assumingMemoryBound(to: UInt8.self)
                    for x in 0..<width {
                        let source = bytes + x * stride, target = wide + x * channels
                        let alpha = UInt32(source[colours])
                        for k in 0..<colours { target[k] = UInt32(source[k]) &* alpha }
                        target[colours] = alpha
                    }
                }
                let factor = UInt32(times)
                for i in 0..<count { sums[i] &+= wide[i] &* factor }
            }
        }
    }

    private mutating func finishBoxRow() {
        let channels = channels, colours = hasAlpha ? channels - 1 : channels
        let area = Double(shrinkX * shrinkY)
        // Scale from the summed domain to 16-bit: 8-bit samples × 257, premultiplied 8-bit ÷ 255 × 257.
        var scales = [Double](repeating: sixteenBit ? 1 : 257, count: channels)
        if hasAlpha && !sixteenBit { for k in 0..<colours { scales[k] = 257.0 / 255 } }
        for k in 0..<channels { scales[k] /= area }
        let base = boxRow * boxWidth * channels
        for bx in 0..<boxWidth {
            for k in 0..<channels {
                var total: UInt64 = 0
                let first = bx * shrinkX
                for j in 0..<shrinkX {
                    total &+= UInt64(sums[min(first + j, width - 1) * channels + k])
                }
                box[base + bx * channels + k] = UInt16(min(65535, (Double(total) * scales[k]).rounded()))
            }
        }
        for i in 0..<sums.count { sums[i] = 0 }
        rowsInBox = 0
        boxRow += 1
    }

    /// The output: `outWidth`×`outHeight` 8-bit pixels of 3 channels (grey is
    /// repeated) or 4 (alpha), unpremultiplied and rounded as libvips' path does.
    func finish(into output: UnsafeMutablePointer<UInt8>) {
        let channels = channels
        // Horizontal pass: box rows → outWidth floats per row.
        let horizontal = Self.taps(input: boxWidth, output: outWidth, scale: plan.scaleX)
        let vertical = Self.taps(input: boxHeight, output: outHeight, scale: plan.scaleY)
        let hWeights = horizontal.weights, vWeights = vertical.weights
        let rowFloats = outWidth * channels
        var across = [Float](repeating: 0, count: rowFloats * boxHeight)
        box.withUnsafeBufferPointer { box in
            across.withUnsafeMutableBufferPointer { across in
                guard let box = box.baseAddress, let across = across.baseAddress else { return }
                let taps = horizontal.count
                for y in 0..<boxHeight {
                    let source = box + y * boxWidth * channels, target = across + y * rowFloats
                    for x in 0..<outWidth {
                        let start = horizontal.start[x]
                        for k in 0..<channels {
                            var sum: Float = 0
                            for t in 0..<taps { sum += hWeights[x * taps + t] * Float(source[(start + t) * channels + k]) }
                            target[x * channels + k] = sum
                        }
                    }
                }
            }
        }
        var down = [Float](repeating: 0, count: rowFloats)
        let outChannels = hasAlpha ? 4 : 3
        let colours = hasAlpha ? channels - 1 : channels
        for y in 0..<outHeight {
            let taps = vertical.count, start = vertical.start[y]
            for i in 0..<rowFloats {
                var sum: Float = 0
                for t in 0..<taps { sum += vWeights[y * taps + t] * across[(start + t) * rowFloats + i] }
                down[i] = sum
            }
            let target = output + y * outWidth * outChannels
            for x in 0..<outWidth {
                let pixel = x * channels
                var values = SIMD4<Float>(repeating: 0)
                if hasAlpha {
                    // vips_unpremultiply (alpha under 0.01 of a level gives black), then
                    // vips_cast's truncation; the alpha band itself clipped and truncated.
                    let alpha = min(65535, max(0, down[pixel + colours]))
                    let factor = alpha < 0.01 * 257 ? 0 : 65535 / alpha
                    for k in 0..<colours { values[k] = Self.truncated(down[pixel + k] * factor, sixteenBit) }
                    values[3] = Self.truncated(alpha, sixteenBit)
                } else {
                    for k in 0..<colours { values[k] = Self.rounded(down[pixel + k], sixteenBit) }
                }
                if colours == 1 { (values[1], values[2]) = (values[0], values[0]) }
                for k in 0..<outChannels { target[x * outChannels + k] = UInt8(values[k]) }
            }
        }
    }

    /// The taps of one cubic pass, `scale` input pixels per output pixel: output `i` is centred
    /// on input `(i + 0.5) × scale − 0.5` (libvips' reduce with nothing invented at the edges),
    /// Catmull-Rom widened by the scale, normalised, edge pixels repeated.
    static func taps(input: Int, output: Int, scale: Double) -> (start: [Int], weights: [Float], count: Int) {
        let stretch = max(1, scale), support = 2 * stretch
        let span = Int((2 * support).rounded(.up)) + 1
        let count = min(input, span + 1)
        var starts = [Int](repeating: 0, count: output), weights = [Float](repeating: 0, count: output * count)
        var real = [Double](repeating: 0, count: count)
        for index in 0..<output {
            let centre = (Double(index) + 0.5) * scale - 0.5
            let left = Int((centre - support).rounded(.down))
            let start = max(0, min(left, input - count))
            starts[index] = start
            for k in 0..<count { real[k] = 0 }
            var total = 0.0
            for position in left...(left + span) {
                let weight = CubicReducer.catmullRom((Double(position) - centre) / stretch)
                guard weight != 0 else { continue }
                let clamped = min(input - 1, max(0, position))
                // A clamped position outside the window (tiny inputs) folds onto its edge.
                let slot = min(count - 1, max(0, clamped - start))
                real[slot] += weight
                total += weight
            }
            for k in 0..<count { weights[index * count + k] = Float(total == 0 ? (k == 0 ? 1 : 0) : real[k] / total) }
        }
        return (starts, weights, count)
    }

    /// A float result of an 8-bit (uchar) resize, rounded, or of a 16-bit one, rounded then shifted.
    @inline(__always)
    static func rounded(_ value: Float, _ sixteenBit: Bool) -> Float {
        let clamped = min(65535, max(0, value))
        return sixteenBit ? Float(Int(clamped.rounded()) >> 8) : (clamped / 257).rounded()
    }

    /// A float result cast down (truncated), 8-bit or 16-bit then shifted.
    @inline(__always)
    static func truncated(_ value: Float, _ sixteenBit: Bool) -> Float {
        let clamped = min(65535, max(0, value))
        // The small margin keeps an opaque 255 from becoming 254 through float rounding.
        return sixteenBit ? Float(Int(clamped + 0.001) >> 8) : min(255, (clamped / 257 + 0.0005).rounded(.down))
    }

    /// Copies pixels of `channels` bytes turned upright by EXIF `orientation` (2–8) into
    /// `output`, which holds `width`×`height` pixels (sides swapped for 5–8).
    static func orient(_ input: UnsafePointer<UInt8>, width: Int, height: Int, channels: Int, orientation: Int,
                       into output: UnsafeMutablePointer<UInt8>) {
        let swap = orientation >= 5
        let (outWidth, outHeight) = swap ? (height, width) : (width, height)
        for y in 0..<outHeight {
            let target = output + y * outWidth * channels
            for x in 0..<outWidth {
                let (sx, sy): (Int, Int)
                switch orientation {
                case 2: (sx, sy) = (width - 1 - x, y)
                case 3: (sx, sy) = (width - 1 - x, height - 1 - y)
                case 4: (sx, sy) = (x, height - 1 - y)
                case 5: (sx, sy) = (y, x)
                case 6: (sx, sy) = (y, height - 1 - x)
                case 7: (sx, sy) = (width - 1 - y, height - 1 - x)
                case 8: (sx, sy) = (width - 1 - y, x)
                default: (sx, sy) = (x, y)
                }
                let source = input + (sy * width + sx) * channels
                for k in 0..<channels { target[x * channels + k] = source[k] }
            }
        }
    }
}
