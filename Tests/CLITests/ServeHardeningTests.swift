import Foundation
import TestSupport
import VipsCore
import VipsServe
import VipsSynthesis
import XCTest

/// `vipsload serve` against the hostile review's findings (issue 30), as a
/// user runs it: a real child process, real connections, real files.
final class ServeHardeningTests: XCTestCase {
    /// Ended and released in `tearDown` (XCTest keeps what a teardown block captures until the run ends).
    private var children: [ServeChild] = []
    private var folders: [URL] = []

    override func tearDown() {
        for child in children { child.stop() }
        children = []
        for folder in folders { try? FileManager.default.removeItem(at: folder) }
        folders = []
    }

    private func start(_ arguments: [String], environment: [String: String] = [:]) throws -> ServeChild {
        let child = try ServeChild(arguments, environment: environment)
        children.append(child)
        return child
    }

    /// A new empty folder, removed in `tearDown`.
    private func folder(_ name: String) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("vipsload-\(name)-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        folders.append(folder)
        return folder
    }

    /// A folder with `photo.png` (64×48) in it.
    private func imageRoot() throws -> URL {
        let root = try folder("serve-root")
        try ImageSynthesizer.data(width: 64, height: 48, seed: 3, format: .png())
            .write(to: root.appendingPathComponent("photo.png"))
        return root
    }

    /// `text` written to a file with permissions `mode`.
    private func secretFile(_ text: String, mode: Int, in folder: URL, name: String) throws -> String {
        let path = folder.appendingPathComponent(name).path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    /// The child's command line as the kernel shows it to every local user.
    private func commandLine(of child: ServeChild) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(child.process.processIdentifier)/cmdline"))
        return String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\0", with: " ")
    }

    // imgproxy's documented example pair: key "secret", salt "hello".
    private let keyHex = "736563726574"
    private let saltHex = "68656c6c6f"
    private let path = "/w:20/plain/local:///photo.png@png"

    private func signed(_ path: String, key: String, salt: String, size: Int = 32) throws -> String {
        let signing = try URLSigningKey(hexKey: key, hexSalt: salt, signatureSize: size)
        return "/" + signing.signature(forPath: path) + path
    }

    // MARK: - Finding 5: secrets not only on the command line

    func testKeysFromFilesVerifySignedURLsAndStayOffTheCommandLine() throws {
        let root = try imageRoot()
        let secrets = try folder("serve-secrets")
        let keyFile = try secretFile(keyHex + "\n", mode: 0o600, in: secrets, name: "key")
        let saltFile = try secretFile(saltHex + "\r\n\n", mode: 0o600, in: secrets, name: "salt")
        let child = try start(["--root", root.path, "--key-file", keyFile, "--salt-file", saltFile])
        let connection = try TestConnection(port: child.port)
        XCTAssertEqual(try connection.request(try signed(path, key: keyHex, salt: saltHex)).status, 200)
        XCTAssertEqual(try connection.request("/insecure\(path)").status, 403, "the key is checked")
        XCTAssertEqual(try connection.request(try signed(path, key: keyHex, salt: "00")).status, 403)
        let commandLine = try commandLine(of: child)
        XCTAssertTrue(commandLine.contains("--key-file"), commandLine)
        XCTAssertFalse(commandLine.contains(keyHex), commandLine)
        XCTAssertFalse(commandLine.contains(saltHex), commandLine)
        XCTAssertFalse(child.stderr.contains("warning"), "files only the owner reads: \(child.stderr)")
    }

    func testKeysFromImgproxysEnvironmentVerifyAndFlagsOverrideThem() throws {
        let root = try imageRoot()
        // Two pairs (a rotation), comma-separated as imgproxy reads them.
        let environment = ["IMGPROXY_KEY": "aa00,\(keyHex)", "IMGPROXY_SALT": "bb00,\(saltHex)"]
        let child = try start(["--root", root.path], environment: environment)
        let connection = try TestConnection(port: child.port)
        XCTAssertEqual(try connection.request(try signed(path, key: keyHex, salt: saltHex)).status, 200)
        XCTAssertEqual(try connection.request(try signed(path, key: "aa00", salt: "bb00")).status, 200)
        XCTAssertEqual(try connection.request("/insecure\(path)").status, 403)
        XCTAssertFalse(try commandLine(of: child).contains(keyHex))

        // IMGPROXY_SIGNATURE_SIZE: truncated signatures, and only those.
        var truncated = environment
        truncated["IMGPROXY_SIGNATURE_SIZE"] = "8"
        let short = try start(["--root", root.path], environment: truncated)
        let shortConnection = try TestConnection(port: short.port)
        XCTAssertEqual(
            try shortConnection.request(try signed(path, key: keyHex, salt: saltHex, size: 8)).status, 200)
        XCTAssertEqual(try shortConnection.request(try signed(path, key: keyHex, salt: saltHex)).status, 403)

        // A flag wins over the variable.
        let flagged = try start(["--root", root.path, "--key", "cc00", "--salt", "dd00"], environment: environment)
        let flaggedConnection = try TestConnection(port: flagged.port)
        XCTAssertEqual(try flaggedConnection.request(try signed(path, key: keyHex, salt: saltHex)).status, 403)
        XCTAssertEqual(try flaggedConnection.request(try signed(path, key: "cc00", salt: "dd00")).status, 200)
    }

