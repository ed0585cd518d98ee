import Foundation
import VipsCore

/// Expands the command line's inputs into the list of images to process.
///
/// Files named on the command line are always processed (an unreadable or
/// non-image file is reported as that input's error). Folders are walked
/// recursively in name order; there, files whose first bytes are not an image
/// (READMEs, `.DS_Store`) are skipped silently, since nobody asked for them.
/// With `recognisingURLs`, `http(s)://` inputs are URLs to download and
/// `file://` URLs name files.
struct InputCollector {
    /// One image to process and the output name it maps to.
    struct Item {
        /// The input as given (a path or URL) or found (a path in a folder), for messages.
        let input: String
        let location: Location
        /// The output path relative to the output folder, without extension:
        /// the file's base name, under its sub-folder when found in a folder;
        /// a URL's last path component.
        let outputStem: String
    }

    enum Location {
        case file(String)
        case url(URL)
        /// Text that starts like an http(s) URL but is not one.
        case invalidURL
    }

    static func collect(_ arguments: [String], recognisingURLs: Bool = false) -> [Item] {
        var items: [Item] = []
        let fileManager = FileManager.default
        for argument in arguments {
            if recognisingURLs, let item = urlItem(argument) {
                items.append(item)
                continue
            }
            var path = argument
            if recognisingURLs, argument.lowercased().hasPrefix("file://"), let url = URL(string: argument), url.isFileURL {
                path = url.path
            }
            var isDirectory: ObjCBool = false
            if fileManager.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                let root = URL(fileURLWithPath: path).standardizedFileURL
                for relative in filesBelow(root) {
                    let stem = (relative as NSString).deletingPathExtension
                    let found = root.appendingPathComponent(relative).path
                    items.append(Item(input: found, location: .file(found), outputStem: stem))
                }
            } else {
                let name = (path as NSString).lastPathComponent
                items.append(Item(input: argument, location: .file(path), outputStem: (name as NSString).deletingPathExtension))
            }
        }
        return items
    }

    /// The item for an `http(s)://` input, or nil for anything else.
    private static func urlItem(_ argument: String) -> Item? {
        let lowered = argument.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else { return nil }
        guard let url = URL(string: argument), url.host?.isEmpty == false else {
            return Item(input: argument, location: .invalidURL, outputStem: "image")
        }
        return Item(input: argument, location: .url(url), outputStem: outputStem(for: url))
    }

    /// A URL's last path component without its extension, as one path
    /// component: a `/` decoded from `%2F` cannot make a sub-folder. The host
    /// names a URL without a path.
    static func outputStem(for url: URL) -> String {
        var name = url.lastPathComponent
        if name.isEmpty || name == "/" { name = url.host ?? "image" }
        let stem = (name as NSString).deletingPathExtension
        return OutputNamer.sanitise(stem.isEmpty ? name : stem)
    }

    /// The inputs listed in `source` (a file, or `-` for standard input): one
    /// per line, surrounding white space trimmed, blank lines and lines
    /// starting with `#` skipped.
    static func readList(_ source: String) throws(VipsError) -> [String] {
        let data: Data
        if source == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: source) else {
                throw VipsError(.io, "cannot read the input list \(source)")
            }
            data = contents
        }
        return String(decoding: data, as: UTF8.self)
            .split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }

    /// Relative paths of the image files below `root`, sorted. Symlinks to
    /// files are read; symlinked folders are not followed (no loops).
    private static func filesBelow(_ root: URL) -> [String] {
        guard let enumerator = FileManager.default.enumerator(
            at: root, includingPropertiesForKeys: [.isRegularFileKey, .isSymbolicLinkKey],
            options: [.skipsHiddenFiles]) else { return [] }
        var found: [String] = []
        let prefix = root.path.hasSuffix("/") ? root.path : root.path + "/"
        for case let url as URL in enumerator {
            guard let kind = try? url.resourceValues(forKeys: [.isRegularFileKey, .isSymbolicLinkKey]) else { continue }
            if kind.isSymbolicLink == true {
                var target = stat()
                guard stat(url.path, &target) == 0, (target.st_mode & S_IFMT) == S_IFREG else { continue }
            } else if kind.isRegularFile != true {
                continue
            }
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
