import Foundation
import TestSupport
import VipsCore
import VipsServe
import VipsSynthesis
import XCTest

/// `vipsload serve` configured as imgproxy is, by `IMGPROXY_*` variables
/// alone (issue 29 §4), as a real child process: the environment starts it
/// and serves signed URLs; flags win over variables; a variable serve does
/// not know, or does not support, stops it with an error naming it. Also
/// imgproxy's options/parser/config_test.go (the preset variables), ported.
final class ServeImgproxyEnvironmentTests: XCTestCase {
    private var children: [ServeChild] = []
    private var folders: [URL] = []

    override func tearDown() {
        for child in children { child.stop() }
        children = []
        for folder in folders { try? FileManager.default.removeItem(at: folder) }
        folders = []
    }

    // imgproxy's documented example pair: key "secret", salt "hello".
    private let keyHex = "736563726574"
    private let saltHex = "68656c6c6f"

    /// A new folder with `photo.png` (64×48) in it, removed in `tearDown`.
    private func imageRoot() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("vipsload-imgproxy-env-\(UUID())")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        folders.append(root)
        try ImageSynthesizer.data(width: 64, height: 48, seed: 3, format: .png())
            .write(to: root.appendingPathComponent("photo.png"))
        return root
    }

    /// `serve` started by `environment` alone (no flag but `arguments`).
    private func start(_ environment: [String: String], _ arguments: [String] = []) throws -> ServeChild {
        var environment = environment
        if environment["IMGPROXY_BIND"] == nil { environment["IMGPROXY_BIND"] = "127.0.0.1:0" }
        let child = try ServeChild(arguments, environment: environment, addsAddress: false)
        children.append(child)
        return child
    }

    private func signed(_ path: String) throws -> String {
        let signing = try URLSigningKey(hexKey: keyHex, hexSalt: saltHex, signatureSize: 32)
        return "/" + signing.signature(forPath: path) + path
    }

    /// A PNG's width and height, from its IHDR chunk.
    private func pngSize(_ body: Data) -> (Int, Int)? {
        let bytes = [UInt8](body)
        guard bytes.count > 24, bytes[12..<16].elementsEqual("IHDR".utf8) else { return nil }
        let number = { (at: Int) in bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) } }
        return (number(16), number(20))
    }

    /// A usage error's stderr (status 2) for `environment`; the flags give an
    /// address that cannot be bound, so a variable wrongly accepted exits 1 instead.
    private func usageError(_ environment: [String: String]) throws -> String {
        let result = try CLIHarness.run(["serve", "--port", "0", "--bind", "not-an-address"], environment: environment)
        XCTAssertEqual(result.status, 2, "\(environment): \(result.stderr)")
        return result.stderr
    }

    func testAnImgproxyEnvironmentAloneStartsServeAndServesASignedURL() throws {
        let root = try imageRoot()
        let child = try start([
            "IMGPROXY_LOCAL_FILESYSTEM_ROOT": root.path, "IMGPROXY_KEY": keyHex, "IMGPROXY_SALT": saltHex,
            "IMGPROXY_PRESETS": "default=q:70,thumb=rs:fill:16:12", "IMGPROXY_TTL": "600", "IMGPROXY_WORKERS": "2",
            "IMGPROXY_REQUESTS_QUEUE_SIZE": "8", "IMGPROXY_TIMEOUT": "20", "IMGPROXY_DOWNLOAD_TIMEOUT": "5",
            "IMGPROXY_READ_REQUEST_TIMEOUT": "10", "IMGPROXY_KEEP_ALIVE_TIMEOUT": "10", "IMGPROXY_MAX_CLIENTS": "0",
            "IMGPROXY_MAX_SRC_RESOLUTION": "50", "IMGPROXY_MAX_SRC_FILE_SIZE": "0", "IMGPROXY_USE_ETAG": "true",
            "IMGPROXY_ALLOW_SECURITY_OPTIONS": "true", "IMGPROXY_LOG_FORMAT": "structured",
            "IMGPROXY_STRIP_METADATA": "true", "IMGPROXY_QUALITY": "75", "IMGPROXY_AUTO_ROTATE": "true",
            "IMGPROXY_NETWORK": "tcp",
            "IMGPROXY_SENTRY_DSN": "https://example.invalid/1", "IMGPROXY_GRACEFUL_STOP_TIMEOUT": "5"
        ])
        XCTAssertTrue(child.stderr.contains("IMGPROXY_SENTRY_DSN is ignored"), child.stderr)
        let connection = try TestConnection(port: child.port)
        let response = try connection.request(try signed("/pr:thumb/plain/local:///photo.png@png"))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.header("Cache-Control"), "public, max-age=600")
        XCTAssertNotNil(response.header("ETag"))
        XCTAssertEqual(pngSize(response.body).map { [$0.0, $0.1] }, [16, 12])
        // The variant is the expanded options: the preset and its options spelled out share the ETag.
        let spelled = try connection.request(try signed("/rs:fill:16:12/plain/local:///photo.png@png"))
        XCTAssertEqual(spelled.header("ETag"), response.header("ETag"))
        let other = try connection.request(try signed("/rs:fill:16:12/q:71/plain/local:///photo.png@png"))
        XCTAssertNotEqual(other.header("ETag"), response.header("ETag"), "the default preset's q:70 is in the key")
        // Unsigned: refused, as imgproxy with a key.
        XCTAssertEqual(try connection.request("/insecure/pr:thumb/plain/local:///photo.png@png").status, 403)
        // Security options are allowed, and the limit is the server's (50 MP) unless the URL sets its own.
        XCTAssertEqual(try connection.request(try signed("/msr:0.001/plain/local:///photo.png@png")).status, 422)
    }

    /// IMGPROXY_PATH_PREFIX (the signature signs the path after it) and IMGPROXY_ALLOW_ORIGIN (CORS, as imgproxy).
    func testPathPrefixAndAllowOrigin() throws {
        let root = try imageRoot()
        let child = try start([
            "IMGPROXY_LOCAL_FILESYSTEM_ROOT": root.path, "IMGPROXY_KEY": keyHex, "IMGPROXY_SALT": saltHex,
            "IMGPROXY_PATH_PREFIX": "/img/", "IMGPROXY_ALLOW_ORIGIN": "https://app.example"
        ])
        let connection = try TestConnection(port: child.port)
        let path = "/w:10/plain/local:///photo.png@png"
        let response = try connection.request("/img" + (try signed(path)))
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.header("Access-Control-Allow-Origin"), "https://app.example")
        XCTAssertEqual(response.header("Access-Control-Allow-Methods"), "GET, OPTIONS")
        XCTAssertEqual(try connection.request(try signed(path)).status, 404, "not under the prefix")
        XCTAssertEqual(try connection.request("/img/health").status, 200)
        let preflight = try connection.request("/img" + (try signed(path)), method: "OPTIONS")
        XCTAssertEqual(preflight.status, 200)
        XCTAssertEqual(preflight.header("Access-Control-Allow-Origin"), "https://app.example")
        // Without the variable: no CORS header, and OPTIONS is not a method served.
        let plain = try start(["IMGPROXY_LOCAL_FILESYSTEM_ROOT": root.path])
        let plainConnection = try TestConnection(port: plain.port)
        XCTAssertNil(try plainConnection.request("/_" + path).header("Access-Control-Allow-Origin"))
        XCTAssertEqual(try plainConnection.request("/_" + path, method: "OPTIONS").status, 405)
    }

    /// IMGPROXY_QUALITY (`--quality`) and IMGPROXY_STRIP_METADATA set the defaults: a URL without them
    /// makes the bytes of the URL with them.
    func testQualityAndStripMetadataAreTheOptionsDefaults() throws {
        let root = try imageRoot()
        let child = try start([
            "IMGPROXY_LOCAL_FILESYSTEM_ROOT": root.path, "IMGPROXY_QUALITY": "30", "IMGPROXY_STRIP_METADATA": "false"
        ])
        let connection = try TestConnection(port: child.port)
        let plain = try connection.request("/_/w:64/plain/local:///photo.png@jpg")
        let spelled = try connection.request("/_/w:64/q:30/sm:0/plain/local:///photo.png@jpg")
        let better = try connection.request("/_/w:64/q:90/plain/local:///photo.png@jpg")
        XCTAssertEqual([plain.status, spelled.status, better.status], [200, 200, 200])
        XCTAssertEqual(plain.body, spelled.body)
        XCTAssertLessThan(plain.body.count, better.body.count, "quality 30 is smaller than 90")
    }

    func testFlagsWinOverTheirVariables() throws {
        let root = try imageRoot()
        let child = try start(
            ["IMGPROXY_LOCAL_FILESYSTEM_ROOT": "/nonexistent-root", "IMGPROXY_TTL": "600"],
            ["--root", root.path, "--max-age", "60"])
        let response = try TestConnection(port: child.port).request("/_/w:10/plain/local:///photo.png@png")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.header("Cache-Control"), "public, max-age=60")
    }

    func testAVariableServeDoesNotKnowOrSupportStopsItNamingTheVariable() throws {
        XCTAssertTrue(
            try usageError(["IMGPROXY_NOT_A_SETTING": "1", "IMGPROXY_ALSO_NOT": "x"])
                .contains("IMGPROXY_ALSO_NOT, IMGPROXY_NOT_A_SETTING are set but mean nothing to vipsload serve"))
        XCTAssertTrue(
            try usageError(["IMGPROXY_SECRET": "s3cr3t"]).contains("IMGPROXY_SECRET (no Authorization check)"))
        XCTAssertTrue(try usageError(["IMGPROXY_PATH_PREFIX": "img"]).contains("--path-prefix takes a path"))
        XCTAssertTrue(try usageError(["IMGPROXY_TIMEOUT": "soon"]).contains("IMGPROXY_TIMEOUT takes a whole number"))
        XCTAssertTrue(
            try usageError(["IMGPROXY_ONLY_PRESETS": "maybe"]).contains("IMGPROXY_ONLY_PRESETS takes a boolean"))
        XCTAssertTrue(
            try usageError(["IMGPROXY_ALLOWED_SOURCES": "https://example.com/images/"])
                .contains("IMGPROXY_ALLOWED_SOURCES: 'https://example.com/images/' is not a source pattern"))
        XCTAssertTrue(try usageError(["IMGPROXY_PRESETS": "thumb=w:-1"]).contains("error in preset 'thumb'"))
        // An empty variable is unset, as imgproxy reads it.
        let result = try CLIHarness.run(
            ["serve", "--port", "0", "--bind", "not-an-address"], environment: ["IMGPROXY_NOT_A_SETTING": ""])
        XCTAssertEqual(result.status, 1, result.stderr)
    }

    // MARK: - options/parser/config_test.go

    /// Which of `names` the server's presets define: a URL applying one gets 200, an unknown one 400.
    private func defined(_ names: [String], _ environment: [String: String]) throws -> [String] {
        var environment = environment
        environment["IMGPROXY_LOCAL_FILESYSTEM_ROOT"] = try imageRoot().path
        let child = try start(environment)
        let connection = try TestConnection(port: child.port)
        return try names.filter {
            try connection.request("/_/pr:\($0)/plain/local:///photo.png@png").status == 200
        }
    }

    private func presetsFile(_ text: String) throws -> String {
        let root = try imageRoot()
        let path = root.appendingPathComponent("presets.txt").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// TestPresetsPresent
    func testPresetsPresent() throws {
        let environment = [
            "IMGPROXY_PRESETS_SEPARATOR": ";", "IMGPROXY_PRESETS": "preset1=w:10;preset2=w:11;preset3=w:12"
        ]
        XCTAssertEqual(
            try defined(["preset1", "preset2", "preset3", "preset4"], environment), ["preset1", "preset2", "preset3"])
    }

    /// TestPresetsEmpty
    func testPresetsEmpty() throws {
        XCTAssertEqual(try defined(["preset1"], ["IMGPROXY_PRESETS_SEPARATOR": ",", "IMGPROXY_PRESETS": ""]), [])
    }

    /// TestPresetsFromFile
    func testPresetsFromFile() throws {
        let path = try presetsFile("file_preset1=w:10\n\n# a comment\nfile_preset2=h:10\n")
        XCTAssertEqual(
            try defined(["file_preset1", "file_preset2"], ["IMGPROXY_PRESETS_PATH": path, "IMGPROXY_PRESETS": ""]),
            ["file_preset1", "file_preset2"])
    }

    /// TestPresetsFileEmpty
    func testPresetsFileEmpty() throws {
        XCTAssertEqual(try defined(["file_preset1"], ["IMGPROXY_PRESETS_PATH": try presetsFile("")]), [])
    }

    /// TestPresetsFileNotFound
    func testPresetsFileNotFound() throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("no-presets-\(UUID())").path
        XCTAssertTrue(
            try usageError(["IMGPROXY_PRESETS_PATH": missing]).contains(
                "IMGPROXY_PRESETS_PATH: '\(missing)' cannot be read"))
    }

    /// TestPresetsFromBothSources: the variable's presets, then the file's (a later one of a name wins).
    func testPresetsFromBothSources() throws {
        let root = try imageRoot()
        let path = try presetsFile("file_preset1=w:10\nshared=w:20\n")
        let child = try start([
            "IMGPROXY_LOCAL_FILESYSTEM_ROOT": root.path, "IMGPROXY_PRESETS": "preset1=w:30,shared=w:40",
            "IMGPROXY_PRESETS_PATH": path
        ])
        let connection = try TestConnection(port: child.port)
        for (preset, width) in [("preset1", 30), ("file_preset1", 10), ("shared", 20)] {
            let response = try connection.request("/_/pr:\(preset)/plain/local:///photo.png@png")
            XCTAssertEqual(response.status, 200, preset)
            XCTAssertEqual(pngSize(response.body)?.0, width, preset)
        }
    }

    func testOnlyPresetsMode() throws {
        let root = try imageRoot()
        let child = try start([
            "IMGPROXY_LOCAL_FILESYSTEM_ROOT": root.path, "IMGPROXY_PRESETS": "small=w:8,tall=h:24",
            "IMGPROXY_ONLY_PRESETS": "1"
        ])
        let connection = try TestConnection(port: child.port)
        let response = try connection.request("/_/small/plain/local:///photo.png@png")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(pngSize(response.body).map { [$0.0, $0.1] }, [8, 6])
        XCTAssertEqual(try connection.request("/_/w:8/plain/local:///photo.png@png").status, 404)
    }

    func testAllowedProcessingOptions() throws {
        let root = try imageRoot()
        let child = try start([
            "IMGPROXY_LOCAL_FILESYSTEM_ROOT": root.path, "IMGPROXY_ALLOWED_PROCESSING_OPTIONS": "w,pr",
            "IMGPROXY_PRESETS": "soft=bl:1"
        ])
        let connection = try TestConnection(port: child.port)
        XCTAssertEqual(try connection.request("/_/w:8/pr:soft/plain/local:///photo.png@png").status, 200)
        XCTAssertEqual(try connection.request("/_/w:8/bl:1/plain/local:///photo.png@png").status, 404)
    }
}
