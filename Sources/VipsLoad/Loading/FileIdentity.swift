import Foundation

/// A file's identity: device, inode, size and modification time in
/// nanoseconds. It changes when the file is replaced (a new inode) or
/// rewritten in place (a new size or time), so cached results of the old
/// contents are not served for the new.
enum FileIdentity {
    /// The identity of the file at `path` now (symbolic links followed), or
    /// "" when it cannot be read (the load then reports why).
    static func current(of path: String) -> String {
        var info = stat()
        guard stat(path, &info) == 0 else { return "" }
        return "\(info.st_dev):\(info.st_ino):\(info.st_size):\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
    }
}
