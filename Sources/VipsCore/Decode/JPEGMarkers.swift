import Foundation

/// The parts of a JPEG's marker structure that the readers cutting a stream short share
/// (`ProgressiveJPEGFilter`, `ProgressiveJPEGScans`). Bounds-checked; nothing here allocates.
enum JPEGMarkers {
    /// The index of the marker that ends the entropy-coded data starting at `start` in `bytes`,
    /// or nil when no such marker is there (the data runs to the end, or has not all arrived).
    /// 0xFF00 (a stuffed data byte), 0xFFD0–D7 (restart markers) and 0xFFFF (fill) are part of the data.
    static func endOfEntropyData(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        let count = bytes.count
        guard let base = bytes.baseAddress, start >= 0 else { return nil }
        var position = start
        while position < count - 1 {
            guard let found = memchr(base + position, 0xFF, count - 1 - position) else { return nil }
            let at = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            let next = bytes[at + 1]
            if next == 0x00 || (0xD0...0xD7).contains(next) || next == 0xFF {
                position = at + 1
                continue
            }
            return at
        }
        return nil
    }

    /// Whether `marker` starts a frame other than progressive Huffman (SOF2): baseline,
    /// extended, lossless, hierarchical or arithmetic-coded.
    static func isOtherFrame(_ marker: UInt8) -> Bool {
        switch marker {
        case 0xC0, 0xC1, 0xC3, 0xC5...0xC7, 0xC9...0xCB, 0xCD...0xCF: return true
        default: return false
        }
    }
}
