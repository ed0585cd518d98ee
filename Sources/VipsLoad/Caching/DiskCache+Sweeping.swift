import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Keeping the folder within its limit: leftovers of interrupted writes go,
/// then least recently used entries, in the background after writes.
extension DiskCache {
    /// Deletes leftovers of interrupted writes and, when the entries exceed the
    /// size limit, the least recently used entries until they take at most 90%
    /// of it. Returns the entries' size afterwards.
    ///
    /// Runs in the background whenever writes push the folder past the limit;
    /// call it to trim now.
    @discardableResult
    public func sweep() -> Int {
        removeEntriesOfOtherFormats()
        let now = Date().timeIntervalSince1970
        let lifetime = configuration.abandonedFileLifetime
        // What dead processes left (their private folders) goes at once.
        TemporaryDownloads.sweep(temporaryDirectory)
        // Bodies of cut downloads kept for resuming (`tmp/partial/`): stale ones go, the rest stay within bounds.
        PartialDownloads.inDiskCache(self).trim()
        for name in Self.list(temporaryDirectory) {
            let path = temporaryDirectory + "/" + name
            if let info = Self.stat(path), now - info.modified >= lifetime { unlink(path) }
        }

        struct Group {
            var meta: (modified: Double, size: Int)?
            var bodies: [(name: String, size: Int, modified: Double)] = []
        }
        var groups: [String: Group] = [:]
        state.withLock { $0.writtenSinceListing = 0 }
        for name in Self.list(entriesDirectory) {
            guard let dot = name.firstIndex(of: "."), let info = Self.stat(entriesDirectory + "/" + name) else {
                continue
            }
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
                    if now - body.modified >= lifetime {
                        unlink(entriesDirectory + "/" + body.name)
                    } else {
                        total += body.size
                    }
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
        // Entries committed while the folder was listed may be missing from
        // `total`: they count (perhaps twice, which only errs towards sweeping),
        // and another sweep runs when they take the folder past its limit.
        let overLimit = state.withLock { state -> Bool in
            let estimate = total + state.writtenSinceListing
            state.estimatedSize = estimate
            state.metrics.evictions += evicted
            state.metrics.sweeps += 1
            return estimate > configuration.sizeLimit && state.writtenSinceListing > 0
        }
        if overLimit { scheduleSweep() }
        return total
    }

    /// Removes the entries written in another format (an older VipsLoad's:
    /// other checksums and file names, so they are never found), once per
    /// instance, unless the folder's `format` file already names the current
    /// version; then records the current version there.
    func removeEntriesOfOtherFormats() {
        let first = state.withLock { state -> Bool in
            defer { state.formatChecked = true }
            return !state.formatChecked
        }
        guard first else { return }
        let marker = rootDirectory + "/format"
        let current = String(DiskCacheEntry.currentVersion)
        if let text = try? String(contentsOfFile: marker, encoding: .utf8),
            text.trimmingCharacters(in: .whitespacesAndNewlines) == current
        {
            return
        }
        struct Version: Decodable { let version: Int }
        var bodies: [String: [String]] = [:]
        let names = Self.list(entriesDirectory)
        for name in names where name.hasSuffix(".body") {
            guard let dot = name.firstIndex(of: ".") else { continue }
            bodies[String(name[..<dot]), default: []].append(name)
        }
        for name in names where name.hasSuffix(".meta") {
            let path = entriesDirectory + "/" + name
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            guard (try? JSONDecoder().decode(Version.self, from: data))?.version != DiskCacheEntry.currentVersion
            else { continue }
            unlink(path)
            for body in bodies[String(name.dropLast(".meta".count))] ?? [] { unlink(entriesDirectory + "/" + body) }
        }
        // Written last, through a rename: a sweep interrupted before this point runs again.
        let temporary = marker + "." + StreamingFileWriter.randomName()
        if FileManager.default.createFile(atPath: temporary, contents: Data((current + "\n").utf8)),
            rename(temporary, marker) != 0
        {
            unlink(temporary)
        }
    }

    /// Blocks until background sweeps started so far have finished.
    public func waitForBackgroundSweeps() {
        backgroundWork.wait()
    }

    func scheduleSweep() {
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
    func noteWrite(bytes: Int) {
        let needsSweep = state.withLock { state -> Bool in
            state.metrics.writes += 1
            state.writtenSinceListing += bytes
            guard let estimate = state.estimatedSize else { return true }
            state.estimatedSize = estimate + bytes
            return estimate + bytes > configuration.sizeLimit
        }
        if needsSweep { scheduleSweep() }
    }

}
