import Foundation
import VipsCore
import VipsLoad
import VipsSynthesis

/// Test data and folders for the network and disk-cache tests.
enum NetworkFixtures {
    /// A real JPEG made by `ImageSynthesizer` (different seeds, different bytes).
    static func jpeg(width: Int = 320, height: Int = 240, seed: Int = 1) throws -> Data {
        try ImageSynthesizer.data(width: width, height: height, seed: seed, format: .jpeg(quality: 85))
    }

    /// A deterministic body of `size` bytes that starts with a JPEG signature
    /// and carries `version` in bytes 4..<12, so a reader can rebuild and
    /// compare the exact bytes of whichever version it finds. For tests of the
    /// disk cache, which stores encoded bytes without decoding them.
    static func versionedBody(version: Int, size: Int) -> Data {
        var data = Data([0xFF, 0xD8, 0xFF, 0xE0])
        withUnsafeBytes(of: UInt64(version).littleEndian) { data.append(contentsOf: $0) }
        var state = UInt64(truncatingIfNeeded: version) &* 0x9E37_79B9_7F4A_7C15 | 1
        var bytes = [UInt8](repeating: 0, count: max(0, size - data.count))
        for index in bytes.indices {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            bytes[index] = UInt8(truncatingIfNeeded: state)
        }
        data.append(contentsOf: bytes)
        return data
    }

    /// The version stored in a `versionedBody`.
    static func version(of data: Data) -> Int? {
        guard data.count >= 12 else { return nil }
        var value: UInt64 = 0
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: data[data.startIndex + 4..<data.startIndex + 12]) }
        return Int(UInt64(littleEndian: value))
    }

    /// A new empty folder under the system's temporary folder.
    static func makeDirectory(_ name: String) -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("vipsload-tests-\(name)-\(UUID().uuidString)", isDirectory: true)
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// The bytes `data` reads from (its file).
    static func contents(of data: ImageData) -> Data? {
        guard case .file(let path) = data.input else { return nil }
        return FileManager.default.contents(atPath: path)
    }

    /// Names of the files in `directory` (none when it does not exist). The
    /// private download folders of processes (`<pid>-<random>`, see
    /// `TemporaryDownloads`) are looked into: their files are listed as
    /// `folder/name`, their lock files are not.
    static func files(in directory: URL) -> [String] {
        var names: [String] = []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [] {
            let inner = directory.appendingPathComponent(name)
            if isPrivateDownloadFolder(name),
                let contents = try? FileManager.default.contentsOfDirectory(atPath: inner.path)
            {
                names += contents.filter { $0 != ".lock" }.map { name + "/" + $0 }
            } else {
                names.append(name)
            }
        }
        return names.sorted()
    }

    /// Whether `name` is a process's private download folder: `<pid>-<16 hex digits>`.
    static func isPrivateDownloadFolder(_ name: String) -> Bool {
        let parts = name.split(separator: "-")
        return parts.count == 2 && Int(parts[0]) != nil && parts[1].count == 16 && parts[1].allSatisfy(\.isHexDigit)
    }
}
