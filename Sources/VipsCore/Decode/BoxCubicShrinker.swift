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
    /// The box-shrunk image, in 16-bit units, premultiplied when there is alpha (one
    /// value of padding, so 3-channel pixels load and store as SIMD4), in this thread's
    /// reused scratch memory.
    private let boxImage: ScratchMemory.Lease
    private var box: UnsafeMutablePointer<Float> { boxImage.pointer.assumingMemoryBound(to: Float.self) }
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
        return Plan(
            shrinkX: x.shrink, shrinkY: y.shrink, boxWidth: x.box, boxHeight: y.box, scaleX: x.scale, scaleY: y.scale)
    }

    /// Bytes the shrinker holds for this reduce (its column sums, its box image, the cubic pass between).
    static func workingBytes(
        width: Int, height: Int, outWidth: Int, outHeight: Int, channels: Int, hasAlpha: Bool
    ) -> Int {
        let plan = plan(width: width, height: height, outWidth: outWidth, outHeight: outHeight, hasAlpha: hasAlpha)
        return channels * (width * 4 + plan.boxWidth * plan.boxHeight * 4 + outWidth * plan.boxHeight * 4)
    }

    /// Nil when the box image's memory cannot be had.
    init?(width: Int, height: Int, channels: Int, hasAlpha: Bool, sixteenBit: Bool, outWidth: Int, outHeight: Int) {
        self.width = width
        self.height = height
        self.channels = channels
        self.hasAlpha = hasAlpha
        self.sixteenBit = sixteenBit
        self.outWidth = outWidth
        self.outHeight = outHeight
        plan = Self.plan(width: width, height: height, outWidth: outWidth, outHeight: outHeight, hasAlpha: hasAlpha)
        (shrinkX, shrinkY, boxWidth, boxHeight) = (plan.shrinkX, plan.shrinkY, plan.boxWidth, plan.boxHeight)
        sums = [UInt32](repeating: 0, count: width * channels + 1)
        let floats = plan.boxWidth * plan.boxHeight * channels + 1
        let bytes = floats * MemoryLayout<Float>.stride
        guard let boxImage = ScratchMemory.lease(bytes, for: .boxImage) else { return nil }
        // Zeroed: rows a short image never sends stay black, as before, not last image's.
        boxImage.pointer.initializeMemory(as: Float.self, repeating: 0, count: floats)
        self.boxImage = boxImage
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
        let count = width * channels, width = width
        let channels = channels, hasAlpha = hasAlpha, sixteenBit = sixteenBit
        let factor = UInt32(times)
        sums.withUnsafeMutableBufferPointer { sums in
            guard let sums = sums.baseAddress else { return }
            if !sixteenBit && !hasAlpha {
                // The common case, simple enough to vectorise.
                let bytes = row.assumingMemoryBound(to: UInt8.self)
                for i in 0..<count { sums[i] &+= UInt32(bytes[i]) &* factor }
                return
            }
            if !sixteenBit && channels == 4 {
                // RGBA: colour × alpha (up to 65025), scaled when the box is finished.
                for x in 0..<width {
                    var pixel = SIMD4<UInt32>(truncatingIfNeeded: (row + x * 4).loadUnaligned(as: SIMD4<UInt8>.self))
                    pixel &*= SIMD4(pixel[3], pixel[3], pixel[3], 1) &* factor
                    let target = UnsafeMutableRawPointer(sums + x * 4)
                    target.storeBytes(of: target.loadUnaligned(as: SIMD4<UInt32>.self) &+ pixel, as: SIMD4<UInt32>.self)
                }
                return
            }
            let colours = hasAlpha ? channels - 1 : channels
            if sixteenBit {
                let samples = row.assumingMemoryBound(to: UInt16.self)
                for x in 0..<width {
                    let source = samples + x * stride, target = sums + x * channels
                    if hasAlpha {
                        // Premultiplied in the 16-bit domain.
                        let alpha = UInt32(source[stride - 1])
                        for k in 0..<colours { target[k] &+= (UInt32(source[k]) * alpha + 32767) / 65535 &* factor }
                        target[colours] &+= alpha &* factor
                    } else {
                        for k in 0..<colours { target[k] &+= UInt32(source[k]) &* factor }
                    }
                }
            } else {
                // Grey and alpha, 8-bit.
                let bytes = row.assumingMemoryBound(to: UInt8.self)
                for x in 0..<width {
                    let source = bytes + x * stride, target = sums + x * channels
                    let alpha = UInt32(source[colours])
                    for k in 0..<colours { target[k] &+= UInt32(source[k]) &* alpha &* factor }
                    target[colours] &+= alpha &* factor
                }
            }
        }
    }

    private mutating func finishBoxRow() {
        let channels = channels, colours = hasAlpha ? channels - 1 : channels
        let (width, shrinkX, boxWidth) = (width, shrinkX, boxWidth)
        let area = Float(shrinkX * shrinkY)
        // Scale from the summed domain to 16-bit: 8-bit samples × 257, premultiplied 8-bit ÷ 255 × 257.
        var scales = SIMD4<Float>(repeating: (sixteenBit ? 1 : 257) / area)
        if hasAlpha && !sixteenBit { for k in 0..<colours { scales[k] = 257 / 255 / area } }
        let target = box + boxRow * boxWidth * channels
        sums.withUnsafeMutableBufferPointer { sums in
            guard let sums = sums.baseAddress else { return }
            // (Sums of one box fit 32 bits: see `plan`'s callers.)
            func load(_ x: Int) -> SIMD4<UInt32> {
                channels >= 3
                    ? UnsafeRawPointer(sums + x * channels).loadUnaligned(as: SIMD4<UInt32>.self)
                    : SIMD4(sums[x * channels], channels == 2 ? sums[x * channels + 1] : 0, 0, 0)
            }
            for bx in 0..<boxWidth {
                let first = bx * shrinkX
                var total = SIMD4<UInt32>()
                if first + shrinkX <= width {
                    for x in first..<(first + shrinkX) { total &+= load(x) }
                } else {
                    // The last, partial box: the edge column stands in for the missing ones.
                    for j in 0..<shrinkX { total &+= load(min(first + j, width - 1)) }
                }
                let value = SIMD4<Float>(total) * scales
                if channels >= 3 {
                    // A 3-channel store spills one lane into the next pixel (or the padding).
                    UnsafeMutableRawPointer(target + bx * channels).storeBytes(of: value, as: SIMD4<Float>.self)
                } else {
                    for k in 0..<channels { target[bx * channels + k] = value[k] }
                }
            }
            sums.update(repeating: 0, count: width * channels)
        }
        rowsInBox = 0
        boxRow += 1
    }

    /// The output: `outWidth`×`outHeight` 8-bit pixels of 3 channels (grey is
    /// repeated) or 4 (alpha), unpremultiplied and rounded as libvips' path does.
    func finish(into output: UnsafeMutablePointer<UInt8>) {
        // The horizontal pass's rows go where the box rows they came from were (no more memory):
        // row y's outWidth pixels end at or before box row y + 1 starts, since the box is never
        // narrower than the output. Else (never, for a downscale) a block of their own.
        if outWidth <= boxWidth {
            finish(into: output, across: box)
            return
        }
        let floats = outWidth * channels * boxHeight + 1
        let across = UnsafeMutablePointer<Float>.allocate(capacity: floats)
        defer { across.deallocate() }
        finish(into: output, across: across)
    }

    private func finish(into output: UnsafeMutablePointer<UInt8>, across: UnsafeMutablePointer<Float>) {
        let (channels, boxWidth, boxHeight, outWidth, outHeight) = (channels, boxWidth, boxHeight, outWidth, outHeight)
        let horizontal = Self.taps(input: boxWidth, output: outWidth, scale: plan.scaleX)
        let vertical = Self.taps(input: boxHeight, output: outHeight, scale: plan.scaleY)
        let rowFloats = outWidth * channels
        // Horizontal pass: each box row to outWidth pixels of floats, through one row (plus a
        // float of padding for the four-wide stores), then into `across`, which may be the box itself.
        var down = [Float](repeating: 0, count: rowFloats)
        var row = [Float](repeating: 0, count: rowFloats + 1)
        let box = UnsafePointer(self.box)
        row.withUnsafeMutableBufferPointer { row in
            horizontal.weights.withUnsafeBufferPointer { weights in
                horizontal.start.withUnsafeBufferPointer { starts in
                    guard let weights = weights.baseAddress, let starts = starts.baseAddress,
                        let target = row.baseAddress
                    else { return }
                    let taps = horizontal.count
                    for y in 0..<boxHeight {
                        let source = box + y * boxWidth * channels
                        for x in 0..<outWidth {
                            let w = weights + x * taps
                            var pixel = source + starts[x] * channels
                            if channels >= 3 {
                                var sum = SIMD4<Float>()
                                for t in 0..<taps {
                                    sum += w[t] * UnsafeRawPointer(pixel).loadUnaligned(as: SIMD4<Float>.self)
                                    pixel += channels
                                }
                                UnsafeMutableRawPointer(target + x * channels).storeBytes(
                                    of: sum, as: SIMD4<Float>.self)
                            } else {
                                for k in 0..<channels {
                                    var sum: Float = 0
                                    for t in 0..<taps { sum += w[t] * pixel[t * channels + k] }
                                    target[x * channels + k] = sum
                                }
                            }
                        }
                        (across + y * rowFloats).update(from: target, count: rowFloats)
                    }
                }
            }
        }
        let outChannels = hasAlpha ? 4 : 3
        let colours = hasAlpha ? channels - 1 : channels
        let (hasAlpha, sixteenBit) = (hasAlpha, sixteenBit)
        let across = UnsafePointer(across)
        down.withUnsafeMutableBufferPointer { down in
            vertical.weights.withUnsafeBufferPointer { weights in
                guard let down = down.baseAddress, let weights = weights.baseAddress else { return }
                let taps = vertical.count
                for y in 0..<outHeight {
                    // Vertical pass, a tap at a time over the whole row (vectorises).
                    down.update(repeating: 0, count: rowFloats)
                    for t in 0..<taps {
                        let weight = weights[y * taps + t]
                        let source = across + (vertical.start[y] + t) * rowFloats
                        for i in 0..<rowFloats { down[i] += weight * source[i] }
                    }
                    let target = output + y * outWidth * outChannels
                    for x in 0..<outWidth {
                        let pixel = down + x * channels, out = target + x * outChannels
                        if hasAlpha {
                            // vips_unpremultiply (alpha under 0.01 of a level gives black), then
                            // vips_cast's truncation; the alpha band itself clipped and truncated.
                            let alpha = min(65535, max(0, pixel[colours]))
                            let factor = alpha < 0.01 * 257 ? 0 : 65535 / alpha
                            for k in 0..<colours { out[k] = Self.truncated(pixel[k] * factor, sixteenBit) }
                            out[3] = Self.truncated(alpha, sixteenBit)
                        } else {
                            for k in 0..<colours { out[k] = Self.rounded(pixel[k], sixteenBit) }
                        }
                        if colours == 1 { (out[1], out[2]) = (out[0], out[0]) }
                    }
                }
            }
        }
    }

    /// The taps of one cubic pass, `scale` input pixels per output pixel: output `i` is centred
    /// on input `(i + 0.5) × scale − 0.5` (libvips' reduce with nothing invented at the edges),
    /// Catmull-Rom widened by the scale, normalised, edge pixels repeated.
    static func taps(input: Int, output: Int, scale: Double) -> (start: [Int], weights: [Float], count: Int) {
        let stretch = max(1, scale), support = 2 * stretch
        // Weights are zero from ±support on: the open interval between holds at most ceil(2 × support) positions.
        let span = Int((2 * support).rounded(.up))
        let count = min(input, span)
        var starts = [Int](repeating: 0, count: output), weights = [Float](repeating: 0, count: output * count)
        var real = [Double](repeating: 0, count: count)
        for index in 0..<output {
            let centre = (Double(index) + 0.5) * scale - 0.5
            let left = Int((centre - support).rounded(.down)) + 1
            let start = max(0, min(left, input - count))
            starts[index] = start
            for k in 0..<count { real[k] = 0 }
            var total = 0.0
            for position in left..<(left + span) {
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
    static func rounded(_ value: Float, _ sixteenBit: Bool) -> UInt8 {
        let clamped = min(65535, max(0, value))
        return sixteenBit
            ? UInt8(truncatingIfNeeded: Int(clamped + 0.5) >> 8) : UInt8(min(255, Int(clamped / 257 + 0.5)))
    }

    /// A float result cast down (truncated), 8-bit or 16-bit then shifted.
    @inline(__always)
    static func truncated(_ value: Float, _ sixteenBit: Bool) -> UInt8 {
        let clamped = min(65535, max(0, value))
        // The small margin keeps an opaque 255 from becoming 254 through float rounding.
        return sixteenBit
            ? UInt8(truncatingIfNeeded: Int(clamped + 0.001) >> 8) : UInt8(min(255, Int(clamped / 257 + 0.0005)))
    }
}
