import Foundation
import XCTest

/// The command list (`Command.all`) is what `help`, the usage text and dispatch read.
final class CommandListTests: XCTestCase {
    func testEveryListedCommandHasItsUsageUnderHelpAndIsDispatched() throws {
        let help = try CLIHarness.run(["help"])
        XCTAssertEqual(help.status, 0)
        let lines = help.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        let names = lines.drop { $0 != "commands:" }.dropFirst().prefix { !$0.isEmpty }.compactMap {
            $0.split(separator: " ").first.map(String.init)
        }
        XCTAssertEqual(names, ["info", "thumb", "bench", "serve", "corpus", "version", "help"], help.stdout)
        for name in names {
            let usage = try CLIHarness.run(["help", name])
            XCTAssertEqual(usage.status, 0, name)
            XCTAssertTrue(usage.stdout.hasPrefix("usage: vipsload \(name)"), usage.stdout)
            if !["version", "help"].contains(name) {
                XCTAssertEqual(try CLIHarness.run([name, "--help"]).stdout, usage.stdout, "\(name) --help")
            }
        }
        XCTAssertEqual(try CLIHarness.run(["--help"]).stdout, help.stdout)
        let bare = try CLIHarness.run([])
        XCTAssertEqual(bare.status, 2)
        XCTAssertEqual(bare.stderr, help.stdout, "no command: the same usage, on stderr")
        let version = try CLIHarness.run(["-V"])
        XCTAssertEqual(version.status, 0)
        XCTAssertEqual(try CLIHarness.run(["version"]).stdout, version.stdout)
        XCTAssertTrue(version.stdout.hasPrefix("vipsload "), version.stdout)
        let unknown = try CLIHarness.run(["help", "nonsense"])
        XCTAssertEqual(unknown.status, 2)
        XCTAssertTrue(unknown.stderr.hasPrefix("vipsload help: unknown command 'nonsense'"), unknown.stderr)
    }
}
