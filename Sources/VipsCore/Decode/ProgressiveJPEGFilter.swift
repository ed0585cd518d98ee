import Foundation

/// Drops the AC scans of a progressive JPEG, keeping every DC scan.
///
/// When a JPEG is decoded at 1/8 scale, each 8×8 block becomes one pixel whose
/// value is the block's DC coefficient: the AC coefficients do not take part
/// for full-resolution components. A progressive file sends DC and AC in
/// separate scans, and the AC scans are typically 85–90 % of the bytes and
/// most of the entropy-decoding time. libjpeg cannot skip them, so we remove
/// them from the byte stream before libjpeg sees it. Luma comes out the same;
/// subsampled chroma, which libjpeg rebuilds at 2×2 per block, loses detail
/// below its own 16-pixel block (invisible in a thumbnail).
///
/// Every length and marker is bounds-checked; any structure we do not
/// understand returns nil and the caller decodes the original bytes.
enum ProgressiveJPEGFilter {
    /// The DC-only stream, or nil when `jpeg` is not a well-formed progressive
    /// Huffman JPEG (SOF2) that this filter knows how to shorten.
    static func dcOnly(_ jpeg: UnsafeRawBufferPointer) -> Data? {
        let bytes = jpeg.bindMemory(to: UInt8.self)
        let count = bytes.count
        guard count > 4, bytes[0] == 0xFF, bytes[1] == 0xD8, let base = bytes.baseAddress else { return nil }
        var output = Data(capacity: count / 6)
        output.append(contentsOf: [0xFF, 0xD8])
        var index = 2
        var sawProgressiveFrame = false
        var droppedScans = 0

        while index < count - 1 {
            guard bytes[index] == 0xFF else { return nil }
            while index < count && bytes[index] == 0xFF { index += 1 }
            guard index < count else { return nil }
            let marker = bytes[index]
            index += 1
            if marker == 0xD9 { break }
            if (0xD0...0xD7).contains(marker) || marker == 0x01 { continue }
            guard index + 2 <= count else { return nil }
            let length = Int(bytes[index]) << 8 | Int(bytes[index + 1])
            guard length >= 2, index + length <= count else { return nil }
            let segment = UnsafeRawBufferPointer(start: base + index, count: length)
            switch marker {
            case 0xC2:
                sawProgressiveFrame = true
            case let other where JPEGMarkers.isOtherFrame(other):
                return nil // not a progressive Huffman frame: nothing to gain, or nothing handled here
            default:
                break
            }
            if marker == 0xDA {
                guard sawProgressiveFrame, length >= 6 else { return nil }
                let components = Int(bytes[index + 2])
                guard components >= 1, 3 + 2 * components + 3 <= length else { return nil }
                let spectralStart = bytes[index + 3 + 2 * components]
                guard let end = JPEGMarkers.endOfEntropyData(bytes, from: index + length) else { return nil }
                if spectralStart == 0 {
                    output.append(contentsOf: [0xFF, marker])
                    output.append(contentsOf: segment)
                    output.append(
                        contentsOf: UnsafeRawBufferPointer(start: base + index + length, count: end - index - length))
                } else {
                    droppedScans += 1
                }
                index = end
            } else {
                output.append(contentsOf: [0xFF, marker])
                output.append(contentsOf: segment)
                index += length
            }
        }
        guard sawProgressiveFrame, droppedScans > 0 else { return nil }
        output.append(contentsOf: [0xFF, 0xD9])
        return output
    }
}
