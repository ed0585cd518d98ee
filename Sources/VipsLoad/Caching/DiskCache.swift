import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A persistent cache of encoded image data: one folder of files, keyed by
/// source key, with a byte-size limit kept by an LRU sweep in the background.
///
/// Layout: `entries/<hash>.<generation>.body` holds the bytes as they came,
/// so the decoder reads the file directly; `entries/<hash>.meta` (JSON) holds
/// the key, length, checksums, HTTP validators and the source's header, and
/// its modification time is the last access. `tmp/` holds writes in progress
/// and the links handed to readers; `format` names the entries' format
/// version: entries of another version are never read, and the first sweep
/// of a folder written in another format removes them.
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

    /// The folder, size limit and checks the cache was opened with.
    public let configuration: Configuration
    let rootDirectory: String
    let entriesDirectory: String
    let temporaryDirectory: String

    struct State {
        var metrics = DiskCacheMetrics()
        /// The folder's size as of the last sweep plus this instance's writes
        /// since; nil until the first sweep has measured it.
        var estimatedSize: Int?
        /// Bytes committed since the running sweep began listing the entries:
        /// they may be missing from its count, so it adds them to its total.
        var writtenSinceListing = 0
        var sweeping = false
        var sweepAgain = false
        /// The last access stamp given out (ns), to keep stamps strictly increasing.
        var lastStamp: Int64 = 0
        /// Whether this instance has checked the folder's format (`removeEntriesOfOtherFormats`).
        var formatChecked = false
    }

    let state = LockedState(State(), rank: .cache)
    /// Bounds the bytes of writes in progress (downloads streaming in) to the
    /// size limit, so the folder holds at most twice the limit: entries up to
    /// the limit (after a sweep), plus writes in progress up to the limit.
    let inFlight: ByteBudget
    let sweepQueue = DispatchQueue(label: "VipsLoad.DiskCache.sweep", qos: .utility)
    let backgroundWork = DispatchGroup()

    /// Opens (creating when needed) the cache folder and starts a background
    /// sweep that measures it and removes what interrupted writers left.
    public init(configuration: Configuration) throws(VipsError) {
        guard configuration.sizeLimit > 0 else {
            throw VipsError(.invalidArgument, "disk cache size limit must be positive, not \(configuration.sizeLimit)")
        }
        self.configuration = configuration
        inFlight = ByteBudget(limit: configuration.sizeLimit)
        let root = configuration.directory.standardizedFileURL.path
        rootDirectory = root
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

    // MARK: - Writing

    /// Stores `data` under `key` (atomically replacing any previous entry).
    @discardableResult
    public func store(_ data: Data, for key: String, http: HTTPCacheMetadata? = nil) throws(VipsError) -> DiskCacheEntry
    {
        let file = try makeTemporaryFile()
        do throws(VipsError) {
            try file.write(data)
        } catch {
            noteWriteFailure()
            throw error
        }
        switch try commit(file, key: key, http: http, sourceInfo: nil, openForReading: false, keepingBytes: false) {
        case .committed(let hit): return hit.entry
        case .uncached(_, let reason): throw reason
        }
    }

    /// Replaces the HTTP metadata of a stored entry (after a `304 Not Modified`)
    /// and marks it as used. Returns the updated entry, or the stored one when
    /// another writer has replaced the body meanwhile (newer data wins).
    @discardableResult
    func refresh(_ entry: DiskCacheEntry, http: HTTPCacheMetadata) throws(VipsError) -> DiskCacheEntry {
        let stem = DiskCacheKeyHash.fileStem(for: entry.key)
        guard var current = readEntry(stem: stem, removingUnreadable: false), current.key == entry.key,
            current.bodyFile == entry.bodyFile
        else {
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
                let file = try? StreamingFileWriter(
                    directory: privateTemporaryDirectory, namePrefix: "w-", budget: inFlight)
            {
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
    func recreateFoldersIfMissing() -> Bool {
        var recreated = false
        for directory in [entriesDirectory, temporaryDirectory] where !FileManager.default.fileExists(atPath: directory)
        {
            guard
                (try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)) != nil
            else {
                return false
            }
            recreated = true
        }
        if recreated { state.withLock { $0.estimatedSize = nil } }
        return recreated
    }

    /// What became of a file handed to `commit`.
    enum CommitOutcome {
        /// Stored; with `openForReading`, the hit's data is a private link to the new body.
        case committed(Hit)
        /// Not stored because the file system refused (full, read-only, folder
        /// gone); with `keepingBytes`, the complete bytes are still readable
        /// from `data`, a file deleted when released.
        case uncached(ImageData, reason: VipsError)
    }

    /// Commits a completely written temporary file as the entry for `key`.
    ///
    /// Refuses empty bodies, bodies that are not an image (by magic number)
    /// and bodies larger than the size limit; the file is deleted then. When
    /// the file system refuses the entry, the bytes are kept for the caller
    /// with `keepingBytes` (a full or read-only cache must not cost a
    /// download), deleted otherwise.
    func commit(
        _ file: StreamingFileWriter, key: String, http: HTTPCacheMetadata?, sourceInfo: ImageInfo?,
        openForReading: Bool, keepingBytes: Bool
    ) throws(VipsError) -> CommitOutcome {
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
            throw VipsError(
                .tooLarge, "\(key): \(summary.byteCount) bytes exceed the cache's limit of \(configuration.sizeLimit)")
        }
        /// The file system refused the entry at `path` (and the entry is not visible).
        func refused(
            _ error: VipsError, bytesAt path: String, readerLink: String? = nil
        ) throws(VipsError) -> CommitOutcome {
            noteWriteFailure()
            // Bytes whose folder was deleted meanwhile are gone: then the error is all there is.
            if keepingBytes, access(readerLink ?? path, F_OK) == 0 {
                if let readerLink {
                    unlink(path)
                    return .uncached(
                        ImageData(input: .file(readerLink), byteCount: summary.byteCount, removingFileOnRelease: true),
                        reason: error)
                }
                return .uncached(
                    ImageData(input: .file(path), byteCount: summary.byteCount, removingFileOnRelease: true),
                    reason: error)
            }
            if let readerLink { unlink(readerLink) }
            unlink(path)
            throw error
        }

        // The full checksum was computed as the bytes were written; only the
        // sampled one (three 64 KiB windows) reads the finished file.
        guard let checksum = summary.checksum else {
            return try refused(VipsError(.internal, "cannot checksum \(file.path)"), bytesAt: file.path)
        }
        let fd = open(file.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            return try refused(
                VipsError(.io, "cannot reopen \(file.path): \(String(cString: strerror(errno)))"), bytesAt: file.path)
        }
        let sampled = ContentChecksum.sampledOfFile(fd, size: summary.byteCount)
        close(fd)
        guard let sampled else {
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
        let entry = DiskCacheEntry(
            key: key, byteCount: summary.byteCount, storedAt: Date(), http: http, sourceInfo: sourceInfo,
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
        let data = ImageData(
            input: .file(reading?.path ?? bodyPath), byteCount: summary.byteCount, leadingBytes: summary.prefix,
            removingFileOnRelease: reading?.owned ?? false)
        return .committed(Hit(entry: entry, data: data))
    }

    // MARK: - Files

    func metadataPath(_ stem: String) -> String { entriesDirectory + "/" + stem + ".meta" }

    /// Reads an entry's metadata; nil when absent or unreadable (then deleted when asked).
    func readEntry(stem: String, removingUnreadable: Bool) -> DiskCacheEntry? {
        let path = metadataPath(stem)
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        guard let entry = try? JSONDecoder().decode(DiskCacheEntry.self, from: data),
            entry.version == DiskCacheEntry.currentVersion
        else {
            if removingUnreadable { unlink(path) }
            return nil
        }
        return entry
    }

    /// Writes metadata through a temporary file and a rename, stamped as just used.
    func writeMetadata(_ entry: DiskCacheEntry, stem: String) throws(VipsError) {
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

    /// Deletes an entry's metadata (only while it still names `body`, when
    /// given) and the body, so a newer entry written meanwhile survives.
    func removeEntry(stem: String, ifBody body: String?) {
        if let body {
            let current = readEntry(stem: stem, removingUnreadable: false)?.bodyFile
            if current == nil || current == body { unlink(metadataPath(stem)) }
            unlink(entriesDirectory + "/" + body)
        } else {
            unlink(metadataPath(stem))
        }
    }

    /// Marks the entry as just used (its metadata's modification time).
    func touch(stem: String) {
        stamp(metadataPath(stem))
    }

    /// Sets `path`'s times to a fine-grained, strictly increasing stamp: the
    /// kernel's own timestamps tick too coarsely to order quick successive uses.
    func stamp(_ path: String) {
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

    static func list(_ directory: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    }

    static func stat(_ path: String) -> (size: Int, modified: Double)? {
        var info = Glibc.stat()
        guard lstat(path, &info) == 0 else { return nil }
        return (Int(info.st_size), Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
    }
}
