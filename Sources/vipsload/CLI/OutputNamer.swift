import Foundation

/// Turns each input into its output path inside the output folder, from a
/// name template (`--name`), and finds clashes.
///
/// An output's name is a function of its own input and the template only,
/// never of the other inputs of the run, so adding files to a folder never
/// renames or repoints an existing thumbnail. Two inputs that map to one name
/// are a clash: the caller writes neither.
///
/// Every path component is sanitised (no `..`, no separators, no control
/// characters, no leading dot, bounded length), so no input name can write
/// outside the output folder or make a hidden file.
struct OutputNamer: Sendable {
    /// The default template: the input's stem, under its sub-folders for files found in a folder.
    static let defaultTemplate = "%d/%s"

    static let placeholderHelp = """
                                  %s  the input's name without its extension ('stdin' for -)
                                  %e  the input's extension    %p  its parent folder
                                  %d  sub-folders below the folder argument
                                  %P  all its parent folders (a URL's host and path)
                                  %h  8 hex digits of a stable hash of the input as named
                                  %%  a percent sign
        """

    private enum Part: Hashable {
        case literal(String)
        case stem, sourceExtension, subfolder, parent, parents, hash
    }

    /// The template as given.
    let template: String
    let fileExtension: String
    private let parts: [Part]

    /// - Throws: a usage error for an unknown placeholder or a template that names nothing.
    init(template: String, fileExtension: String) throws(ArgumentParser.UsageError) {
        self.template = template
        self.fileExtension = fileExtension
        var parts: [Part] = []
        var literal = ""
        var characters = template.makeIterator()
        while let character = characters.next() {
            guard character == "%" else { literal.append(character); continue }
            let part: Part
            switch characters.next() {
            case "%": literal.append("%"); continue
            case "s": part = .stem
            case "e": part = .sourceExtension
            case "d": part = .subfolder
            case "p": part = .parent
            case "P": part = .parents
            case "h": part = .hash
            case let other:
                throw ArgumentParser.UsageError(
                    description:
                        "--name: unknown placeholder '%\(other.map(String.init) ?? "")' (use %s, %e, %d, %p, %P, %h or %%)"
                )
            }
            if !literal.isEmpty { parts.append(.literal(literal)); literal = "" }
            parts.append(part)
        }
        if !literal.isEmpty { parts.append(.literal(literal)) }
        guard !parts.isEmpty else { throw ArgumentParser.UsageError(description: "--name: the template is empty") }
        self.parts = parts
    }

    /// The output path of `item`, relative to the output folder, with the format's extension.
    func name(for item: InputCollector.Item) -> String {
        var rendered = ""
        for part in parts {
            switch part {
            case .literal(let text): rendered += text
            case .stem: rendered += Self.sanitise(item.stem)
            case .sourceExtension: rendered += Self.sanitise(item.sourceExtension)
            case .subfolder: rendered += Self.sanitisePath(item.subfolder)
            case .parent: rendered += Self.sanitise((item.parentFolders as NSString).lastPathComponent)
            case .parents: rendered += Self.sanitisePath(item.parentFolders)
            case .hash: rendered += StableHash.hex(item.key, digits: 8)
            }
        }
        let path = Self.sanitisePath(rendered)
        return (path.isEmpty ? "image" : path) + "." + fileExtension
    }

    /// Two or more inputs whose output names are the same (compared without
    /// case, as on case-insensitive file systems).
    struct Clash {
        let output: String
        let items: [InputCollector.Item]
    }

    /// Every clash among `items`, in the order of their first input; the same
    /// input (same `key`) named twice is not a clash.
    func clashes(_ items: [InputCollector.Item]) -> [Clash] {
        var groups: [String: [InputCollector.Item]] = [:]
        var order: [String] = []
        for item in items {
            let name = name(for: item).lowercased()
            if groups[name] == nil { order.append(name) }
            if groups[name]?.contains(where: { $0.key == item.key }) != true { groups[name, default: []].append(item) }
        }
        return order.compactMap { key in
            guard let group = groups[key], group.count > 1 else { return nil }
            return Clash(output: name(for: group[0]), items: group)
        }
    }

    /// A template that gives every input of every clash its own name, or nil.
    func suggestion(for clashes: [Clash]) -> String? {
        let candidates = [template + ".%e", "%p/%s", "%P/%s", template + "-%h"]
        for candidate in candidates where candidate != template {
            guard let namer = try? OutputNamer(template: candidate, fileExtension: fileExtension) else { continue }
            if namer.clashes(clashes.flatMap(\.items)).isEmpty { return candidate }
        }
        return nil
    }

    /// Each component of a relative path sanitised; empty components dropped.
    static func sanitisePath(_ path: String) -> String {
        path.split(separator: "/").map { sanitise(String($0)) }.filter { !$0.isEmpty }.joined(separator: "/")
    }

    /// One safe path component: printable, no separators, not "." or "..",
    /// no leading dot (no hidden files), at most 200 bytes.
    static func sanitise(_ component: String) -> String {
        var cleaned = String(
            component.unicodeScalars.map { scalar -> Character in
                if scalar.value < 0x20 || scalar.value == 0x7F || scalar == "/" || scalar == "\\" { return "_" }
                return Character(scalar)
            })
        if cleaned == "." || cleaned == ".." {
            cleaned = "_"
        } else if cleaned.hasPrefix(".") {
            cleaned = "_" + cleaned.dropFirst()
        }
        while cleaned.utf8.count > 200 { cleaned.removeLast() }
        return cleaned
    }
}
