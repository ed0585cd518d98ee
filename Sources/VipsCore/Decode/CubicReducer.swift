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
        var taps = Taps(
            start: [Int](repeating: 0, count: output), weights: [Int32](repeating: 0, count: output * count),
            count: count)
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

    /// An RGB `bitmap` reduced to `width`×`height` (each no larger) in new pixel memory.
    static func reduced(_ bitmap: Bitmap, width: Int, height: Int, label: String) throws(VipsError) -> Bitmap {
        let output = try PixelStorage.allocate(width: width, height: height, channels: 3, label: label)
        withExtendedLifetime(bitmap) {
            reduce(
                bitmap.storage.pointer.assumingMemoryBound(to: UInt8.self), width: bitmap.width,
                height: bitmap.height, into: output.pointer.assumingMemoryBound(to: UInt8.self), outWidth: width,
                outHeight: height)
        }
        return Bitmap(width: width, height: height, channels: 3, scale: bitmap.scale, storage: output)
    }

    /// Reduces `width`×`height` RGB pixels to `outWidth`×`outHeight` (each no larger) into `output`.
    ///
    /// The sums are done in `Float` with the fixed-point weights (each a
    /// multiple of 2⁻¹⁴): every product and every partial sum of 8-bit values
    /// is then a multiple of 2⁻¹⁴ below 2¹⁰, which a `Float` holds exactly, so
    /// the result is bit for bit the 14-bit integer arithmetic's, without the
    /// 32-bit lane multiplies baseline x86-64 lacks.
    static func reduce(
        _ input: UnsafePointer<UInt8>, width: Int, height: Int,
        into output: UnsafeMutablePointer<UInt8>, outWidth: Int, outHeight: Int
    ) {
        // The intermediate image and one input row, as floats, each with a float of slack
        // for the four-wide loads and stores; from this thread's reused scratch memory.
        let floats = outWidth * 3 * height + 1 + width * 3 + 1
        let done: Void? = ScratchMemory.withMemory(floats * MemoryLayout<Float>.stride) { scratch in
            reduce(
                input, width: width, height: height, into: output, outWidth: outWidth, outHeight: outHeight,
                scratch: scratch.bindMemory(to: Float.self, capacity: floats))
        }
        if done == nil {
            let scratch = UnsafeMutablePointer<Float>.allocate(capacity: floats)
            defer { scratch.deallocate() }
            reduce(
                input, width: width, height: height, into: output, outWidth: outWidth, outHeight: outHeight,
                scratch: scratch)
        }
    }

    private static func reduce(
        _ input: UnsafePointer<UInt8>, width: Int, height: Int,
        into output: UnsafeMutablePointer<UInt8>, outWidth: Int, outHeight: Int,
        scratch: UnsafeMutablePointer<Float>
    ) {
        let horizontal = taps(input: width, output: outWidth)
        let vertical = taps(input: height, output: outHeight)
        let unit = 1 / Float(Int32(1) << precision)
        // Horizontal weights already spread over the four lanes they multiply.
        let horizontalWeights = horizontal.weights.map { SIMD4<Float>(repeating: Float($0) * unit) }
        let verticalWeights = vertical.weights.map { Float($0) * unit }
        let (inValues, outValues) = (width * 3, outWidth * 3)
        let floatSize = MemoryLayout<Float>.stride
        // The horizontal pass's 8-bit results (as floats) for the vertical pass, then one input row.
        let intermediate = scratch
        let row = scratch + outValues * height + 1
        row[inValues] = 0
        let count = horizontal.count
        // Where each output pixel's taps start in `row`, in bytes.
        let offsets = horizontal.start.map { $0 * 3 * floatSize }
        horizontalWeights.withUnsafeBufferPointer { weights in
            offsets.withUnsafeBufferPointer { offsets in
                guard let weights = weights.baseAddress, let offsets = offsets.baseAddress else { return }
                let base = UnsafeRawPointer(row)
                for y in 0..<height {
                    widen(input + y * inValues, count: inValues, into: row)
                    let target = UnsafeMutableRawPointer(intermediate + y * outValues)
                    // Fixed tap counts (a residual reduce of 1–2× takes 4 to 8) are unrolled.
                    switch count {
                    case 4:
                        horizontalRow(
                            Taps4.self, row: base, offsets: offsets, weights: weights, outWidth: outWidth, into: target)
                    case 5:
                        horizontalRow(
                            Taps5.self, row: base, offsets: offsets, weights: weights, outWidth: outWidth, into: target)
                    case 6:
                        horizontalRow(
                            Taps6.self, row: base, offsets: offsets, weights: weights, outWidth: outWidth, into: target)
                    case 7:
                        horizontalRow(
                            Taps7.self, row: base, offsets: offsets, weights: weights, outWidth: outWidth, into: target)
                    case 8:
                        horizontalRow(
                            Taps8.self, row: base, offsets: offsets, weights: weights, outWidth: outWidth, into: target)
                    default:
                        horizontalRow(
                            count: count, row: base, offsets: offsets, weights: weights, outWidth: outWidth,
                            into: target)
                    }
                }
            }
        }
        verticalWeights.withUnsafeBufferPointer { weights in
            guard let weights = weights.baseAddress else { return }
            let taps = vertical.count
            for y in 0..<outHeight {
                let w = weights + y * taps
                let first = UnsafeRawPointer(intermediate + vertical.start[y] * outValues)
                let target = output + y * outValues
                switch taps {
                case 4: verticalRow(Taps4.self, first: first, values: outValues, weights: w, into: target)
                case 5: verticalRow(Taps5.self, first: first, values: outValues, weights: w, into: target)
                case 6: verticalRow(Taps6.self, first: first, values: outValues, weights: w, into: target)
                case 7: verticalRow(Taps7.self, first: first, values: outValues, weights: w, into: target)
                case 8: verticalRow(Taps8.self, first: first, values: outValues, weights: w, into: target)
                default: verticalRow(count: taps, first: first, values: outValues, weights: w, into: target)
                }
            }
        }
    }

    /// One output row of the vertical pass with `Count.value` taps.
    @inline(__always)
    static func verticalRow<Count: TapCount>(
        _: Count.Type, first: UnsafeRawPointer, values: Int,
        weights: UnsafePointer<Float>, into target: UnsafeMutablePointer<UInt8>
    ) {
        verticalRow(count: Count.value, first: first, values: values, weights: weights, into: target)
    }

    /// One output row of the vertical pass: `values` sums over `count` rows of floats from
    /// `first` (one row apart), rounded to bytes.
    @inline(__always)
    static func verticalRow(
        count: Int, first: UnsafeRawPointer, values: Int, weights: UnsafePointer<Float>,
        into target: UnsafeMutablePointer<UInt8>
    ) {
        let stride = values * MemoryLayout<Float>.stride
        var i = 0
        while i + 16 <= values {
            var sum = SIMD16<Float>(repeating: bias)
            let source = first + i * MemoryLayout<Float>.stride
            for k in 0..<count {
                sum += source.loadUnaligned(fromByteOffset: k &* stride, as: SIMD16<Float>.self) * weights[k]
            }
            UnsafeMutableRawPointer(target + i).storeBytes(of: bytes(sum), as: SIMD16<UInt8>.self)
            i += 16
        }
        while i < values {
            var sum = bias
            for k in 0..<count {
                sum +=
                    weights[k] * first.load(fromByteOffset: k * stride + i * MemoryLayout<Float>.stride, as: Float.self)
            }
            target[i] = UInt8(min(255, max(0, sum.rounded(.toNearestOrEven))))
            i += 1
        }
    }

    /// A tap count known when compiling, so the loop over the taps unrolls.
    protocol TapCount { static var value: Int { get } }
    enum Taps4: TapCount { static var value: Int { 4 } }
    enum Taps5: TapCount { static var value: Int { 5 } }
    enum Taps6: TapCount { static var value: Int { 6 } }
    enum Taps7: TapCount { static var value: Int { 7 } }
    enum Taps8: TapCount { static var value: Int { 8 } }

    /// One row of the horizontal pass with `Count.value` taps per output pixel.
    @inline(__always)
    static func horizontalRow<Count: TapCount>(
        _: Count.Type, row: UnsafeRawPointer, offsets: UnsafePointer<Int>,
        weights: UnsafePointer<SIMD4<Float>>, outWidth: Int,
        into target: UnsafeMutableRawPointer
    ) {
        horizontalRow(
            count: Count.value, row: row, offsets: offsets, weights: weights, outWidth: outWidth, into: target)
    }

    /// One row of the horizontal pass: each output pixel sums `count` input pixels of `row`
    /// (floats) from its offset, with its weights, and is stored rounded to 8 bits (as floats).
    @inline(__always)
    static func horizontalRow(
        count: Int, row: UnsafeRawPointer, offsets: UnsafePointer<Int>,
        weights: UnsafePointer<SIMD4<Float>>, outWidth: Int, into target: UnsafeMutableRawPointer
    ) {
        let pixelBytes = 3 * MemoryLayout<Float>.stride
        var target = target
        var w = weights
        for x in 0..<outWidth {
            // A pixel's three values read as four: the fourth (the next pixel's
            // red, or the slack) is weighed and dropped.
            let pixel = row + offsets[x]
            var sum = SIMD4<Float>(repeating: bias)
            for k in 0..<count {
                sum += pixel.loadUnaligned(fromByteOffset: k &* pixelBytes, as: SIMD4<Float>.self) * w[k]
            }
            target.storeBytes(of: rounded(sum), as: SIMD4<Float>.self)
            target += pixelBytes
            w += count
        }
    }

    // Conversions between floats holding whole numbers and integers, done on the bits: a
    // float of magnitude 1.5 × 2²³ has a unit step, so adding it rounds to a whole number
    // held in the low mantissa bits. (The stdlib's SIMD float–integer conversions and float
    // `clamped` are generic lane-by-lane code, ten times slower than the arithmetic.)
    static let magic: Float = 12_582_912
    static let magicBits: UInt32 = 0x4B40_0000

    /// Widens `count` bytes to floats.
    @inline(__always)
    static func widen(_ bytes: UnsafePointer<UInt8>, count: Int, into floats: UnsafeMutablePointer<Float>) {
        var i = 0
        while i + 16 <= count {
            let values = SIMD16<UInt32>(
                truncatingIfNeeded: UnsafeRawPointer(bytes + i).loadUnaligned(as: SIMD16<UInt8>.self))
            let biased = unsafeBitCast(values | SIMD16(repeating: magicBits), to: SIMD16<Float>.self)
            UnsafeMutableRawPointer(floats + i).storeBytes(
                of: biased - SIMD16(repeating: magic), as: SIMD16<Float>.self)
            i += 16
        }
        while i < count {
            floats[i] = Float(bytes[i])
            i += 1
        }
    }

    /// The sum that starts every output value: 2⁻¹⁵, so rounding the total to the nearest
    /// whole number (never a tie: the sums are multiples of 2⁻¹⁴) is floor(total + ½), the
    /// integer arithmetic's `(sum + half) >> precision`.
    static let bias = Float(1) / Float(1 << 15)

    /// Sixteen sums rounded to whole numbers and clamped to 0...255.
    @inline(__always)
    static func bytes(_ sum: SIMD16<Float>) -> SIMD16<UInt8> {
        // In halves: the stdlib's `clamped` is inlined for eight lanes, not for sixteen.
        @inline(__always) func half(_ sum: SIMD8<Float>) -> SIMD8<UInt8> {
            let shifted = unsafeBitCast(sum + SIMD8(repeating: magic), to: SIMD8<Int32>.self)
            let integer = (shifted &- SIMD8(repeating: Int32(bitPattern: magicBits))).clamped(
                lowerBound: .zero, upperBound: SIMD8(repeating: 255))
            return SIMD8<UInt8>(truncatingIfNeeded: integer)
        }
        return SIMD16(lowHalf: half(sum.lowHalf), highHalf: half(sum.highHalf))
    }

    /// The 8-bit value of a horizontal sum, back as a float.
    @inline(__always)
    static func rounded(_ sum: SIMD4<Float>) -> SIMD4<Float> {
        let shifted = unsafeBitCast(sum + SIMD4(repeating: magic), to: SIMD4<Int32>.self)
        let integer = (shifted &- SIMD4(repeating: Int32(bitPattern: magicBits))).clamped(
            lowerBound: .zero, upperBound: SIMD4(repeating: 255))
        return unsafeBitCast(integer | SIMD4(repeating: Int32(bitPattern: magicBits)), to: SIMD4<Float>.self)
            - SIMD4(repeating: magic)
    }

}
