import Foundation

/// Scratch memory reused from image to image on each thread by the direct
/// paths, so a thumbnail does not map fresh pages from the kernel and fault
/// them in for every image: a block above the allocator's mmap threshold
/// (256 KiB in the CLI) would otherwise be mapped, zeroed by the kernel and
/// unmapped each time. Measured on 2000×1500 PNGs (`Benchmarks/faults.sh`):
/// the box shrink's image and the pass after it were about 900 of the 1,560
/// minor faults per image.
///
/// Each `Use` keeps one block per thread, so uses that overlap on a thread
/// each find their own again at the next image. A block is taken off its thread while in use (a nested use of
/// the same kind gets a fresh one), kept for the thread's next image only up
/// to its use's `keptLimit` bytes, and freed when the thread ends. A thread therefore
/// holds at most the sum of the uses' `keptLimit`s between images (4 + 4 + 16 + 16 MiB).
enum ScratchMemory {
    /// What a block is for; each keeps its own block per thread.
    enum Use: Int, CaseIterable {
        /// `CubicReducer`'s intermediate rows.
        case resizeRows
        /// `BoxCubicShrinker`'s box-shrunk image (its horizontal pass reuses it in place).
        case boxImage
        /// `PNGImageData`'s inflated image data.
        case inflatedPNG
        /// `PNGImageData`'s compressed stream, gathered from several IDAT chunks.
        case compressedPNG

        /// Whether a fresh block is made `keptLimit` bytes long whatever is asked (when that is
        /// enough), so it never has to be made again for a larger image: only the pages
        /// written are resident, so the unused rest costs address space, not memory. For the
        /// inflated PNG's blocks, whose size varies with every image (9 MB for a 2000×1500 RGB,
        /// 12 MB with alpha).
        var reservesKeptLimit: Bool { self == .inflatedPNG || self == .compressedPNG }

        /// The largest block a thread keeps between images for this use.
        var keptLimit: Int {
            switch self {
            case .resizeRows, .boxImage: return 4 << 20
            case .inflatedPNG: return PNGImageData.budget + ScratchMemory.header
            case .compressedPNG: return PNGImageData.budget + ScratchMemory.header
            }
        }
    }

    /// Bytes before the usable memory: the block's capacity, and alignment.
    private static let header = 64

    private static let keys: [pthread_key_t] = Use.allCases.map { _ in
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in free(pointer) }
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }

    /// At least `byteCount` bytes of 64-byte aligned memory, uninitialised, until the lease goes.
    final class Lease {
        /// The usable memory.
        let pointer: UnsafeMutableRawPointer
        private let block: UnsafeMutableRawPointer
        private let use: Use

        fileprivate init(block: UnsafeMutableRawPointer, use: Use) {
            self.block = block
            self.use = use
            pointer = block + ScratchMemory.header
        }

        deinit { ScratchMemory.giveBack(block, use) }
    }

    /// This thread's block for `use` when it is large enough, else a fresh one; nil when that
    /// memory cannot be had.
    static func lease(_ byteCount: Int, for use: Use) -> Lease? {
        guard byteCount >= 0 else { return nil }
        let key = keys[use.rawValue]
        var block = pthread_getspecific(key)
        if block != nil { pthread_setspecific(key, nil) }
        let (needed, overflow) = byteCount.addingReportingOverflow(header)
        guard !overflow else {
            free(block)
            return nil
        }
        if let existing = block, existing.load(as: Int.self) < needed {
            free(existing)
            block = nil
        }
        if block == nil {
            let capacity = use.reservesKeptLimit ? max(needed, use.keptLimit) : needed
            var fresh: UnsafeMutableRawPointer?
            guard posix_memalign(&fresh, header, capacity) == 0, let fresh else { return nil }
            fresh.storeBytes(of: capacity, as: Int.self)
            block = fresh
        }
        guard let block else { return nil }
        return Lease(block: block, use: use)
    }

    /// Runs `body` with at least `byteCount` bytes of 64-byte aligned memory,
    /// uninitialised; nil when that memory cannot be had.
    static func withMemory<R>(
        _ byteCount: Int, for use: Use = .resizeRows, _ body: (UnsafeMutableRawPointer) -> R
    ) -> R? {
        guard let lease = lease(byteCount, for: use) else { return nil }
        return withExtendedLifetime(lease) { body(lease.pointer) }
    }

    /// The size of the block this thread keeps for `use` (header included), 0 when it keeps none.
    static func keptBytes(for use: Use) -> Int {
        pthread_getspecific(keys[use.rawValue])?.load(as: Int.self) ?? 0
    }

    /// Keeps `block` as this thread's block for `use` when it is small enough and the slot is free.
    private static func giveBack(_ block: UnsafeMutableRawPointer, _ use: Use) {
        let key = keys[use.rawValue]
        if block.load(as: Int.self) <= use.keptLimit, pthread_getspecific(key) == nil {
            pthread_setspecific(key, block)
        } else {
            free(block)
        }
    }
}
