import Foundation

/// A file's identity: device, inode, size and modification time in
/// nanoseconds. It changes when the file is replaced (a new inode) or
/// rewritten in place (a new size or time), so cached results of the old
/// contents are not served for the new. Plain integers: comparing and
/// hashing one costs a few nanoseconds on the memory-hit path.
struct FileIdentity: Sendable, Hashable, CustomStringConvertible {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let seconds: Int64
    let nanoseconds: Int64

    /// The identity of the file at `path` now (symbolic links followed), or
    /// nil when it cannot be read (the load then reports why).
    static func current(of path: String) -> FileIdentity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileIdentity(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            seconds: Int64(info.st_mtim.tv_sec), nanoseconds: Int64(info.st_mtim.tv_nsec))
    }

    /// "device:inode:size:seconds.nanoseconds".
    var description: String { "\(device):\(inode):\(size):\(seconds).\(nanoseconds)" }
}
