import Foundation
import VipsCore

/// Writes thumbnails atomically into one output folder: each is written to a
/// temporary file in the folder's `.vipsload-tmp`, then renamed into place,
/// so a killed run never leaves a partial thumbnail under a final name.
/// The folders are made at the first write, so a run that writes nothing
/// (every input failed) leaves no empty output folder behind.
///
/// A temporary file is named after its host and process
/// (`<host>.<pid>.<n>.tmp`). The writer removes its own at `finish()`; a later
/// run removes those of processes of this host that are gone (so a `kill -9`
/// leaves nothing after the rerun), and those of any host older than a day.
/// Several processes (shards) may share one output folder.
///
/// A clean shutdown on SIGINT/SIGTERM should call `removeAllTemporaryFiles()`
/// before it exits, so that a write cut short leaves nothing behind even
/// before the next run's sweep.
final class OutputWriter: Sendable {
    /// The name of the folder holding temporary files inside the output folder.
    static let temporaryFolderName = ".vipsload-tmp"

    let folder: URL
    private let temporaryFolder: URL
    private let prefix: String
    private let counter = LockedState(0)
    /// Whether the folders were made, or why they could not be (nil: not tried yet).
    private let made = LockedState<Result<Void, VipsError>?>(nil)

    /// A writer into `folder`, which is made at the first write. Refuses a
    /// path that exists and is not a folder; sweeps the leftovers of dead
    /// processes when the folder exists already.
    init(folder: URL) throws(VipsError) {
        self.folder = folder
        temporaryFolder = folder.appendingPathComponent(Self.temporaryFolderName, isDirectory: true)
        prefix = "\(Self.hostName).\(getpid())."
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw VipsError(.io, "cannot write thumbnails into \(folder.path): it is not a folder")
        }
        sweep()
        let entry = (temporaryFolder.path, prefix)
        Self.live.withLock { $0.append(entry) }
    }

    /// Makes the output folder and its temporary folder, once; every later call gets the first one's result.
    private func makeFolders() throws(VipsError) {
        let result = made.withLock { made -> Result<Void, VipsError> in
            if let made { return made }
            let result: Result<Void, VipsError>
            do {
                try FileManager.default.createDirectory(at: temporaryFolder, withIntermediateDirectories: true)
                result = .success(())
            } catch {
                result = .failure(VipsError(.io, "cannot create \(folder.path): \(error.localizedDescription)"))
            }
            made = result
            return result
        }
        try result.get()
    }

    /// The temporary folders and file-name prefixes of this process's writers.
    private static let live = LockedState<[(folder: String, prefix: String)]>([])

    /// Removes the temporary files of every writer of this process (for a
    /// shutdown that cannot wait for the writes in flight).
    static func removeAllTemporaryFiles() {
        for (folder, prefix) in live.withLock({ $0 }) {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            where name.hasPrefix(prefix) {
                unlink(folder + "/" + name)
            }
            rmdir(folder)
        }
    }

    /// Writes `data` to `relativePath` inside the folder, atomically; returns the final file's status.
    @discardableResult
    func write(_ data: Data, to relativePath: String) throws(VipsError) -> stat {
        try makeFolders()
        let final = folder.appendingPathComponent(relativePath)
        let number = counter.withLock { count -> Int in
            count += 1
            return count
        }
        let temporary = temporaryFolder.appendingPathComponent("\(prefix)\(number).tmp").path
        do {
            try FileManager.default.createDirectory(
                at: final.deletingLastPathComponent(), withIntermediateDirectories: true)
        } catch {
            throw VipsError(.io, "cannot write \(final.path): \(error.localizedDescription)")
        }
        var fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        if fd < 0, errno == ENOENT {
            // Another process sharing the folder removed the empty temporary folder as it finished.
            mkdir(temporaryFolder.path, 0o755)
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        }
        guard fd >= 0 else { throw VipsError(.io, "cannot write \(final.path): \(String(cString: strerror(errno)))") }
        let written = data.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let count = Foundation.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += count
            }
            return true
        }
        let reason = String(cString: strerror(errno))
        close(fd)
        guard written, rename(temporary, final.path) == 0 else {
            let message = written ? String(cString: strerror(errno)) : reason
            unlink(temporary)
            throw VipsError(.io, "cannot write \(final.path): \(message)")
        }
        var info = stat()
        stat(final.path, &info)
        return info
    }

    /// Removes this process's temporary files and, when it is empty, the temporary folder.
    func finish() {
        for name in entries() where name.hasPrefix(prefix) {
            unlink(temporaryFolder.appendingPathComponent(name).path)
        }
        rmdir(temporaryFolder.path)
    }

    /// Removes temporary files of this host's processes that are gone, and any older than a day.
    private func sweep() {
        let host = Self.hostName + "."
        let dayAgo = Date().timeIntervalSince1970 - 86_400
        for name in entries() {
            let path = temporaryFolder.appendingPathComponent(name).path
            if name.hasPrefix(host), let pid = Int32(name.dropFirst(host.count).prefix { $0 != "." }),
                kill(pid, 0) != 0, errno == ESRCH
            {
                unlink(path)
                continue
            }
            var info = stat()
            if stat(path, &info) == 0, Double(info.st_mtim.tv_sec) < dayAgo { unlink(path) }
        }
    }

    private func entries() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: temporaryFolder.path)) ?? []
    }

    private static let hostName: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "host" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty
            ? "host" : name.replacingOccurrences(of: ".", with: "_").replacingOccurrences(of: "/", with: "_")
    }()
}
