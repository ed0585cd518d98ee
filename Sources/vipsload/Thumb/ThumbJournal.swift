import Foundation
import VipsCore

/// What earlier runs wrote into an output folder, so a rerun skips outputs
/// that are up to date: `<out>/.vipsload-journal`, one line appended per
/// thumbnail written (tab-separated: version, output path, options, input
/// identity, output size, output modification time in nanoseconds).
///
/// An output is up to date when its file is exactly the one recorded (same
/// size and modification time), it was made from the same input with the same
/// options, and, for a file input, it is not older than the file. A line is
/// appended after the rename, with one `write(2)` on an `O_APPEND` descriptor,
/// so several processes can share a folder and a killed run loses at most the
/// record of the thumbnails it was finishing (they are made again). The file
/// is opened at the first record, after the first thumbnail was written (so
/// the folder exists).
final class ThumbJournal: Sendable {
    static let fileName = ".vipsload-journal"

    private struct Record {
        let options: String
        let input: String
        let size: Int64
        let modified: Int64
    }

    private let records: [String: Record]
    private let path: String
    /// The journal opened for appending (-1: it could not be), once the first record is made.
    private let descriptor = LockedState<Int32?>(nil)

    /// Reads the journal in `folder` (an unreadable or missing one is empty).
    init(folder: URL) {
        path = folder.appendingPathComponent(Self.fileName).path
        var records: [String: Record] = [:]
        if let data = FileManager.default.contents(atPath: path) {
            for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
                let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
                guard fields.count == 6, fields[0] == "v1", let size = Int64(fields[4]), let modified = Int64(fields[5])
                else { continue }
                records[String(fields[1])] = Record(
                    options: String(fields[2]), input: String(fields[3]), size: size, modified: modified)
            }
        }
        self.records = records
    }

    deinit {
        if let descriptor = descriptor.withLock({ $0 }), descriptor >= 0 { close(descriptor) }
    }

    /// Whether `output` (relative to the folder) is up to date for `input` made with `options`.
    func isUpToDate(output: String, in folder: URL, options: String, input: String, sourceModified: Int64?) -> Bool {
        guard let record = records[output], record.options == options, record.input == input else { return false }
        var info = stat()
        guard stat(folder.appendingPathComponent(output).path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            return false
        }
        let modified = Self.nanoseconds(info.st_mtim)
        guard Int64(info.st_size) == record.size, modified == record.modified else { return false }
        if let sourceModified, modified < sourceModified { return false }
        return true
    }

    /// Records that `output` was written from `input` with `options`; `info` is the written file's status.
    func record(output: String, options: String, input: String, info: stat) {
        let descriptor = self.descriptor.withLock { descriptor -> Int32 in
            if let descriptor { return descriptor }
            let opened = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
            descriptor = opened
            return opened
        }
        guard descriptor >= 0 else { return }
        let line = "v1\t\(output)\t\(options)\t\(input)\t\(info.st_size)\t\(Self.nanoseconds(info.st_mtim))\n"
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
    }

    static func nanoseconds(_ time: timespec) -> Int64 {
        Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
