import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A persistent cache of encoded image data: one folder of files, keyed by
/// source key, with a byte-size limit kept by an LRU sweep in the background.
///
/// Layout: `entries/<hash>.<generation>.body` holds the bytes as they came,
/// so the decoder reads the file directly; `entries/<hash>.meta` (JSON) holds
/// the key, length, checksums and HTTP validators, and its modification time is
/// the last access. `tmp/` holds writes in progress and the links handed to
/// readers.
///
/// Safe with several instances and processes on one folder: every write goes
/// to a temporary file renamed into place (metadata last), bodies are never
/// modified once visible, and each reader gets a hard link to the body, so a
/// concurrent replacement or eviction cannot pull the file from under a
/// decoder. Every read checks the body against the metadata; a corrupt or
/// truncated entry is deleted and reported as a miss, never served. A write
/// the file system refuses (full, read-only) leaves nothing partial behind
/// and is counted in `metrics.writeFailures`; a folder deleted while the
/// cache is open is recreated by the next write.
public final class DiskCache: Sendable {
    /// A verified entry and its bytes, ready for the decoder.
    struct Hit: Sendable {
        let entry: DiskCacheEntry
        /// A private link to the body (removed when released).
        let data: ImageData
    }

    public let configuration: Configuration
    let entriesDirectory: String
    let temporaryDirectory: String

    private struct State {
        var metrics = DiskCacheMetrics()
        /// The folder's size as of the last sweep plus this instance's writes
        /// since; nil until the first sweep has measured it.
        var estimatedSize: Int?
        var sweeping = false
        var sweepAgain = false
        /// The last access stamp given out (ns), to keep stamps strictly increasing.
        var lastStamp: Int64 = 0
    }

    private let state = LockedState(State(), rank: .cache)
    /// Bounds the bytes of writes in progress (downloads streaming in) to the
    /// size limit, so the folder holds at most twice the limit: entries up to
    /// the limit (after a sweep), plus writes in progress up to the limit.
    let inFlight: ByteBudget
    private let sweepQueue = DispatchQueue(label: "VipsLoad.DiskCache.sweep", qos: .utility)
    private let backgroundWork = DispatchGroup()

