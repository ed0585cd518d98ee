import Foundation
import VipsCore
import VipsServe

/// Where each of `vipsload serve`'s settings comes from: its flag, else
/// imgproxy's environment variable of the same meaning (so a deployment
/// configured for imgproxy keeps its variables), else the default.
///
/// One place for every variable: a setting read here names its origin (the
/// flag or the variable) in its usage errors. Empty variables count as unset,
/// as imgproxy reads them.
struct ServeSettings {
    let parsed: ArgumentParser.Parsed
    /// The process's environment (a test gives its own).
    let environment: [String: String]

    init(_ parsed: ArgumentParser.Parsed, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.parsed = parsed
        self.environment = environment
    }

    /// A variable's text, nil when it is unset or empty.
    func variable(_ name: String) -> String? {
        guard let text = environment[name], !text.isEmpty else { return nil }
        return text
    }

    /// A whole number from `--flag`, else `variable`, else `defaultValue`, within `range`.
    func int(
        _ flag: String, variable name: String, default defaultValue: Int, in range: ClosedRange<Int>
    ) throws(ArgumentParser.UsageError) -> Int {
        if parsed.value(flag) != nil { return try parsed.int(flag, default: defaultValue, in: range) }
        guard let text = variable(name) else { return defaultValue }
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
            throw ArgumentParser.UsageError(
                description:
                    "\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return value
    }

    // MARK: - Signing keys

    /// One hex secret and where it came from ("--key", "--key-file /etc/k", "IMGPROXY_KEY").
    struct Secret {
        let hex: String
        let origin: String
    }

    /// The signing keys: `--key`/`--salt` and `--key-file`/`--salt-file`
    /// (each repeatable; a file holds one hex secret a line, as imgproxy's
    /// `-keypath`), else `IMGPROXY_KEY`/`IMGPROXY_SALT` (comma-separated
    /// lists), paired in order; `--signature-size`, else
    /// `IMGPROXY_SIGNATURE_SIZE`, else 32. Also the warnings for key files
    /// others may read.
    func signingKeys() throws(ArgumentParser.UsageError) -> (keys: [URLSigningKey], warnings: [String]) {
        var warnings: [String] = []
        let keys = try secrets("key", variable: "IMGPROXY_KEY", warnings: &warnings)
        let salts = try secrets("salt", variable: "IMGPROXY_SALT", warnings: &warnings)
        guard keys.count == salts.count else {
            throw ArgumentParser.UsageError(
                description: "keys and salts come in pairs (\(keys.count) keys, \(salts.count) salts)")
        }
        let size = try int(
            "signature-size", variable: "IMGPROXY_SIGNATURE_SIZE", default: 32, in: 1...32)
        var signingKeys: [URLSigningKey] = []
        for (key, salt) in zip(keys, salts) {
            guard Self.isHex(key.hex) else {
                throw ArgumentParser.UsageError(description: "\(key.origin): the key is not hex")
            }
            guard Self.isHex(salt.hex) else {
                throw ArgumentParser.UsageError(description: "\(salt.origin): the salt is not hex")
            }
            do throws(VipsError) {
                signingKeys.append(try URLSigningKey(hexKey: key.hex, hexSalt: salt.hex, signatureSize: size))
            } catch {
                throw ArgumentParser.UsageError(description: "\(key.origin): \(error.message)")
            }
        }
        return (signingKeys, warnings)
    }

    /// `--NAME` values and `--NAME-file` lines, else the variable's comma-separated items.
    private func secrets(
        _ name: String, variable: String, warnings: inout [String]
    ) throws(ArgumentParser.UsageError) -> [Secret] {
        var found = parsed.values(name).map { Secret(hex: $0, origin: "--\(name)") }
        for path in parsed.values("\(name)-file") {
            let origin = "--\(name)-file \(path)"
            let (lines, warning) = try Self.secretLines(path: path, origin: origin)
            if let warning { warnings.append(warning) }
            found += lines.map { Secret(hex: $0, origin: origin) }
        }
        guard found.isEmpty, let text = self.variable(variable) else { return found }
        return text.split(separator: ",", omittingEmptySubsequences: false).map {
            Secret(hex: $0.trimmingCharacters(in: .whitespaces), origin: variable)
        }
    }

    /// Whether `text` is an even, non-zero number of hex digits.
    static func isHex(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count % 2 == 0
            && text.utf8.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0)
            }
    }

    /// A secret file's hex lines (surrounding white space and blank lines
    /// dropped), and a warning when its group or others may read it.
    static func secretLines(
        path: String, origin: String
    ) throws(ArgumentParser.UsageError) -> (lines: [String], warning: String?) {
        var status = stat()
        guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG,
            let data = FileManager.default.contents(atPath: path)
        else {
            throw ArgumentParser.UsageError(description: "\(origin): cannot be read (not a readable file)")
        }
        let lines = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !lines.isEmpty else { throw ArgumentParser.UsageError(description: "\(origin): the file is empty") }
        let warning =
            status.st_mode & (S_IRGRP | S_IROTH) != 0
            ? "\(origin): the file may be read by its group or others (chmod 600 it)" : nil
        return (lines, warning)
    }
}

