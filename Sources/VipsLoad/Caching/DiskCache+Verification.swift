import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Reading: every entry's bytes are checked against its metadata before they
/// are served, and each reader gets a private link to them.
extension DiskCache {
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
            if let leading = verify(path: path, entry: entry) {
                touch(stem: stem)
                state.withLock { $0.metrics.hits += 1 }
                // The bytes verified are the ones the decoder reads: it is told their
                // first bytes, so it does not open the file again to sniff it.
                let data = ImageData(
                    input: .file(path), byteCount: entry.byteCount, leadingBytes: leading,
                    removingFileOnRelease: owned)
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
            entry.key == key
        else { return nil }
        return entry
    }

    /// A private hard link to `bodyPath` in the temporary folder, or the body
    /// itself where the file system has no hard links; nil when the body is gone.
    func linkForReading(_ bodyPath: String) -> (path: String, owned: Bool)? {
        let linkPath = privateTemporaryDirectory + "/r-" + StreamingFileWriter.randomName()
        if link(bodyPath, linkPath) == 0 { return (linkPath, true) }
        // ENOENT is the body gone, or the temporary folder (then the body is read in place).
        if errno == ENOENT, access(bodyPath, F_OK) != 0 { return nil }
        return access(bodyPath, R_OK) == 0 ? (bodyPath, false) : nil
    }

    /// Checks length, format magic and checksum of the file at `path` against `entry`.
    /// Returns the file's first bytes when it passes, nil when it does not.
    func verify(path: String, entry: DiskCacheEntry) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = Glibc.stat()
        guard fstat(fd, &info) == 0, Int(info.st_size) == entry.byteCount, entry.byteCount > 0 else { return nil }
        var prefix = [UInt8](repeating: 0, count: 32)
        let count = prefix.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 32, 0) }
        guard count > 0, ImageFormat.sniff(prefix.prefix(count)) != nil else { return nil }
        let intact =
            entry.byteCount <= configuration.fullVerificationLimit
            ? ContentChecksum.ofFile(fd, size: entry.byteCount) == entry.checksum
            : ContentChecksum.sampledOfFile(fd, size: entry.byteCount) == entry.sampledChecksum
        return intact ? Array(prefix.prefix(count)) : nil
    }

}
