import Foundation

/// One new data-cache entry streaming in (`ImageDataCaching.makeWriter(for:)`):
/// its bytes go to a new file as they arrive, and the entry becomes visible
/// only when `commit` hands the complete file to its cache, so an interrupted
/// write (even a killed process) never leaves a partial entry behind.
///
/// File-backed by design: the pipeline's decoder reads files, so a large
/// download never sits whole in memory, and bytes a cache refuses while they
/// stream (a full disk) can still be moved elsewhere and delivered. A writer
/// dropped without `commit` deletes its file.
public final class ImageDataCacheWriter: Sendable {
    /// Makes a complete file the entry: given its path and size and what to
    /// store with it, moves or copies it into the cache and returns the data
    /// to decode (the stored copy, or the file itself).
    public typealias Store =
        @Sendable (_ path: String, _ byteCount: Int, _ http: HTTPCacheMetadata?, _ sourceInfo: ImageInfo?)
        throws(VipsError) -> ImageData

    /// What became of a commit that keeps the bytes when the cache refuses them.
    enum Outcome {
        /// Stored; the data is the stored copy (a private link to it, for a `DiskCache`).
        case stored(ImageData)
        /// Not stored (the file system refused); the bytes are still readable
        /// from `data`, a file deleted when released.
        case uncached(ImageData, reason: VipsError)
    }

    typealias Commit =
        @Sendable (StreamingFileWriter, HTTPCacheMetadata?, ImageInfo?, _ keepingBytes: Bool) throws(VipsError) ->
        Outcome

    /// The file the bytes stream into (an HTTP transfer writes to it directly).
    let file: StreamingFileWriter
    private let commitFile: Commit
    private let refused: @Sendable () -> Void

    /// A writer over `file`, committed by `commit`; `refused` counts a write
    /// the cache's file system refused.
    init(file: StreamingFileWriter, commit: @escaping Commit, refused: @escaping @Sendable () -> Void = {}) {
        self.file = file
        commitFile = commit
        self.refused = refused
    }

    /// A writer streaming into a new file in `directory` (which must exist,
    /// on the cache's file system so the store can move it): `commit` hands
    /// the complete file to `store`. For caches other than `DiskCache`.
    ///
    /// - Throws: `.io` when the file cannot be created.
    public convenience init(directory: String, store: @escaping Store) throws(VipsError) {
        let file = try StreamingFileWriter(directory: directory, namePrefix: "w-")
        self.init(file: file) { file, http, sourceInfo, keepingBytes throws(VipsError) in
            let summary = try file.finish()
            do throws(VipsError) {
                return .stored(try store(file.path, summary.byteCount, http, sourceInfo))
            } catch {
                if keepingBytes, access(file.path, F_OK) == 0 {
                    return .uncached(
                        ImageData(
                            input: .file(file.path), byteCount: summary.byteCount, leadingBytes: summary.prefix,
                            removingFileOnRelease: true),
                        reason: error)
                }
                unlink(file.path)
                throw error
            }
        }
    }

    /// Bytes written so far.
    public var byteCount: Int { file.byteCount }

    /// Appends `bytes` to the entry.
    ///
    /// - Throws: `VipsError` when the file system refuses them (the entry
    ///   can then only be discarded).
    public func write(_ bytes: Data) throws(VipsError) {
        do throws(VipsError) {
            try file.write(bytes)
        } catch {
            refused()
            throw error
        }
    }

    /// Makes the entry visible, with `http` metadata and the header of the
    /// image it was made from (`sourceInfo`, for a processed image), and
    /// returns the data to decode.
    ///
    /// - Throws: `VipsError` when the cache refuses the entry (the bytes are
    ///   empty or not an image, too large, or the file system refused them);
    ///   nothing of it is left.
    @discardableResult
    public func commit(http: HTTPCacheMetadata? = nil, sourceInfo: ImageInfo? = nil) throws(VipsError) -> ImageData {
        switch try commitFile(file, http, sourceInfo, false) {
        case .stored(let data): return data
        case .uncached(_, let reason): throw reason
        }
    }

    /// Commits like `commit`, except that when the file system refuses the
    /// entry the bytes are kept for the caller: a full or read-only cache must
    /// not cost a download.
    func commitKeepingBytes(http: HTTPCacheMetadata?) throws(VipsError) -> Outcome {
        try commitFile(file, http, nil, true)
    }

    /// Counts a write the cache's file system refused, made to the file
    /// directly (an HTTP transfer that then moves the body elsewhere).
    func noteRefused() {
        refused()
    }

    /// Abandons the entry and deletes its file.
    public func discard() {
        file.discard()
    }
}
