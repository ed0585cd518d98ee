import Foundation

/// Streams one entry's bytes into a disk cache: they go to a temporary file
/// in the cache folder and become visible only when `commit` renames it into
/// place, so an interrupted write (even a killed process) never leaves a
/// partial entry behind.
///
/// A writer dropped without `commit` deletes its file.
final class DiskCacheWriter: Sendable {
    /// The source key the entry will be stored under.
    let key: String
    let file: StreamingFileWriter
    private let cache: DiskCache

    init(cache: DiskCache, key: String) throws(VipsError) {
        self.cache = cache
        self.key = key
        file = try cache.makeTemporaryFile()
    }

    /// Bytes written so far.
    var byteCount: Int { file.byteCount }

    /// Appends `data` to the entry.
    func write(_ data: Data) throws(VipsError) {
        do throws(VipsError) {
            try file.write(data)
        } catch {
            cache.noteWriteFailure()
            throw error
        }
    }

    /// Makes the entry visible: checks that the bytes are a non-empty image
    /// within the size limit, renames the file into place and writes the
    /// metadata atomically. Replaces any previous entry for the key.
    @discardableResult
    func commit(http: HTTPCacheMetadata? = nil) throws(VipsError) -> DiskCacheEntry {
        try cache.commit(file, key: key, http: http, openForReading: false).entry
    }

    /// Commits like `commit`, and returns a private link to the stored body for reading.
    func commitForReading(http: HTTPCacheMetadata?) throws(VipsError) -> ImageData {
        try cache.commit(file, key: key, http: http, openForReading: true).data
    }

    /// Abandons the entry and deletes its file.
    func discard() {
        file.discard()
    }
}
