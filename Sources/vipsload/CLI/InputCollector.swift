import Foundation
import VipsCore

/// Expands the command line's inputs into the list of images to process.
///
/// Files named on the command line are always processed (an unreadable or
/// non-image file is reported as that input's error). Folders are walked
/// recursively in name order, hidden files and folders left out. There a
/// file's name says whether it is meant to be an image: one with an image
/// extension (`imageExtensions`, any case) is an input, so an empty or HTML
/// `photo.jpg` is reported as a failure, not passed over; one with another
/// extension (a README, a video) is skipped and listed in
/// `Collection.skipped`; one without an extension is an input when its first
/// bytes are an image. Files found in a folder are named as the folder was
/// given (a relative folder gives relative paths). With `recognisingURLs`,
/// `http(s)://` inputs are URLs to download and `file://` URLs name files.
struct InputCollector {
    /// The file-name extensions of the formats VipsCore can identify, lower case.
    static let imageExtensions: Set<String> = [
        "jpg", "jpeg", "jpe", "jfif", "png", "webp", "gif", "tif", "tiff", "heic", "heif", "hif", "avif", "svg",
        "svgz", "pdf", "jp2", "j2k", "j2c", "jpf", "jpx", "jxl", "ppm", "pgm", "pbm", "pnm", "pfm", "bmp", "dib", "ico",
        "cur",
        "tga"
    ]

    /// What `collect` found: the inputs, and the files in folders it passed over.
    struct Collection {
        var items: [Item] = []
        /// Files found in folders that are not inputs, as named, with the reason.
        var skipped: [(path: String, reason: String)] = []
    }

    /// One image to process, with what its output name may be built from.
    struct Item: Sendable {
        /// The input as given (a path or URL) or found (a path in a folder,
        /// starting with the folder as given), for messages.
        let input: String
        let location: Location
        /// The input as named on the command line: the argument itself, or for
        /// a file found in a folder the folder argument joined with the path
        /// below it. Independent of the working folder and of the other
        /// inputs, so shards and `%h` agree across machines given the same
        /// command line.
        let key: String
        /// The file or URL name without its extension ("stdin" for `-`).
        let stem: String
        /// The source's extension without the dot ("" when none).
        let sourceExtension: String
        /// Sub-folders below the folder argument the file was found in ("" otherwise).
        let subfolder: String
        /// The folders above the input as named: a path's directory, or a
        /// URL's host and directory.
        let parentFolders: String
    }

    enum Location: Sendable {
        case file(String)
        case url(URL)
        /// `-`: the image's bytes on standard input.
        case standardInput
        /// Text that starts like an http(s) URL but is not one.
        case invalidURL
    }

