import Foundation

/// Bodies of downloads that were cut short, kept with their validator so the
/// next attempt (the loader's retry, or a later request for the URL) asks only
/// for the rest: `Range: bytes=N-` with `If-Range` (the idea of Nuke's
/// `ResumableData`).
///
/// - **What is kept.** A body cut by a transient failure (connection lost,
///   body ended early, timed out) after some bytes, from a 200 or 206 that
///   allows resuming: a strong `ETag` (else a `Last-Modified`) to send in
///   `If-Range`, `Accept-Ranges: bytes` (implied by a 206), a known total
///   length and no content coding. `HTTPTransfer` decides; this type stores.
/// - **Where.** Two files per key in `directory`: `<hash>.body` (the bytes)
///   and `<hash>.json` (the key, the `If-Range` value, the total, the byte
///   count), written through temporary names and renamed into place. With a
///   `DiskCache` the folder is `partial/` in the cache's temporary area
///   (`tmp/`), so a later process resumes too; without one, it is inside this
///   process's private download folder (`TemporaryDownloads`), which lives
///   exactly as long as the process (removed at exit and on SIGINT/SIGTERM),
///   as an in-memory store would, without holding the bytes in memory.
/// - **Bounded.** At most `maxCount` partials and `maxBytes` bytes in a
///   folder (the oldest go first), none older than `maxAge`; a partial is
///   removed when it is used (its bytes move into the new body), replaced,
///   refused by the server (200, 416, a mismatched `Content-Range`) or stale.
///
/// All state is in the folder, so any number of loaders and processes can
/// share one; a partial read while another writer replaces it is checked
/// against its own record (the byte count) and ignored when they disagree.
struct PartialDownloads: Sendable {
    /// Partials kept in one folder at most. Default 16.
    static let maxCount = 16
    /// Bytes kept in one folder at most. Default 512 MiB.
    static let maxBytes = 512 * 1024 * 1024
    /// Partials older than this are stale and removed. Default 24 hours.
    static let maxAge: TimeInterval = 24 * 3600

    /// The folder the partials live in.
    let directory: String

    /// What a partial was kept with: the key, the validator, the sizes.
    struct Record: Codable, Sendable, Hashable {
        let key: String
        /// The `If-Range` value: the strong `ETag`, else the `Last-Modified` date.
        let ifRange: String
        /// The whole body's length.
        let total: Int
        /// The bytes kept (the start of the body).
        let byteCount: Int
    }

    /// A kept partial opened for reading: its record and its bytes, read
    /// through a descriptor held open, so a concurrent replacement or removal
    /// cannot change what this one reads.
    final class Partial: Sendable {
        let record: Record
        private let fd: Int32

        fileprivate init(record: Record, fd: Int32) {
            self.record = record
            self.fd = fd
        }

        deinit { close(fd) }

