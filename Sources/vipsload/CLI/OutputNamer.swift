/// Turns input-derived stems into safe, unique output paths inside one folder.
///
/// Every path component is sanitised (no `..`, no separators, no control
/// characters, bounded length), so no input name can make the CLI write
/// outside its output folder, and two inputs never overwrite each other.
struct OutputNamer {
    private var used: Set<String> = []
    let fileExtension: String

    init(fileExtension: String) {
        self.fileExtension = fileExtension
    }

    /// A unique relative path for `stem` ("a/b/photo" → "a/b/photo.jpg", then "a/b/photo-2.jpg").
    mutating func name(for stem: String) -> String {
        let components = stem.split(separator: "/").map { Self.sanitise(String($0)) }.filter { !$0.isEmpty }
        let base = components.isEmpty ? "image" : components.joined(separator: "/")
        var candidate = base + "." + fileExtension
        var counter = 2
        while used.contains(candidate.lowercased()) {
            candidate = "\(base)-\(counter).\(fileExtension)"
            counter += 1
        }
        used.insert(candidate.lowercased())
        return candidate
    }

    /// One safe path component: printable, no separators, not "." or "..", at most 200 bytes.
    static func sanitise(_ component: String) -> String {
        var cleaned = String(component.unicodeScalars.map { scalar -> Character in
            if scalar.value < 0x20 || scalar.value == 0x7F || scalar == "/" || scalar == "\\" { return "_" }
            return Character(scalar)
        })
        if cleaned == "." || cleaned == ".." { cleaned = "_" }
        while cleaned.utf8.count > 200 { cleaned.removeLast() }
        return cleaned
    }
}
