import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The owner of this process's uncached downloads: a private folder per
/// download directory, so no download file outlives the process that made it.
///
/// - Each process keeps its files in `<directory>/<pid>-<random>/`, holding an
///   exclusive `flock` on the folder's `.lock` file for as long as it lives
///   (the kernel drops it when the process ends, however it ends).
/// - The folder is removed when the process exits (`atexit`), whatever still
///   holds an `ImageData` for a file in it, and by `removeAll()`, which a
///   program calls from its SIGINT/SIGTERM handling before exiting.
/// - The first download into a directory sweeps the folders of processes that
///   are gone (their lock is free), so a SIGKILL leaves files only until the
///   next run.
public enum TemporaryDownloads {
    /// The name of the lock file in each private folder.
    static let lockFileName = ".lock"

    private struct Folder {
        let path: String
        /// The descriptor holding the folder's lock (closed when the folder is removed).
        let lock: Int32
    }

    private struct State {
        /// The private folder of each download directory, by the directory's path.
        var folders: [String: Folder] = [:]
        /// Directories swept already by this process.
        var swept: Set<String> = []
        var exitHookInstalled = false
        /// Set by `removeAll()`: the process is ending, so no new folder is made.
        var closed = false
    }

    private static let state = LockedState(State())

    /// Removes every private folder of this process, with the downloads in
    /// it, and refuses new downloads from then on (they fail `.cancelled`).
    ///
    /// For a process about to exit: call it from a normal thread (a
    /// `DispatchSourceSignal` handler, say), never from a raw signal handler,
    /// which may not allocate or take locks. It also runs at `exit`.
    public static func removeAll() {
        let folders = state.withLock { state -> [Folder] in
            state.closed = true
            defer { state.folders = [:] }
            return Array(state.folders.values)
        }
        for folder in folders { remove(folder) }
    }

    /// This process's private folder in `directory` (both created when
    /// missing, and made again when deleted meanwhile). The first call for a
    /// directory first sweeps the folders of processes that are gone.
    static func folder(in directory: String) throws(VipsError) -> String {
        let (existing, mustSweep, installHook, closed) = state.withLock { state in
            defer {
                state.swept.insert(directory)
                state.exitHookInstalled = true
            }
            return (state.folders[directory], !state.swept.contains(directory), !state.exitHookInstalled, state.closed)
        }
        if closed { throw VipsError(.cancelled, "\(directory): the process is exiting; no new downloads") }
        if installHook { atexit { TemporaryDownloads.removeAll() } }
        if let existing, access(existing.path, F_OK) == 0 { return existing.path }

        if !FileManager.default.fileExists(atPath: directory) {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw VipsError(.io, "cannot create \(directory): \(error.localizedDescription)")
            }
        }
        if mustSweep { sweep(directory) }
        let created = try create(in: directory)
        // Another thread may have made one meanwhile: the first one stays.
        let (winner, replaced, lateClose) = state.withLock { state -> (Folder, Folder?, Bool) in
            if state.closed { return (created, nil, true) }
            if let current = state.folders[directory], current.path != existing?.path { return (current, nil, false) }
            let previous = state.folders[directory]
            state.folders[directory] = created
            return (created, previous, false)
        }
        if lateClose {
            remove(created)
            throw VipsError(.cancelled, "\(directory): the process is exiting; no new downloads")
        }
        if winner.path != created.path { remove(created) }
        if let replaced { remove(replaced) }
        return winner.path
    }

    /// Makes a new folder `<pid>-<random>` in `directory` and takes its lock.
    ///
    /// The folder is made and locked under a name no sweeper looks at
    /// (`.<pid>-<random>.new`) and only then renamed to its final name, so a
    /// sweeping process can never find it unlocked and take it away.
    private static func create(in directory: String) throws(VipsError) -> Folder {
        for _ in 0..<8 {
            let name = "\(getpid())-" + StreamingFileWriter.randomName()
            let staging = directory + "/." + name + ".new"
            let path = directory + "/" + name
            guard mkdir(staging, 0o700) == 0 else {
                if errno == EEXIST { continue }
                throw VipsError(.io, "cannot create \(staging): \(String(cString: strerror(errno)))")
            }
            // Close-on-exec, so a child process never inherits (and keeps) the lock.
            // Read-only: flock needs no write access, and a file held open for
            // writing would keep its file system from being remounted read-only.
            let fd = open(staging + "/" + lockFileName, O_RDONLY | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0, flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                let reason = String(cString: strerror(errno))
                if fd >= 0 { close(fd) }
                removeTree(staging)
                throw VipsError(.io, "cannot lock \(staging): \(reason)")
            }
            guard rename(staging, path) == 0 else {
                let code = errno
                close(fd)
                removeTree(staging)
                if code == EEXIST || code == ENOTEMPTY { continue }
                throw VipsError(.io, "cannot create \(path): \(String(cString: strerror(code)))")
            }
            return Folder(path: path, lock: fd)
        }
        throw VipsError(.io, "cannot create a private folder in \(directory)")
    }

    private static func remove(_ folder: Folder) {
        removeTree(folder.path)
        close(folder.lock)
    }

    /// Removes the private folders in `directory` whose owner is gone: its
    /// lock can be taken, or (a folder without a lock file, its owner killed
    /// while making it) its process no longer exists. Files an older
    /// version left directly in `directory` go once they are an hour old.
    static func sweep(_ directory: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        let own = Set(state.withLock { $0.folders.values.map(\.path) })
        for name in names {
            let path = directory + "/" + name
            if name.hasPrefix("download-") {
                if let modified = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate]
                    as? Date,
                    modified.timeIntervalSinceNow < -3600
                {
                    unlink(path)
                }
                continue
            }
            if name.hasPrefix("."), name.hasSuffix(".new") {
                // A folder still being made, or whose maker died before renaming it.
                if let owner = ownerID(of: String(name.dropFirst().dropLast(4))), kill(owner, 0) != 0, errno == ESRCH {
                    removeTree(path)
                }
                continue
            }
            guard let owner = ownerID(of: name), !own.contains(path) else { continue }
            let fd = open(path + "/" + lockFileName, O_RDONLY | O_CLOEXEC)
            if fd >= 0 {
                // Held while removing, so two sweeping processes never race on one folder.
                if flock(fd, LOCK_EX | LOCK_NB) == 0 { removeTree(path) }
                close(fd)
            } else if errno == ENOENT, kill(owner, 0) != 0, errno == ESRCH {
                removeTree(path)
            }
        }
    }

    /// The process ID in a private folder's name `<pid>-<16 hex digits>`, or nil for other names.
    private static func ownerID(of name: String) -> pid_t? {
        let parts = name.split(separator: "-")
        guard parts.count == 2, parts[1].count == 16, parts[1].allSatisfy(\.isHexDigit),
            let pid = pid_t(parts[0]), pid > 0
        else { return nil }
        return pid
    }

    private static func removeTree(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }
}