    func testBadKeyFilesAndVariablesAreUsageErrorsNamingTheirOrigin() throws {
        let secrets = try folder("serve-secrets")
        let salt = try secretFile(saltHex, mode: 0o600, in: secrets, name: "salt")
        let empty = try secretFile("\n\n", mode: 0o600, in: secrets, name: "empty")
        let notHex = try secretFile("not-hex\n", mode: 0o600, in: secrets, name: "nothex")
        let missing = secrets.appendingPathComponent("missing").path
        for (arguments, expected) in [
            (["--key-file", missing, "--salt-file", salt], "--key-file \(missing): cannot be read"),
            (["--key-file", secrets.path, "--salt-file", salt], "--key-file \(secrets.path): cannot be read"),
            (["--key-file", empty, "--salt-file", salt], "--key-file \(empty): the file is empty"),
            (["--key-file", notHex, "--salt-file", salt], "--key-file \(notHex): the key is not hex"),
            (["--key-file", salt], "keys and salts come in pairs (1 keys, 0 salts)"),
            (["--key", keyHex, "--salt-file", salt, "--signature-size", "33"], "--signature-size takes")
        ] {
            let result = try CLIHarness.run(["serve", "--port", "0"] + arguments)
            XCTAssertEqual(result.status, 2, "\(arguments): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(expected), "\(arguments): \(result.stderr)")
        }
        for (environment, expected) in [
            (["IMGPROXY_KEY": "zz", "IMGPROXY_SALT": saltHex], "IMGPROXY_KEY: the key is not hex"),
            (["IMGPROXY_KEY": keyHex], "keys and salts come in pairs (1 keys, 0 salts)"),
            (
                ["IMGPROXY_KEY": keyHex, "IMGPROXY_SALT": saltHex, "IMGPROXY_SIGNATURE_SIZE": "0"],
                "IMGPROXY_SIGNATURE_SIZE"
            )
        ] {
            // An address it cannot bind: were the variable ignored, the command would exit 1, not run on.
            let result = try CLIHarness.run(
                ["serve", "--port", "0", "--bind", "not-an-address"], environment: environment)
            XCTAssertEqual(result.status, 2, "\(environment): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains(expected), "\(environment): \(result.stderr)")
        }
    }

    func testAKeyFileOthersMayReadGetsAWarning() throws {
        let secrets = try folder("serve-secrets")
        let key = try secretFile(keyHex, mode: 0o644, in: secrets, name: "key")
        let salt = try secretFile(saltHex, mode: 0o600, in: secrets, name: "salt")
        let child = try start(["--key-file", key, "--salt-file", salt])
        let warnings = child.stderr.split(separator: "\n").filter { $0.contains("warning") }
        XCTAssertEqual(
            warnings,
            ["vipsload serve: warning: --key-file \(key): the file may be read by its group or others (chmod 600 it)"],
            child.stderr)
    }

    // MARK: - Finding 6: one signed image has one URL

    func testASignedImageHasOneURL() throws {
        let root = try imageRoot()
        let child = try start(["--root", root.path, "--key", keyHex, "--salt", saltHex])
        let connection = try TestConnection(port: child.port)
        let url = try signed(path, key: keyHex, salt: saltHex)
        let signature = String(url.dropFirst().prefix(43))
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let last = try XCTUnwrap(alphabet.firstIndex(of: try XCTUnwrap(signature.last)))
        var served: [String] = []
        for bits in 0..<4 {
            let spelling = String(signature.dropLast()) + String(alphabet[last & ~3 | bits])
            if try connection.request("/\(spelling)\(path)").status == 200 { served.append(spelling) }
        }
        XCTAssertEqual(served, [signature], "one spelling of the signature")
        for (suffix, status) in [("?utm=1", 403), ("#x", 404), ("%00", 403), ("\u{1B}[31m", 404), ("\u{1}", 404)] {
            XCTAssertEqual(try connection.request(url + suffix).status, status, suffix.debugDescription)
        }
        XCTAssertEqual(try connection.request(url).status, 200)
    }

    // MARK: - Finding 7: log injection

    func testTheTextLogEscapesWhatTheClientSent() throws {
        let child = try start([])
        let connection = try TestConnection(port: child.port)
        // A quote and a forged field, ESC sequences (clear screen, red), a bare CR, bytes that are not UTF-8.
        var target = Data("/insecure/marker\" 200 0 0.0ms memory\" fake \u{1B}[2J\u{1B}[31m\r".utf8)
        target += [0xFF, 0xFE, 0xC3]
        target += Data("/end\\x".utf8)
        try connection.send(data: Data("GET ".utf8) + target + Data(" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        _ = try connection.readResponse()
        let line = try XCTUnwrap(child.waitForLine(containing: "marker"), child.stderr)
        XCTAssertTrue(
            line.utf8.allSatisfy { (0x20...0x7E).contains($0) }, "printable ASCII only: \(line.debugDescription)")
        let escapedQuotes = line.components(separatedBy: "\\\"").count - 1
        XCTAssertEqual(line.filter { $0 == "\"" }.count - escapedQuotes, 2, "only the two quotes of the field: \(line)")
        XCTAssertTrue(
            line.contains(
                #"/insecure/marker\" 200 0 0.0ms memory\" fake \x1B[2J\x1B[31m\x0D\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD/end\\x" "#
            ),
            line)
    }

    // MARK: - A root that holds the system's files

    func testARootHoldingTheSystemsFilesGetsAWarning() throws {
        let link = try folder("serve-link").appendingPathComponent("to-etc")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: "/etc")
        for root in ["/", "/etc", "/usr/share", "/proc", "/home", link.path] {
            let child = try start(["--root", root])
            let warnings = child.stderr.split(separator: "\n").filter { $0.contains("warning") }
            XCTAssertEqual(warnings.count, 1, "\(root): \(child.stderr)")
            XCTAssertTrue(
                warnings.first?.hasPrefix("vipsload serve: warning: --root '\(root)' serves the system's files")
                    ?? false,
                child.stderr)
            child.stop()
        }
        for root in [try imageRoot().path, "/tmp"] {
            let child = try start(["--root", root])
            XCTAssertFalse(child.stderr.contains("warning"), "\(root): \(child.stderr)")
        }
    }

    // MARK: - Finding 8: a disk cache that cannot be written

    /// `name`'s value in the Prometheus text of `/metrics`.
    private func metric(_ name: String, _ connection: TestConnection) throws -> Double? {
        let text = try connection.request("/metrics").text
        return text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            .flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    func testACacheFolderThatCannotBeWrittenIsCountedAndLoggedOnce() throws {
        let root = try imageRoot()
        let cache = try folder("serve-cache")
        let child = try start(["--root", root.path, "--cache-dir", cache.path])
        let connection = try TestConnection(port: child.port)
        XCTAssertEqual(try metric("vipsload_cache_write_failures_total", connection), 0)
        // As root a read-only mode does not stop a write: the entries folder becomes a file instead.
        let entries = cache.appendingPathComponent("entries")
        var isFolder: ObjCBool = false
        XCTAssertTrue(
            FileManager.default.fileExists(atPath: entries.path, isDirectory: &isFolder) && isFolder.boolValue)
        try FileManager.default.removeItem(at: entries)
        try Data("not a folder".utf8).write(to: entries)
        for width in [10, 20, 30] {
            let response = try connection.request("/insecure/w:\(width)/plain/local:///photo.png@png")
            XCTAssertEqual(response.status, 200, "served, though not cached")
            XCTAssertFalse(response.text.contains(cache.path))
        }
        XCTAssertNotNil(child.waitForLine(containing: "disk cache: cannot store"), child.stderr)
        let deadline = Date().addingTimeInterval(30)
        while try metric("vipsload_cache_write_failures_total", connection) != 3, Date() < deadline {
            usleep(10_000)
        }
        XCTAssertEqual(try metric("vipsload_cache_write_failures_total", connection), 3)
        let lines = child.stderr.split(separator: "\n").filter { $0.contains("disk cache: cannot store") }
        XCTAssertEqual(lines.count, 1, child.stderr)
        XCTAssertTrue(lines.first?.contains(cache.path) ?? false, "the line names the folder: \(child.stderr)")
    }
}
