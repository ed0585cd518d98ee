import Foundation
import VipsCore

/// Expands the command line's inputs into the list of images to process.
///
/// Files named on the command line are always processed (an unreadable or
/// non-image file is reported as that input's error). Folders are walked
/// recursively in name order; there, files whose first bytes are not an image
/// (READMEs, `.DS_Store`) are skipped silently, since nobody asked for them.
struct InputCollector {
    /// One image to process and the output name it maps to.
    struct Item {
        /// The path as given or found.
        let path: String
        /// The output path relative to the output folder, without extension:
        /// the file's base name, under its sub-folder when found in a folder.
        let outputStem: String
    }

    static func collect(_ arguments: [String]) -> [Item] {
        var items: [Item] = []
        let fileManager = FileManager.default
        for argument in arguments {
            var isDirectory: ObjCBool = false
            if fileManager.fileExists(atPath: argument, isDirectory: &isDirectory), isDirectory.boolValue {
                let root = URL(fileURLWithPath: argument).standardizedFileURL
                for relative in filesBelow(root) {
                    let stem = (relative as NSString).deletingPathExtension
                    items.append(Item(path: root.appendingPathComponent(relative).path, outputStem: stem))
                }
            } else {
                let name = (argument as NSString).lastPathComponent
                items.append(Item(path: argument, outputStem: (name as NSString).deletingPathExtension))
            }
        }
        return items
    }

    /// Relative paths of the image files below `root`, sorted, symlinked folders not followed.
    private static func filesBelow(_ root: URL) -> [String] {
        guard let enumerator = FileManager.default.enumerator(
            at: root, includingPropertiesForKeys: [.isRegularFileKey], options: [.skipsHiddenFiles]) else { return [] }
        var found: [String] = []
        let prefix = root.path.hasSuffix("/") ? root.path : root.path + "/"
        for case let url as URL in enumerator {
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true else { continue }
            let path = url.standardizedFileURL.path
            guard path.hasPrefix(prefix), looksLikeImage(path) else { continue }
            found.append(String(path.dropFirst(prefix.count)))
        }
        return found.sorted()
    }

    private static func looksLikeImage(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        guard let prefix = try? handle.read(upToCount: 32) else { return false }
        return ImageFormat.sniff(prefix) != nil
    }
}
