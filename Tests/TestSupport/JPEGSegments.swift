import Foundation

/// Reads a JPEG's marker segments, for tests that check what an encoder wrote
/// (its component count, whether a segment such as APP2's ICC profile is there).
public enum JPEGSegments {
    /// The number of colour components the frame header (SOF0–SOF2) names; nil without one.
    public static func components(_ data: Data) -> Int? {
        let bytes = [UInt8](data)
        var offset = 2
        while offset + 9 < bytes.count, bytes[offset] == 0xFF {
            if (0xC0...0xC2).contains(bytes[offset + 1]) { return Int(bytes[offset + 9]) }
            offset += 2 + Int(bytes[offset + 2]) << 8 + Int(bytes[offset + 3])
        }
        return nil
    }

    /// Whether a segment with `marker` (0xE2 for APP2) comes before the scan.
    public static func contains(_ data: Data, marker: UInt8) -> Bool {
        let bytes = [UInt8](data)
        var offset = 2
        while offset + 4 <= bytes.count, bytes[offset] == 0xFF, bytes[offset + 1] != 0xDA {
            if bytes[offset + 1] == marker { return true }
            offset += 2 + Int(bytes[offset + 2]) << 8 + Int(bytes[offset + 3])
        }
        return false
    }
}
