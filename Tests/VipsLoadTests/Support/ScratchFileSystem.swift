import Foundation
import VipsLoad
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A small tmpfs the test mounts on a fresh folder: a real file system that
/// fills up (ENOSPC) and can be switched read-only (EROFS), so the disk
/// cache meets the same errors a full or failing disk gives.
///
/// Mounting needs CAP_SYS_ADMIN (root, as in the project's sandbox and CI);
/// elsewhere `init` throws `XCTSkip` saying so.
final class ScratchFileSystem {
    let root: URL
    private let options: String
    private var mounted = true

    /// Mounts a tmpfs of `size` bytes (rounded up to pages by the kernel).
    init(size: Int) throws {
        root = NetworkFixtures.makeDirectory("fs")
        options = "size=\(size),mode=0755"
        guard mount("tmpfs", root.path, "tmpfs", 0, options) == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(at: root)
            throw XCTSkip(
                "cannot mount a \(size)-byte tmpfs for the fault test (\(reason)): mounting needs CAP_SYS_ADMIN")
        }
    }

    deinit { unmount() }

    /// Remounts the file system read-only, or writable again.
    func setReadOnly(_ readOnly: Bool) throws {
        let flags = UInt(MS_REMOUNT) | (readOnly ? UInt(MS_RDONLY) : 0)
        guard mount("tmpfs", root.path, "tmpfs", flags, options) == 0 else {
            throw VipsError(
                .io,
                "cannot remount \(root.path) \(readOnly ? "read-only" : "read-write"): \(String(cString: strerror(errno)))"
            )
        }
    }

    /// Unmounts (lazily, should a file still be open) and removes the folder.
    func unmount() {
        guard mounted else { return }
        mounted = false
        umount2(root.path, Int32(MNT_DETACH))
        try? FileManager.default.removeItem(at: root)
    }
}
