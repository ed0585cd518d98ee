/// Bounds-checked little-endian reads over an encoded file, for the Swift
/// decoders of BMP, ICO and TGA: every read outside the bytes is nil, never
/// a trap, and offsets are plain `Int`s checked before use.
struct ByteView {
    /// The bytes read from (borrowed: valid while the caller's buffer is).
    let bytes: UnsafeRawBufferPointer

    /// The number of bytes.
    var count: Int { bytes.count }

    /// The byte at `offset`, nil outside the bytes.
    func u8(_ offset: Int) -> UInt8? {
        offset >= 0 && offset < bytes.count ? bytes[offset] : nil
    }

    /// The little-endian 16-bit value at `offset`, nil when it runs off the end.
    func u16(_ offset: Int) -> Int? {
        guard offset >= 0, offset <= bytes.count - 2 else { return nil }
        return Int(bytes[offset]) | Int(bytes[offset + 1]) << 8
    }

    /// The little-endian 32-bit value at `offset`, nil when it runs off the end.
    func u32(_ offset: Int) -> UInt32? {
        guard offset >= 0, offset <= bytes.count - 4 else { return nil }
        return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
            | UInt32(bytes[offset + 3]) << 24
    }

    /// The big-endian 32-bit value at `offset` (a PNG's), nil when it runs off the end.
    func u32BigEndian(_ offset: Int) -> UInt32? {
        u32(offset).map { $0.byteSwapped }
    }

    /// The little-endian signed 32-bit value at `offset`, nil when it runs off the end.
    func i32(_ offset: Int) -> Int? {
        u32(offset).map { Int(Int32(bitPattern: $0)) }
    }

    /// The bytes from `offset` (clamped to the end): what is there of a section that may be cut short.
    func tail(from offset: Int) -> ByteView {
        let start = min(max(0, offset), bytes.count)
        return ByteView(bytes: UnsafeRawBufferPointer(rebasing: bytes[start...]))
    }

    /// The `count` bytes at `offset`, nil unless all of them are there.
    func slice(_ offset: Int, _ count: Int) -> ByteView? {
        guard offset >= 0, count >= 0, offset <= bytes.count, count <= bytes.count - offset else { return nil }
        return ByteView(bytes: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)]))
    }
}
