/// The direct path's residual resize and EXIF rotation, on 8-bit RGB pixels
/// in memory: what libvips' fast path does with `vips_resize` (cubic kernel)
/// and `vips_thumbnail`'s rotation, without building libvips operations for a
/// thumbnail-sized image (for a 640×480 JPEG they cost twice libjpeg's own
/// decode).
///
/// The kernel is Catmull-Rom (libvips' `VIPS_KERNEL_CUBIC`), widened by the
/// reduction factor so every input pixel contributes, applied separably
/// (rows, then columns, rounding to 8 bits between the passes as libvips
/// does) in 14-bit fixed point, with edge pixels repeated.
enum CubicReducer {
    /// The taps of one pass: for output `i`, input indices `start[i]..<start[i] + count`.
    struct Taps {
        var start: [Int]
        var weights: [Int32]
        var count: Int
    }

    static let precision: Int32 = 14

    static func catmullRom(_ x: Double) -> Double {
        let x = abs(x)
        if x < 1 { return 1.5 * x * x * x - 2.5 * x * x + 1 }
        if x < 2 { return -0.5 * x * x * x + 2.5 * x * x - 4 * x + 2 }
        return 0
    }

    static func taps(input: Int, output: Int) -> Taps {
        let scale = Double(input) / Double(output)
        let stretch = max(1, scale)
        let support = 2 * stretch
        // Weights are zero from ±support on, and the open interval between holds at most
        // ceil(2 × support) whole positions (5 for a 1.25× reduce, as libvips' 2·rint(2·1.25)+1).
        let span = Int((2 * support).rounded(.up))
        let count = min(input, span)
        var taps = Taps(start: [Int](repeating: 0, count: output), weights: [Int32](repeating: 0, count: output * count), count: count)
        var real = [Double](repeating: 0, count: count)
        for index in 0..<output {
            let centre = (Double(index) + 0.5) * scale - 0.5
            let left = Int((centre - support).rounded(.down)) + 1
            let start = max(0, min(left, input - count))
            taps.start[index] = start
            for k in 0..<count { real[k] = 0 }
            var total = 0.0
            for position in left..<(left + span) {
                let weight = catmullRom((Double(position) - centre) / stretch)
                guard weight != 0 else { continue }
                let clamped = min(input - 1, max(0, position))
                real[clamped - start] += weight
                total += weight
            }
            // Fixed point summing to exactly 1 << precision (the remainder to the largest tap).
            let one = Int32(1) << precision
            var sum: Int32 = 0, largest = 0
            for k in 0..<count {
                let weight = Int32((real[k] / total * Double(one)).rounded())
                taps.weights[index * count + k] = weight
                sum += weight
                if abs(real[k]) > abs(real[largest]) { largest = k }
            }
            taps.weights[index * count + largest] += one - sum
        }
        return taps
    }

    /// Reduces `width`×`height` RGB pixels to `outWidth`×`outHeight` (each no larger) into `output`.
    static func reduce(_ input: UnsafePointer<UInt8>, width: Int, height: Int,
                       into output: UnsafeMutablePointer<UInt8>, outWidth: Int, outHeight: Int) {
        let horizontal = taps(input: width, output: outWidth)
        let vertical = taps(input: height, output: outHeight)
        let rowBytes = outWidth * 3
        let half = Int32(1) << (precision - 1)
        // Only the input rows the vertical pass reads are reduced horizontally.
        let intermediate = UnsafeMutablePointer<UInt8>.allocate(capacity: rowBytes * height)
        defer { intermediate.deallocate() }
        let count = horizontal.count
        horizontal.weights.withUnsafeBufferPointer { weights in
            horizontal.start.withUnsafeBufferPointer { starts in
                guard let weights = weights.baseAddress, let starts = starts.baseAddress else { return }
                for y in 0..<height {
                    let source = input + y * width * 3
                    var target = intermediate + y * rowBytes
                    var w = weights
                    for x in 0..<outWidth {
                        var pixel = source + starts[x] * 3
                        var r = half, g = half, b = half
                        for k in 0..<count {
                            let weight = w[k]
                            r &+= weight &* Int32(pixel[0])
                            g &+= weight &* Int32(pixel[1])
                            b &+= weight &* Int32(pixel[2])
                            pixel += 3
                        }
                        target[0] = clamp(r)
                        target[1] = clamp(g)
                        target[2] = clamp(b)
                        target += 3
                        w += count
                    }
                }
            }
        }
        vertical.weights.withUnsafeBufferPointer { weights in
            guard let weights = weights.baseAddress else { return }
            let taps = vertical.count
            for y in 0..<outHeight {
                let w = weights + y * taps
                let first = intermediate + vertical.start[y] * rowBytes
                let target = output + y * rowBytes
                // Eight values at a time in SIMD registers, the rest one by one.
                var i = 0
                while i + 8 <= rowBytes {
                    var sum = SIMD8<Int32>(repeating: half)
                    for k in 0..<taps {
                        let row = UnsafeRawPointer(first + k * rowBytes + i).loadUnaligned(as: SIMD8<UInt8>.self)
                        sum &+= SIMD8<Int32>(truncatingIfNeeded: row) &* w[k]
                    }
                    let clamped = (sum &>> precision).clamped(lowerBound: .zero, upperBound: SIMD8(repeating: 255))
                    UnsafeMutableRawPointer(target + i).storeBytes(of: SIMD8<UInt8>(truncatingIfNeeded: clamped), as: SIMD8<UInt8>.self)
                    i += 8
                }
                while i < rowBytes {
                    var sum = half
                    for k in 0..<taps { sum &+= w[k] &* Int32(first[k * rowBytes + i]) }
                    target[i] = clamp(sum)
                    i += 1
                }
            }
        }
    }

    @inline(__always)
    static func clamp(_ sum: Int32) -> UInt8 {
        UInt8(truncatingIfNeeded: min(255, max(0, sum >> precision)))
    }

    /// Copies RGB pixels turned upright by EXIF `orientation` (2–8) into `output`,
    /// which holds `width`×`height` pixels (sides swapped for 5–8).
    static func orient(_ input: UnsafePointer<UInt8>, width: Int, height: Int, orientation: Int,
                       into output: UnsafeMutablePointer<UInt8>) {
        let swap = orientation >= 5
        let (outWidth, outHeight) = swap ? (height, width) : (width, height)
        for y in 0..<outHeight {
            let target = output + y * outWidth * 3
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
                let source = input + (sy * width + sx) * 3
                target[x * 3] = source[0]
                target[x * 3 + 1] = source[1]
                target[x * 3 + 2] = source[2]
            }
        }
    }
}
