import Foundation

/// One block of scratch memory per thread, reused from image to image by the
/// direct paths (the resize's intermediate rows), so a thumbnail does not map
/// fresh pages from the kernel and fault them in for every image: a block
/// above the allocator's mmap threshold (256 KiB in the CLI) would otherwise
/// be mapped and unmapped each time.
///
/// A block is taken off its thread while in use (a nested use on the same
/// thread gets its own), kept for the thread's next image only up to
/// `keptLimit` bytes, and freed when the thread ends.
enum ScratchMemory {
    /// The largest block a thread keeps between images.
    static let keptLimit = 4 << 20

    /// Bytes before the usable memory: the block's capacity, and alignment.
    private static let header = 64

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in free(pointer) }
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// Runs `body` with at least `byteCount` bytes of 64-byte aligned memory,
    /// uninitialised; nil when that memory cannot be had.
    static func withMemory<R>(_ byteCount: Int, _ body: (UnsafeMutableRawPointer) -> R) -> R? {
        let key = Self.key
        var block = pthread_getspecific(key)
        if block != nil { pthread_setspecific(key, nil) }
        let needed = byteCount + header
        if let existing = block, existing.load(as: Int.self) < needed {
            free(existing)
            block = nil
        }
        if block == nil {
            var fresh: UnsafeMutableRawPointer?
            guard byteCount >= 0, posix_memalign(&fresh, header, needed) == 0, let fresh else { return nil }
            fresh.storeBytes(of: needed, as: Int.self)
            block = fresh
        }
        guard let block else { return nil }
        defer {
            if block.load(as: Int.self) <= keptLimit, pthread_getspecific(key) == nil {
                pthread_setspecific(key, block)
            } else {
                free(block)
            }
        }
        return body(block + header)
    }
}