    /// Opens (creating when needed) the cache folder and starts a background
    /// sweep that measures it and removes what interrupted writers left.
    public init(configuration: Configuration) throws(VipsError) {
        guard configuration.sizeLimit > 0 else {
            throw VipsError(.invalidArgument, "disk cache size limit must be positive, not \(configuration.sizeLimit)")
        }
        self.configuration = configuration
        inFlight = ByteBudget(limit: configuration.sizeLimit)
        let root = configuration.directory.standardizedFileURL.path
        entriesDirectory = root + "/entries"
        temporaryDirectory = root + "/tmp"
        for directory in [entriesDirectory, temporaryDirectory] {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                throw VipsError(.io, "cannot create cache folder \(directory): \(error.localizedDescription)")
            }
        }
        scheduleSweep()
    }

    /// Opens a cache in `directory` holding at most `sizeLimit` bytes.
    public convenience init(directory: URL, sizeLimit: Int = 512 * 1024 * 1024) throws(VipsError) {
        try self.init(configuration: Configuration(directory: directory, sizeLimit: sizeLimit))
    }

    /// This instance's counters.
    public var metrics: DiskCacheMetrics { state.withLock { $0.metrics } }

    // MARK: - Reading

    /// The verified entry for `key` and a private link to its bytes, or nil.
    ///
    /// Checks the body's length, format magic and checksum (every byte up to
    /// `fullVerificationLimit`, sampled windows beyond); a failing entry is
    /// deleted. A hit marks the entry as most recently used.
    func lookup(_ key: String) -> Hit? {
        let stem = DiskCacheKeyHash.fileStem(for: key)
        var missingBody: String?
        // A concurrent replacement can delete the body between reading the
        // metadata and linking it; reading the metadata again finds the new one.
        for _ in 0..<3 {
            guard let entry = readEntry(stem: stem, removingUnreadable: true), entry.key == key else { break }
            let bodyPath = entriesDirectory + "/" + entry.bodyFile
            guard let (path, owned) = linkForReading(bodyPath) else {
                if missingBody == entry.bodyFile {
                    // The same metadata twice, its body gone: a broken entry.
                    removeEntry(stem: stem, ifBody: entry.bodyFile)
                    break
                }
                missingBody = entry.bodyFile
                continue
            }
            // Verify the linked inode itself: what is checked is what is served.
            if verify(path: path, entry: entry) {
                touch(stem: stem)
                state.withLock { $0.metrics.hits += 1 }
                let data = ImageData(input: .file(path), byteCount: entry.byteCount, removingFileOnRelease: owned)
                return Hit(entry: entry, data: data)
            }
            if owned { unlink(path) }
            removeEntry(stem: stem, ifBody: entry.bodyFile)
            state.withLock { $0.metrics.corruptEntriesRemoved += 1 }
            break
        }
        state.withLock { $0.metrics.misses += 1 }
        return nil
    }

    /// The stored metadata for `key` without reading or verifying the body.
    public func entry(for key: String) -> DiskCacheEntry? {
        guard let entry = readEntry(stem: DiskCacheKeyHash.fileStem(for: key), removingUnreadable: false),
              entry.key == key else { return nil }
        return entry
    }

    // MARK: - Writing

    /// A writer that streams a new entry for `key` into the cache.
    func makeWriter(for key: String) throws(VipsError) -> DiskCacheWriter {
        try DiskCacheWriter(cache: self, key: key)
    }

    /// Stores `data` under `key` (atomically replacing any previous entry).
    @discardableResult
    public func store(_ data: Data, for key: String, http: HTTPCacheMetadata? = nil) throws(VipsError) -> DiskCacheEntry {
        let writer = try makeWriter(for: key)
        try writer.write(data)
        return try writer.commit(http: http)
    }

    /// Replaces the HTTP metadata of a stored entry (after a `304 Not Modified`)
    /// and marks it as used. Returns the updated entry, or the stored one when
    /// another writer has replaced the body meanwhile (newer data wins).
    @discardableResult
    func refresh(_ entry: DiskCacheEntry, http: HTTPCacheMetadata) throws(VipsError) -> DiskCacheEntry {
        let stem = DiskCacheKeyHash.fileStem(for: entry.key)
        guard var current = readEntry(stem: stem, removingUnreadable: false), current.key == entry.key,
              current.bodyFile == entry.bodyFile else {
            return entry
        }
        current.http = http
        do throws(VipsError) {
            try writeMetadata(current, stem: stem)
        } catch {
            noteWriteFailure()
            throw error
        }
        return current
    }

    /// Deletes the entry for `key`, if any.
    public func remove(_ key: String) {
        let stem = DiskCacheKeyHash.fileStem(for: key)
        guard let entry = readEntry(stem: stem, removingUnreadable: true), entry.key == key else { return }
        removeEntry(stem: stem, ifBody: entry.bodyFile)
    }

    /// Deletes every entry.
    public func removeAll() {
        let names = Self.list(entriesDirectory)
        // Metadata first: an entry without metadata is invisible.
        for name in names where name.hasSuffix(".meta") { unlink(entriesDirectory + "/" + name) }
        for name in names where !name.hasSuffix(".meta") { unlink(entriesDirectory + "/" + name) }
        state.withLock { $0.estimatedSize = 0 }
    }

    /// The bytes the entries take on disk now (measured, not estimated).
    public func currentSize() -> Int {
        Self.list(entriesDirectory).reduce(0) { $0 + (Self.stat(entriesDirectory + "/" + $1)?.size ?? 0) }
    }

    // MARK: - Sweeping

    /// Deletes leftovers of interrupted writes and, when the entries exceed the
    /// size limit, the least recently used entries until they take at most 90%
    /// of it. Returns the entries' size afterwards.
    ///
    /// Runs in the background whenever writes push the folder past the limit;
    /// call it to trim now.
    @discardableResult
    public func sweep() -> Int {
        let now = Date().timeIntervalSince1970
        let lifetime = configuration.abandonedFileLifetime
        // What dead processes left (their private folders) goes at once.
        TemporaryDownloads.sweep(temporaryDirectory)
        for name in Self.list(temporaryDirectory) {
            let path = temporaryDirectory + "/" + name
            if let info = Self.stat(path), now - info.modified >= lifetime { unlink(path) }
        }

        struct Group {
            var meta: (modified: Double, size: Int)?
            var bodies: [(name: String, size: Int, modified: Double)] = []
        }
        var groups: [String: Group] = [:]
        for name in Self.list(entriesDirectory) {
            guard let dot = name.firstIndex(of: "."), let info = Self.stat(entriesDirectory + "/" + name) else { continue }
            let stem = String(name[..<dot])
            if name.hasSuffix(".meta") {
                groups[stem, default: Group()].meta = (info.modified, info.size)
            } else if name.hasSuffix(".body") {
                groups[stem, default: Group()].bodies.append((name, info.size, info.modified))
            }
        }

        var total = 0
        var evictable: [(stem: String, modified: Double, size: Int, bodies: [String])] = []
        for (stem, group) in groups {
            guard let meta = group.meta else {
                // Bodies without metadata: a writer died between its two renames,
                // or is between them right now (hence the age check).
                for body in group.bodies {
                    if now - body.modified >= lifetime { unlink(entriesDirectory + "/" + body.name) } else { total += body.size }
                }
                continue
            }
            if group.bodies.isEmpty {
                // Metadata whose body is gone can never be served. A young one may
                // belong to a body renamed in while this folder was being listed.
                if now - meta.modified >= lifetime { removeEntry(stem: stem, ifBody: nil) }
                continue
            }
            var size = meta.size
            var kept: [String] = []
            if group.bodies.count == 1 {
                size += group.bodies[0].size
                kept = [group.bodies[0].name]
            } else {
                // Several bodies: the one the metadata names, plus bodies
                // replaced (or written by a writer that died) earlier.
                let current = readEntry(stem: stem, removingUnreadable: false)?.bodyFile
                for body in group.bodies {
                    if body.name != current, now - body.modified >= lifetime {
                        unlink(entriesDirectory + "/" + body.name)
                    } else {
                        size += body.size
                        kept.append(body.name)
                    }
                }
            }
            total += size
            evictable.append((stem, meta.modified, size, kept))
        }

        var evicted = 0
        if total > configuration.sizeLimit {
            let target = configuration.sizeLimit / 10 * 9
            for candidate in evictable.sorted(by: { $0.modified < $1.modified }) where total > target {
                unlink(entriesDirectory + "/" + candidate.stem + ".meta")
                for body in candidate.bodies { unlink(entriesDirectory + "/" + body) }
                total -= candidate.size
                evicted += 1
            }
        }
        state.withLock {
            $0.estimatedSize = total
            $0.metrics.evictions += evicted
            $0.metrics.sweeps += 1
        }
        return total
    }

    /// Blocks until background sweeps started so far have finished.
    public func waitForBackgroundSweeps() {
        backgroundWork.wait()
    }

    private func scheduleSweep() {
        let start = state.withLock { state -> Bool in
            if state.sweeping {
                state.sweepAgain = true
                return false
            }
            state.sweeping = true
            return true
        }
        guard start else { return }
        backgroundWork.enter()
        sweepQueue.async { [self] in
            repeat {
                sweep()
            } while state.withLock { state -> Bool in
                if state.sweepAgain {
                    state.sweepAgain = false
                    return true
                }
                state.sweeping = false
                return false
            }
            backgroundWork.leave()
        }
    }

    /// Counts a committed write and starts a sweep when the folder may be past its limit.
    private func noteWrite(bytes: Int) {
        let needsSweep = state.withLock { state -> Bool in
            state.metrics.writes += 1
            guard let estimate = state.estimatedSize else { return true }
            state.estimatedSize = estimate + bytes
            return estimate + bytes > configuration.sizeLimit
        }
        if needsSweep { scheduleSweep() }
    }

    // MARK: - Internals shared with the writer and the HTTP loader

    /// This process's own folder inside `tmp/` (see `TemporaryDownloads`):
    /// writes in progress and reader links live there, so they go when the
    /// process exits and a later process sweeps them if it was killed. The
    /// shared `tmp/` itself when the private folder cannot be made.
    var privateTemporaryDirectory: String {
        (try? TemporaryDownloads.folder(in: temporaryDirectory)) ?? temporaryDirectory
    }

    /// A new temporary file in the cache folder (same file system, so commit is a rename).
    ///
    /// Recreates the cache's folders when they have been deleted while the
    /// cache was open (someone clearing caches), so the cache fills again.
    func makeTemporaryFile() throws(VipsError) -> StreamingFileWriter {
        // Making the private folder would recreate `tmp/` alone; the entries
        // folder must come back with it, or the commit would fail.
        if access(entriesDirectory, F_OK) != 0 { _ = recreateFoldersIfMissing() }
        do {
            return try StreamingFileWriter(directory: privateTemporaryDirectory, namePrefix: "w-", budget: inFlight)
        } catch {
            if recreateFoldersIfMissing(),
               let file = try? StreamingFileWriter(directory: privateTemporaryDirectory, namePrefix: "w-", budget: inFlight) {
                return file
            }
            noteWriteFailure()
            throw error
        }
    }

    /// Counts a write the file system refused (full, read-only, folder gone).
    func noteWriteFailure() {
        state.withLock { $0.metrics.writeFailures += 1 }
    }

    /// Creates the entries and temporary folders when one is missing; true when it did.
    private func recreateFoldersIfMissing() -> Bool {
        var recreated = false
        for directory in [entriesDirectory, temporaryDirectory] where !FileManager.default.fileExists(atPath: directory) {
            guard (try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)) != nil else {
                return false
            }
            recreated = true
        }
        if recreated { state.withLock { $0.estimatedSize = nil } }
        return recreated
    }

    /// What became of a download handed to `commitDownload`.
    enum CommitOutcome {
        /// Stored; the hit's data is a private link to the new body.
        case committed(Hit)
        /// Not stored because the file system refused (full, read-only, folder
        /// gone); the complete bytes are still readable from `data`, a file
        /// deleted when released.
        case uncached(ImageData, reason: VipsError)
    }

    /// Commits a completely written temporary file as the entry for `key`.
    ///
    /// Refuses empty bodies, bodies that are not an image (by magic number)
    /// and bodies larger than the size limit; the file is deleted on failure.
    /// With `openForReading`, the hit's data is a private link to the new body.
    func commit(_ file: StreamingFileWriter, key: String, http: HTTPCacheMetadata?,
                openForReading: Bool) throws(VipsError) -> Hit {
        switch try commit(file, key: key, http: http, openForReading: openForReading, keepingBytes: false) {
        case .committed(let hit): return hit
        case .uncached(_, let reason): throw reason
        }
    }

    /// Commits a downloaded body like `commit`, except that when the file
    /// system refuses the entry the bytes are kept for the caller rather than
    /// deleted: a full or read-only cache must not cost the download.
    func commitDownload(_ file: StreamingFileWriter, key: String, http: HTTPCacheMetadata?) throws(VipsError) -> CommitOutcome {
        try commit(file, key: key, http: http, openForReading: true, keepingBytes: true)
    }

    private func commit(_ file: StreamingFileWriter, key: String, http: HTTPCacheMetadata?,
                        openForReading: Bool, keepingBytes: Bool) throws(VipsError) -> CommitOutcome {
        let summary = try file.finish()
        guard summary.byteCount > 0 else {
            unlink(file.path)
            throw VipsError(.emptyInput, "\(key): no bytes to cache")
        }
        guard ImageFormat.sniff(summary.prefix) != nil else {
            unlink(file.path)
            throw VipsError(.unsupportedFormat, "\(key): the bytes are not an image; not cached")
        }
        guard summary.byteCount <= configuration.sizeLimit else {
            unlink(file.path)
            throw VipsError(.tooLarge, "\(key): \(summary.byteCount) bytes exceed the cache's limit of \(configuration.sizeLimit)")
        }
        /// The file system refused the entry at `path` (and the entry is not visible).
        func refused(_ error: VipsError, bytesAt path: String, readerLink: String? = nil) throws(VipsError) -> CommitOutcome {
            noteWriteFailure()
            // Bytes whose folder was deleted meanwhile are gone: then the error is all there is.
            if keepingBytes, access(readerLink ?? path, F_OK) == 0 {
                if let readerLink {
                    unlink(path)
                    return .uncached(ImageData(input: .file(readerLink), byteCount: summary.byteCount, removingFileOnRelease: true),
                                     reason: error)
                }
                return .uncached(ImageData(input: .file(path), byteCount: summary.byteCount, removingFileOnRelease: true),
                                 reason: error)
            }
            if let readerLink { unlink(readerLink) }
            unlink(path)
            throw error
        }

        // Checksummed from the finished file (a read from the page cache), not
        // while downloading, where slower work would queue body chunks in memory.
        let fd = open(file.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            return try refused(VipsError(.io, "cannot reopen \(file.path): \(String(cString: strerror(errno)))"), bytesAt: file.path)
        }
        let checksum = ContentChecksum.ofFile(fd, size: summary.byteCount)
        let sampled = ContentChecksum.sampledOfFile(fd, size: summary.byteCount)
        close(fd)
        guard let checksum, let sampled else {
            return try refused(VipsError(.io, "cannot read back \(file.path)"), bytesAt: file.path)
        }

        let stem = DiskCacheKeyHash.fileStem(for: key)
        let bodyFile = stem + "." + StreamingFileWriter.randomName() + ".body"
        let bodyPath = entriesDirectory + "/" + bodyFile
        guard rename(file.path, bodyPath) == 0 else {
            let error = VipsError(.io, "cannot move \(file.path) into the cache: \(String(cString: strerror(errno)))")
            return try refused(error, bytesAt: file.path)
        }
        // The reader's link exists before the entry is visible, so no sweep can take the body first.
        let reading = openForReading ? linkForReading(bodyPath) : nil
        let previous = readEntry(stem: stem, removingUnreadable: false)
        let entry = DiskCacheEntry(key: key, byteCount: summary.byteCount, storedAt: Date(), http: http,
                                   version: DiskCacheEntry.currentVersion, bodyFile: bodyFile,
                                   checksum: checksum, sampledChecksum: sampled)
        do throws(VipsError) {
            try writeMetadata(entry, stem: stem)
        } catch {
            return try refused(error, bytesAt: bodyPath, readerLink: reading?.owned == true ? reading?.path : nil)
        }
        if let previous, previous.bodyFile != bodyFile {
            unlink(entriesDirectory + "/" + previous.bodyFile)
        }
        noteWrite(bytes: summary.byteCount)
        let data = ImageData(input: .file(reading?.path ?? bodyPath), byteCount: summary.byteCount,
                             removingFileOnRelease: reading?.owned ?? false)
        return .committed(Hit(entry: entry, data: data))
    }

    // MARK: - Files

    private func metadataPath(_ stem: String) -> String { entriesDirectory + "/" + stem + ".meta" }

    /// Reads an entry's metadata; nil when absent or unreadable (then deleted when asked).
    private func readEntry(stem: String, removingUnreadable: Bool) -> DiskCacheEntry? {
        let path = metadataPath(stem)
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        guard let entry = try? JSONDecoder().decode(DiskCacheEntry.self, from: data),
              entry.version == DiskCacheEntry.currentVersion else {
            if removingUnreadable { unlink(path) }
            return nil
        }
        return entry
    }

    /// Writes metadata through a temporary file and a rename, stamped as just used.
    private func writeMetadata(_ entry: DiskCacheEntry, stem: String) throws(VipsError) {
        let encoded: Data
        do {
            encoded = try JSONEncoder().encode(entry)
        } catch {
            throw VipsError(.internal, "cannot encode cache metadata: \(error)")
        }
        let file = try StreamingFileWriter(directory: privateTemporaryDirectory, namePrefix: "m-")
        try file.write(encoded)
        _ = try file.finish()
        stamp(file.path)
        guard rename(file.path, metadataPath(stem)) == 0 else {
            let message = String(cString: strerror(errno))
            unlink(file.path)
            throw VipsError(.io, "cannot write cache metadata: \(message)")
        }
    }

    /// A private hard link to `bodyPath` in the temporary folder, or the body
    /// itself where the file system has no hard links; nil when the body is gone.
    private func linkForReading(_ bodyPath: String) -> (path: String, owned: Bool)? {
        let linkPath = privateTemporaryDirectory + "/r-" + StreamingFileWriter.randomName()
        if link(bodyPath, linkPath) == 0 { return (linkPath, true) }
        // ENOENT is the body gone, or the temporary folder (then the body is read in place).
        if errno == ENOENT, access(bodyPath, F_OK) != 0 { return nil }
        return access(bodyPath, R_OK) == 0 ? (bodyPath, false) : nil
    }

    /// Checks length, format magic and checksum of the file at `path` against `entry`.
    private func verify(path: String, entry: DiskCacheEntry) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var info = Glibc.stat()
        guard fstat(fd, &info) == 0, Int(info.st_size) == entry.byteCount, entry.byteCount > 0 else { return false }
        var prefix = [UInt8](repeating: 0, count: 32)
        let count = prefix.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 32, 0) }
        guard count > 0, ImageFormat.sniff(prefix.prefix(count)) != nil else { return false }
        if entry.byteCount <= configuration.fullVerificationLimit {
            return ContentChecksum.ofFile(fd, size: entry.byteCount) == entry.checksum
        }
        return ContentChecksum.sampledOfFile(fd, size: entry.byteCount) == entry.sampledChecksum
    }

    /// Deletes an entry's metadata (only while it still names `body`, when
    /// given) and the body, so a newer entry written meanwhile survives.
    private func removeEntry(stem: String, ifBody body: String?) {
        if let body {
            let current = readEntry(stem: stem, removingUnreadable: false)?.bodyFile
            if current == nil || current == body { unlink(metadataPath(stem)) }
            unlink(entriesDirectory + "/" + body)
        } else {
            unlink(metadataPath(stem))
        }
    }

    /// Marks the entry as just used (its metadata's modification time).
    private func touch(stem: String) {
        stamp(metadataPath(stem))
    }

    /// Sets `path`'s times to a fine-grained, strictly increasing stamp: the
    /// kernel's own timestamps tick too coarsely to order quick successive uses.
    private func stamp(_ path: String) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let nanoseconds = state.withLock { state -> Int64 in
            let value = max(Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec), state.lastStamp + 1)
            state.lastStamp = value
            return value
        }
        let time = timespec(tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
        var times = [time, time]
        utimensat(AT_FDCWD, path, &times, 0)
    }

    private static func list(_ directory: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    }

    private static func stat(_ path: String) -> (size: Int, modified: Double)? {
        var info = Glibc.stat()
        guard lstat(path, &info) == 0 else { return nil }
        return (Int(info.st_size), Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
    }
}