        /// Appends the kept bytes to `file`.
        func copy(to file: StreamingFileWriter) throws(VipsError) {
            var buffer = [UInt8](repeating: 0, count: 256 * 1024)
            var offset = 0
            while offset < record.byteCount {
                let want = min(buffer.count, record.byteCount - offset)
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(offset)) }
                if n < 0, errno == EINTR { continue }
                guard n > 0 else { throw VipsError(.io, "the kept partial body is shorter than its record") }
                let written: Result<Void, VipsError> = buffer.withUnsafeBytes { bytes in
                    do throws(VipsError) {
                        try file.write(UnsafeRawBufferPointer(rebasing: bytes[0..<n]))
                        return .success(())
                    } catch {
                        return .failure(error)
                    }
                }
                try written.get()
                offset += n
            }
        }
    }

    /// The folder `partial/` in a disk cache's temporary area.
    static func inDiskCache(_ cache: DiskCache) -> PartialDownloads {
        PartialDownloads(directory: cache.temporaryDirectory + "/partial")
    }

    /// The folder `partial/` inside this process's private download folder in `directory`.
    static func inProcessFolder(of directory: String) -> PartialDownloads? {
        guard let folder = try? TemporaryDownloads.folder(in: directory) else { return nil }
        return PartialDownloads(directory: folder + "/partial")
    }

    private func stem(_ key: String) -> String { directory + "/" + DiskCacheKeyHash.fileStem(for: key) }

    /// The partial kept for `key`, opened; nil when there is none, it is
    /// stale, or its files disagree (those are removed).
    func partial(for key: String) -> Partial? {
        let stem = stem(key)
        guard let json = FileManager.default.contents(atPath: stem + ".json") else { return nil }
        guard let record = try? JSONDecoder().decode(Record.self, from: json) else {
            remove(key)
            return nil
        }
        // Another key with the same hash keeps its partial.
        guard record.key == key else { return nil }
        guard record.byteCount > 0, record.byteCount < record.total else {
            remove(key)
            return nil
        }
        let fd = open(stem + ".body", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var info = stat()
        guard fstat(fd, &info) == 0, Int(info.st_size) == record.byteCount,
            Date().timeIntervalSince1970 - Double(info.st_mtim.tv_sec) < Self.maxAge
        else {
            close(fd)
            remove(key)
            return nil
        }
        return Partial(record: record, fd: fd)
    }

    /// Keeps the first `byteCount` bytes written to `file` as the partial for
    /// `key` (replacing any), then trims the folder to its bounds. A failure
    /// costs only the resumption: nothing half-written is left.
    func keep(_ file: StreamingFileWriter, byteCount: Int, key: String, ifRange: String, total: Int) {
        guard byteCount > 0, byteCount < total, byteCount <= Self.maxBytes else { return }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            return
        }
        let stem = stem(key)
        let staging = directory + "/.w-" + StreamingFileWriter.randomName()
        // Same file system (a cache's or a process's download folder): a link, no copy.
        if link(file.path, staging) != 0 {
            guard let copy = try? StreamingFileWriter(directory: directory, namePrefix: ".c-") else { return }
            do throws(VipsError) {
                try file.copyWritten(to: copy)
                _ = try copy.finish()
            } catch {
                copy.discard()
                return
            }
            guard rename(copy.path, staging) == 0 else {
                unlink(copy.path)
                return
            }
        }
        guard truncate(staging, off_t(byteCount)) == 0,
            let json = try? JSONEncoder().encode(
                Record(key: key, ifRange: ifRange, total: total, byteCount: byteCount))
        else {
            unlink(staging)
            return
        }
        let recordStaging = staging + ".json"
        // The old record goes first: a reader never pairs it with the new body.
        unlink(stem + ".json")
        guard FileManager.default.createFile(atPath: recordStaging, contents: json),
            rename(staging, stem + ".body") == 0, rename(recordStaging, stem + ".json") == 0
        else {
            unlink(staging)
            unlink(recordStaging)
            remove(key)
            return
        }
        trim()
    }

    /// Removes the partial kept for `key`, if any.
    func remove(_ key: String) {
        let stem = stem(key)
        unlink(stem + ".json")
        unlink(stem + ".body")
    }

    /// Removes stale partials and leftovers, then the oldest until at most
    /// `maxCount` partials and `maxBytes` bytes remain.
    func trim(now: Date = Date()) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        var bodies: [(stem: String, size: Int, modified: Double)] = []
        let limit = now.timeIntervalSince1970 - Self.maxAge
        for name in names {
            let path = directory + "/" + name
            var info = stat()
            guard stat(path, &info) == 0 else { continue }
            let modified = Double(info.st_mtim.tv_sec)
            if name.hasPrefix(".") {
                // A keeper that died between its steps; a live one finishes within seconds.
                if modified < now.timeIntervalSince1970 - 3600 { unlink(path) }
            } else if name.hasSuffix(".body") {
                let stem = directory + "/" + name.dropLast(5)
                if modified < limit {
                    unlink(stem + ".json")
                    unlink(path)
                } else {
                    bodies.append((String(stem), Int(info.st_size), modified))
                }
            } else if name.hasSuffix(".json"), modified < limit {
                unlink(path)
            }
        }
        var count = bodies.count
        var bytes = bodies.reduce(0) { $0 + $1.size }
        for oldest in bodies.sorted(by: { $0.modified < $1.modified })
        where count > Self.maxCount || bytes > Self.maxBytes {
            unlink(oldest.stem + ".json")
            unlink(oldest.stem + ".body")
            count -= 1
            bytes -= oldest.size
        }
    }

    /// The `If-Range` value and total length of a response whose body may be
    /// resumed, or nil: a 200 with `Accept-Ranges: bytes` or a 206 (whose
    /// total is `total206`), a strong `ETag` or a `Last-Modified`, a known
    /// length and no content coding.
    static func resumability(of head: HTTPResponseHead, total206: Int?) -> (ifRange: String, total: Int)? {
        let encoding = head.value(forHTTPHeaderField: "Content-Encoding")?.lowercased() ?? "identity"
        guard encoding == "identity" else { return nil }
        let total: Int
        switch head.statusCode {
        case 200:
            let ranges = head.values(of: "Accept-Ranges").flatMap { $0.split(separator: ",") }
                .map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard ranges.contains("bytes"), head.expectedContentLength > 0 else { return nil }
            total = Int(head.expectedContentLength)
        case 206:
            guard let total206 else { return nil }
            total = total206
        default:
            return nil
        }
        if let etag = head.value(forHTTPHeaderField: "ETag")?.trimmingCharacters(in: .whitespaces),
            etag.hasPrefix("\""), etag.count >= 2
        {
            return (etag, total)
        }
        if let date = head.value(forHTTPHeaderField: "Last-Modified")?.trimmingCharacters(in: .whitespaces),
            HTTPDate.parse(date) != nil
        {
            return (date, total)
        }
        return nil
    }

    /// The first byte, last byte and total of a `Content-Range: bytes a-b/n`
    /// (RFC 9110 §14.4), or nil when it is not one with a known total.
    static func contentRange(_ value: String?) -> (first: Int, last: Int, total: Int)? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), value.lowercased().hasPrefix("bytes ") else {
            return nil
        }
        let spec = value.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let halves = spec.split(separator: "/", omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        let bounds = halves[0].split(separator: "-", omittingEmptySubsequences: false)
        func number(_ text: Substring) -> Int? {
            guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            return Int(text)
        }
        guard bounds.count == 2, let first = number(bounds[0]), let last = number(bounds[1]),
            let total = number(halves[1]), first <= last, last < total
        else { return nil }
        return (first, last, total)
    }
}