    /// The items of `arguments`. Folders are walked without entering
    /// `skipping` (the output folder, so that a rerun over a folder holding its
    /// own thumbnails does not thumbnail them).
    static func collect(_ arguments: [String], recognisingURLs: Bool = false, skipping: URL? = nil) -> Collection {
        let skippedFolder = skipping.map { $0.resolvingSymlinksInPath().standardizedFileURL.path }
        var collection = Collection()
        let fileManager = FileManager.default
        for argument in arguments {
            if argument == "-" {
                collection.items.append(
                    Item(
                        input: "-", location: .standardInput, key: "-", stem: "stdin", sourceExtension: "",
                        subfolder: "", parentFolders: ""))
                continue
            }
            if recognisingURLs, let item = urlItem(argument) {
                collection.items.append(item)
                continue
            }
            var path = argument
            if recognisingURLs, argument.lowercased().hasPrefix("file://"), let url = URL(string: argument),
                url.isFileURL
            {
                path = url.path
            }
            var isDirectory: ObjCBool = false
            if fileManager.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                let root = URL(fileURLWithPath: path).standardizedFileURL
                var named = path
                while named.count > 1, named.hasSuffix("/") { named.removeLast() }
                for file in filesBelow(root, skipping: skippedFolder) {
                    // The path as the folder was named (relative stays relative), through any symlink in it.
                    let found = named == "/" ? "/" + file.relative : named + "/" + file.relative
                    if let reason = file.skipReason {
                        collection.skipped.append((found, reason))
                        continue
                    }
                    collection.items.append(
                        Item(
                            input: found, location: .file(found), key: found, stem: stem(of: file.relative),
                            sourceExtension: (file.relative as NSString).pathExtension,
                            subfolder: (file.relative as NSString).deletingLastPathComponent,
                            parentFolders: (found as NSString).deletingLastPathComponent))
                }
            } else {
                collection.items.append(
                    Item(
                        input: argument, location: .file(path), key: path, stem: stem(of: path),
                        sourceExtension: (path as NSString).pathExtension, subfolder: "",
                        parentFolders: (path as NSString).deletingLastPathComponent))
            }
        }
        return collection
    }

    /// A path's last component without its extension (a dot file keeps its name).
    private static func stem(of path: String) -> String {
        let name = (path as NSString).lastPathComponent
        let stem = (name as NSString).deletingPathExtension
        return stem.isEmpty ? name : stem
    }

    /// The item for an `http(s)://` input, or nil for anything else.
    private static func urlItem(_ argument: String) -> Item? {
        let lowered = argument.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else { return nil }
        guard let url = URL(string: argument), let host = url.host, !host.isEmpty else {
            return Item(
                input: argument, location: .invalidURL, key: argument, stem: "image", sourceExtension: "",
                subfolder: "", parentFolders: "")
        }
        var name = url.lastPathComponent
        var directory = url.deletingLastPathComponent().path
        if name.isEmpty || name == "/" { name = host; directory = "" }
        let stem = (name as NSString).deletingPathExtension
        let parents = directory.split(separator: "/").map(String.init).filter { !$0.isEmpty }
        return Item(
            input: argument, location: .url(url), key: argument, stem: stem.isEmpty ? name : stem,
            sourceExtension: (name as NSString).pathExtension, subfolder: "",
            parentFolders: ([host] + parents).joined(separator: "/"))
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

    /// A regular file found below a folder argument.
    private struct FoundFile {
        /// Its path below the folder.
        let relative: String
        /// Why it is not an input, or nil when it is one.
        let skipReason: String?
    }

    /// The regular files below a folder, sorted by relative path. Symlinks to
    /// files are read; symlinked folders are not followed (no loops).
    /// A folder argument that is itself a symlink is walked at its target.
    private static func filesBelow(_ named: URL, skipping skipped: String?) -> [FoundFile] {
        let root = named.resolvingSymlinksInPath()
        guard
            let enumerator = FileManager.default.enumerator(
                at: root, includingPropertiesForKeys: [.isRegularFileKey, .isSymbolicLinkKey, .isDirectoryKey],
                options: [.skipsHiddenFiles])
        else { return [] }
        var found: [FoundFile] = []
        let prefix = root.path.hasSuffix("/") ? root.path : root.path + "/"
        for case let url as URL in enumerator {
            guard let kind = try? url.resourceValues(forKeys: [.isRegularFileKey, .isSymbolicLinkKey, .isDirectoryKey])
            else { continue }
            if kind.isDirectory == true, kind.isSymbolicLink != true {
                if let skipped, url.standardizedFileURL.path == skipped { enumerator.skipDescendants() }
                continue
            }
            if kind.isSymbolicLink == true {
                var target = stat()
                guard stat(url.path, &target) == 0, (target.st_mode & S_IFMT) == S_IFREG else { continue }
            } else if kind.isRegularFile != true {
                continue
            }
            let path = url.standardizedFileURL.path
            guard path.hasPrefix(prefix) else { continue }
            let relative = String(path.dropFirst(prefix.count))
            found.append(FoundFile(relative: relative, skipReason: skipReason(path)))
        }
        return found.sorted { $0.relative < $1.relative }
    }

    /// Why the file at `path`, found in a folder, is not an input; nil when it is one.
    private static func skipReason(_ path: String) -> String? {
        let fileExtension = (path as NSString).pathExtension
        if fileExtension.isEmpty {
            return looksLikeImage(path) ? nil : "no file-name extension, and not an image"
        }
        return imageExtensions.contains(fileExtension.lowercased())
            ? nil : ".\(fileExtension) is not an image extension"
    }

    private static func looksLikeImage(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        guard let prefix = try? handle.read(upToCount: 32) else { return false }
        return ImageFormat.sniff(prefix) != nil
    }
}