// MARK: - Watermark

extension ServeSettings {
    /// The watermark `wm` draws and its opacity, as imgproxy configures them.
    struct Watermark {
        let source: WatermarkImage.Source
        let opacity: Double
        /// Where the source came from ("--watermark-path", "IMGPROXY_WATERMARK_URL"), for messages.
        let origin: String
    }

    /// The watermark: `--watermark-data` (base64), `--watermark-path` or
    /// `--watermark-url` (at most one), else imgproxy's
    /// `IMGPROXY_WATERMARK_DATA`, `_PATH` and `_URL`, taken in imgproxy's
    /// order (data, then path, then URL) with a warning naming any it
    /// ignores; `--watermark-opacity`, else `IMGPROXY_WATERMARK_OPACITY`,
    /// else 1 (above 0, at most 1). Nil when no source is set.
    func watermark() throws(ArgumentParser.UsageError) -> (watermark: Watermark?, warnings: [String]) {
        let kinds = ["data", "path", "url"]
        let flags = kinds.compactMap { kind in
            parsed.value("watermark-\(kind)").map { (kind, "--watermark-\(kind)", $0) }
        }
        let variables = kinds.compactMap { kind in
            variable("IMGPROXY_WATERMARK_\(kind.uppercased())").map {
                (kind, "IMGPROXY_WATERMARK_\(kind.uppercased())", $0)
            }
        }
        guard flags.count <= 1 else {
            throw ArgumentParser.UsageError(
                description: "\(flags.map(\.1).joined(separator: ", ")): give the watermark one source")
        }
        var warnings: [String] = []
        let chosen = flags.first ?? variables.first
        if flags.isEmpty, variables.count > 1, let chosen {
            warnings.append(
                "\(variables.dropFirst().map(\.1).joined(separator: ", ")) ignored: \(chosen.1) is the watermark "
                    + "(imgproxy's order: data, path, URL)")
        }
        let opacityOrigin =
            parsed.value("watermark-opacity") != nil ? "--watermark-opacity" : "IMGPROXY_WATERMARK_OPACITY"
        let opacityText = parsed.value("watermark-opacity") ?? variable("IMGPROXY_WATERMARK_OPACITY")
        var opacity = 1.0
        if let opacityText {
            guard let value = Double(opacityText.trimmingCharacters(in: .whitespaces)), value > 0, value <= 1 else {
                throw ArgumentParser.UsageError(
                    description: "\(opacityOrigin) takes a number above 0 and at most 1, not '\(opacityText)'")
            }
            opacity = value
        }
        guard let (kind, origin, text) = chosen else { return (nil, warnings) }
        let source: WatermarkImage.Source
        switch kind {
        case "data":
            guard let bytes = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw ArgumentParser.UsageError(description: "\(origin): not base64-encoded data")
            }
            source = .data(bytes)
        case "path": source = .path(text)
        default: source = .url(text)
        }
        return (Watermark(source: source, opacity: opacity, origin: origin), warnings)
    }
}
