/// Reads the orientation tag (0x0112) of IFD0 from the TIFF structure of an
/// EXIF APP1 segment. Every offset is checked; nil for anything malformed or
/// a value outside 1–8.
enum EXIFOrientation {
    static func read(_ tiff: UnsafeRawBufferPointer) -> Int? {
        guard tiff.count >= 8 else { return nil }
        let little: Bool
        switch (tiff[0], tiff[1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return nil
        }
        func u16(_ at: Int) -> Int? {
            guard at >= 0, at + 2 <= tiff.count else { return nil }
            let a = Int(tiff[at]), b = Int(tiff[at + 1])
            return little ? a | b << 8 : a << 8 | b
        }
        func u32(_ at: Int) -> Int? {
            guard let low = u16(little ? at : at + 2), let high = u16(little ? at + 2 : at) else { return nil }
            return high << 16 | low
        }
        guard u16(2) == 42, let ifd = u32(4), let entries = u16(ifd) else { return nil }
        // An IFD holds at most (bytes left) / 12 entries, whatever it declares.
        for entry in 0..<min(entries, max(0, (tiff.count - ifd - 2) / 12)) {
            let at = ifd + 2 + entry * 12
            guard u16(at) == 0x0112 else { continue }
            // SHORT (3), count 1: the value sits in the first two bytes of the value field.
            guard u16(at + 2) == 3, u32(at + 4) == 1, let value = u16(at + 8), (1...8).contains(value) else {
                return nil
            }
            return value
        }
        return nil
    }
}
