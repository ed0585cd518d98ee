import Foundation
import VipsCore

// Resize modes and processors with random parameters on every input the
// probe accepted. The parameters come from the input's own bytes (a hash
// seeding `InputSeededGenerator`), so a crasher reproduces from its file.
// Promises checked:
// - a bad parameter (a size ≤ 0, a mode that needs a box given one side, a
//   crop outside the image, a radius too large, an overlay larger than the
//   base, a blur sigma of 0, NaN or 1e9) fails with `.invalidArgument`, never a crash;
// - fill and stretch give exactly the box (each side clamped to the image), contain exactly the box;
// - processed bitmaps are 8-bit RGB/RGBA with the byte count of their size.

private func broken(_ message: String) -> Never {
    fatalError("invariant broken: \(message)")
}

private func checkShape(_ bitmap: Bitmap, _ what: String) {
    guard bitmap.width > 0, bitmap.height > 0, bitmap.channels == 3 || bitmap.channels == 4,
        bitmap.cost == bitmap.width * bitmap.height * bitmap.channels
    else {
        broken("\(what): bitmap \(bitmap.width)×\(bitmap.height)×\(bitmap.channels), \(bitmap.cost) bytes")
    }
}

/// Pseudo-random numbers from a seed (xorshift64*): the harness's own, since
/// the project's `SplitMix64` lives in `VipsSynthesis`, a target of the root
/// package that this separate package cannot import.
private struct InputSeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed | 1 }

    mutating func next() -> UInt64 {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return state &* 0x2545_F491_4F6C_DD1D
    }
}

/// Runs one random mode and one random processor chain over `input`.
func fuzzGeometry(_ data: Data, info: ImageInfo, decoder: ImageDecoder) {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in data.prefix(4096) { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
    var random = InputSeededGenerator(seed: hash ^ UInt64(data.count))
    let input = ImageInput.data(data)

    // Mostly small valid sides, sometimes zero or negative.
    func side() -> Int {
        Int.random(in: 0..<10, using: &random) == 0
            ? Int.random(in: -3...0, using: &random) : Int.random(in: 1...64, using: &random)
    }
    let sizes: [TargetSize] = [
        .fit(width: side(), height: side()), .maxPixelSize(side()), .width(side()), .height(side())
    ]
    let size = sizes[Int.random(in: 0..<sizes.count, using: &random)]
    let gravity = Gravity.allCases[Int.random(in: 0..<Gravity.allCases.count, using: &random)]
    let modes: [ResizeMode] = [.fit, .fill(gravity), .contain(background: .transparent, gravity: gravity), .stretch]
    let mode = modes[Int.random(in: 0..<modes.count, using: &random)]
    let what = "\(mode) into \(size) of \(info.width)×\(info.height)"
    let expectedInvalid: Bool
    do throws(VipsError) {
        try mode.validate(for: size)
        expectedInvalid = !size.isValid
    } catch {
        expectedInvalid = true
    }
    let bitmap: Bitmap
    do throws(VipsError) {
        bitmap = try decoder.decode(input, size: size, mode: mode)
    } catch {
        if expectedInvalid, error.kind != .invalidArgument { broken("\(what): \(error.kind), not invalidArgument") }
        return
    }
    if expectedInvalid { broken("\(what) succeeded with an invalid size or mode") }
    checkShape(bitmap, what)
    if let box = size.pixelBox(scale: 1) {
        let clamped = [min(box.width, info.width), min(box.height, info.height)]
        switch mode {
        case .fill, .stretch:
            if [bitmap.width, bitmap.height] != clamped {
                broken("\(what) gave \(bitmap.width)×\(bitmap.height), not \(clamped)")
            }
        case .contain:
            if [bitmap.width, bitmap.height] != [box.width, box.height] {
                broken("\(what) gave \(bitmap.width)×\(bitmap.height)")
            }
        case .fit:
            break
        }
    }

    // A chain of one to three processors with random, sometimes bad, parameters.
    func value(_ range: ClosedRange<Double>) -> Double {
        switch Int.random(in: 0..<12, using: &random) {
        case 0: return .nan
        case 1: return 0
        case 2: return 1e9
        case 3: return -1
        default: return Double.random(in: range, using: &random)
        }
    }
    func coordinate() -> Int { Int.random(in: -2...80, using: &random) }
    var chain: [any ImageProcessing] = []
    for _ in 0..<Int.random(in: 1...3, using: &random) {
        switch Int.random(in: 0..<10, using: &random) {
        case 0:
            chain.append(
                ImageProcessors.Crop(x: coordinate(), y: coordinate(), width: coordinate(), height: coordinate()))
        case 1: chain.append(ImageProcessors.RoundedCorners(radius: value(0...40)))
        case 2: chain.append(ImageProcessors.Circle())
        case 3: chain.append(ImageProcessors.GaussianBlur(sigma: value(0.1...5)))
        case 4: chain.append(ImageProcessors.Sharpen(sigma: value(0.1...3)))
        case 5:
            chain.append(
                ImageProcessors.Rotate([.degrees90, .degrees180, .degrees270][Int.random(in: 0...2, using: &random)]))
        case 6: chain.append(ImageProcessors.Flip(Bool.random(using: &random) ? .horizontal : .vertical))
        case 7: chain.append(ImageProcessors.Greyscale())
        default:
            // The decoded bitmap over itself, possibly cropped smaller first: sometimes larger than the base.
            chain.append(ImageProcessors.Overlay(bitmap, gravity: gravity, opacity: value(0...1)))
        }
    }
    let composition = ImageProcessors.Composition(chain)
    do throws(VipsError) {
        checkShape(
            try composition.process(bitmap), "processors \(composition.identifier) on \(bitmap.width)×\(bitmap.height)")
    } catch {
        if error.kind != .invalidArgument {
            broken("processors \(composition.identifier): \(error.kind): \(error.message)")
        }
    }
}
