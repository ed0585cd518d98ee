import Foundation
import VipsCore
import XCTest

@testable import VipsServe

/// imgproxy's preset tests, ported: options/parser/presets_test.go (the
/// definitions) and the preset cases of options/parser/processing_options_test.go
/// (applying them to URLs). Each test names the Go test it ports.
final class ProcessingPresetsTests: XCTestCase {
    private func parser(_ definitions: [String], onlyPresets: Bool = false) throws -> ProcessingURLParser {
        var parser = ProcessingURLParser(sources: try SourcePolicy())
        parser.presets = try ProcessingPresets(definitions: definitions)
        try parser.presets.validated()
        parser.onlyPresets = onlyPresets
        return parser
    }

    private func definitionError(_ definitions: [String]) -> String? {
        do throws(VipsError) {
            let presets = try ProcessingPresets(definitions: definitions)
            try presets.validated()
            return nil
        } catch {
            return error.message
        }
    }

    // MARK: - presets_test.go

    /// TestParsePreset
    func testParsePreset() throws {
        let presets = try ProcessingPresets(definitions: ["test=resize:fit:100:200/sharpen:2"])
        XCTAssertEqual(
            presets["test"],
            [
                ProcessingPresets.Option(name: "resize", arguments: ["fit", "100", "200"]),
                ProcessingPresets.Option(name: "sharpen", arguments: ["2"])
            ])
    }

    /// TestParsePresetInvalidString, TestParsePresetEmptyName,
    /// TestParsePresetEmptyValue, TestParsePresetInvalidValue, TestValidatePresetsInvalid
    func testInvalidPresetsAreRefusedNamingTheDefinition() {
        for (definition, expected) in [
            ("resize:fit:100:200/sharpen:2", "invalid preset 'resize:fit:100:200/sharpen:2' (not name=options)"),
            ("=resize:fit:100:200/sharpen:2", "empty preset name in '=resize:fit:100:200/sharpen:2'"),
            ("test=", "empty preset value in 'test='"),
            ("test=resize:fit:100:200/sharpen:2/blur", "invalid preset value in"),
            ("test=resize:fit:-1:-2/sharpen:2", "error in preset 'test': resize: -1 is negative")
        ] {
            let message = definitionError([definition])
            XCTAssertNotNil(message, definition)
            XCTAssertTrue(message?.contains(expected) == true, "\(definition): \(message ?? "no error")")
        }
    }

    /// TestParsePresetEmptyString, TestParsePresetComment
    func testBlankAndCommentDefinitionsDefineNothing() throws {
        XCTAssertTrue(try ProcessingPresets(definitions: ["   "]).isEmpty)
        XCTAssertTrue(try ProcessingPresets(definitions: ["#  test=resize:fit:100:200/sharpen:2"]).isEmpty)
    }

    /// TestValidatePresets
    func testValidPresetsValidate() throws {
        let presets = try ProcessingPresets(definitions: ["test=resize:fit:100:200/sharpen:2"])
        XCTAssertNoThrow(try presets.validated())
        XCTAssertFalse(presets.isEmpty)
    }

    // MARK: - processing_options_test.go

    /// TestParsePathPreset
    func testParsePathPreset() throws {
        let url = try parser(["test1=resizing_type:fill", "test2=blur:0.2/quality:50"])
            .parseURL("/_/preset:test1:test2/plain/http://images.dev/lorem/ipsum.jpg")
        XCTAssertEqual(url.options.resizingType, .fill)
        XCTAssertEqual(url.options.blur, 0.2, accuracy: 0.0001)
        XCTAssertEqual(url.options.quality, 50)
        XCTAssertEqual(url.usedPresets, ["test1", "test2"])
    }

    /// TestParsePathPresetDefault
    func testParsePathPresetDefault() throws {
        let url = try parser(["default=resizing_type:fill/blur:0.2/quality:50"])
            .parseURL("/_/quality:70/plain/http://images.dev/lorem/ipsum.jpg")
        XCTAssertEqual(url.options.resizingType, .fill)
        XCTAssertEqual(url.options.blur, 0.2, accuracy: 0.0001)
        XCTAssertEqual(url.options.quality, 70)
        XCTAssertEqual(url.usedPresets, ["default"])
    }

    /// TestParsePathPresetLoopDetection: a preset already being applied is skipped.
    func testParsePathPresetLoopDetection() throws {
        let url = try parser(["test1=resizing_type:fill/preset:test2", "test2=blur:0.2/preset:test1"])
            .parseURL("/_/preset:test1/plain/http://images.dev/lorem/ipsum.jpg")
        XCTAssertEqual(url.options.resizingType, .fill)
        XCTAssertEqual(url.options.blur, 0.2, accuracy: 0.0001)
        XCTAssertEqual(url.usedPresets, ["test1", "test2"])
    }

    /// TestParsePathOnlyPresets
    func testParsePathOnlyPresets() throws {
        let url = try parser(["test1=blur:0.2", "test2=quality:50"], onlyPresets: true)
            .parseURL("/_/test1:test2/plain/http://images.dev/lorem/ipsum.jpg@png")
        XCTAssertEqual(url.options.blur, 0.2, accuracy: 0.0001)
        XCTAssertEqual(url.options.quality, 50)
        XCTAssertEqual(url.options.format, .png)
        XCTAssertEqual(url.source, "http://images.dev/lorem/ipsum.jpg")
    }

    /// TestParseBase64URLOnlyPresets
    func testParseBase64URLOnlyPresets() throws {
        let origin = "http://images.dev/lorem/ipsum.jpg?param=value"
        let encoded = Data(origin.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        let url = try parser(["test1=blur:0.2", "test2=quality:50"], onlyPresets: true)
            .parseURL("/_/test1:test2/\(encoded).png")
        XCTAssertEqual(url.options.blur, 0.2, accuracy: 0.0001)
        XCTAssertEqual(url.options.quality, 50)
        XCTAssertEqual(url.options.format, .png)
        XCTAssertEqual(url.source, origin)
    }

    /// TestParseAllowedOptions: only the listed names in the URL; a preset's own options are not checked.
    func testParseAllowedOptions() throws {
        var parser = try parser(["test1=blur:0.2"])
        parser.allowedOptions = ["w", "h", "pr"]
        let source = "aHR0cDovL2ltYWdlcy5kZXYvbG9yZW0vaXBzdW0uanBnP3BhcmFtPXZhbHVl.png"
        for (options, forbidden) in [
            ("w:100/h:200", nil), ("w:100/h:200/blur:10", "blur"), ("w:100/h:200/pr:test1", nil),
            ("w:100/h:200/pr:test1/blur:10", "blur")
        ] {
            do {
                let url = try parser.parseURL("/_/\(options)/\(source)")
                XCTAssertNil(forbidden, options)
                XCTAssertEqual(url.options.width, 100, options)
            } catch {
                XCTAssertEqual(error.reason, .forbiddenOption, options)
                XCTAssertEqual(
                    error.message, "option \(forbidden ?? "") is not allowed on this server")
            }
        }
    }

    // MARK: - serve's own

    func testUnknownPresetsAndOptionsInOnlyPresetsModeAreRefused() throws {
        let plain = try parser(["thumb=w:100"])
        XCTAssertThrowsError(try plain.parseURL("/_/pr:nope/plain/local:///a.png")) {
            XCTAssertEqual(($0 as? ProcessingURLError)?.reason, .invalidOption)
            XCTAssertEqual(($0 as? ProcessingURLError)?.message, "preset: unknown preset nope")
        }
        let only = try parser(["thumb=w:100"], onlyPresets: true)
        // An option where a preset name belongs is a name that is no preset.
        XCTAssertThrowsError(try only.parseURL("/_/w:100/plain/local:///a.png")) {
            XCTAssertEqual(($0 as? ProcessingURLError)?.message, "preset: unknown preset w")
        }
        XCTAssertEqual(try only.parseURL("/_/thumb/plain/local:///a.png").options.width, 100)
    }

    /// The variant's identity is the expanded state: a preset and the options it stands for share a cache key.
    func testCanonicalSegmentsAreTheExpandedOptions() throws {
        let parser = try parser(["default=q:60", "thumb=rs:fill:300:200/g:sm", "outer=pr:thumb/bl:2"])
        let preset = try parser.parseURL("/_/pr:outer/plain/local:///a.png")
        let spelled = try parser.parseURL("/_/rt:fill/w:300/h:200/g:sm/bl:2/plain/local:///a.png")
        XCTAssertEqual(preset.options.canonicalSegments, ["rt:fill", "w:300", "h:200", "g:sm", "q:60", "bl:2.0"])
        XCTAssertEqual(preset.options, spelled.options)
        // A URL's own option after the preset wins, as any later option.
        XCTAssertEqual(try parser.parseURL("/_/pr:thumb/w:10/plain/local:///a.png").options.width, 10)
    }

    /// Presets naming presets many times over are refused at start, not expanded on every request.
    func testAPresetThatExpandsTooFarIsRefused() {
        // p0 = pr:p1:p1:p1:p1, p1 = pr:p2:p2:p2:p2, …: 4^6 = 4,096 options.
        var definitions = (0..<6).map { "p\($0)=pr:p\($0 + 1):p\($0 + 1):p\($0 + 1):p\($0 + 1)" }
        definitions.append("p6=w:10")
        XCTAssertTrue(definitionError(definitions)?.contains("expands to more than 1000 options") == true)
        XCTAssertNil(definitionError(Array(definitions.suffix(5))), "4^4 = 256 options are fine")
    }

    func testPresetsMaySetSecurityOptionsOnlyWhereTheyAreAllowed() throws {
        let definitions = ["safe=msr:0.5"]
        XCTAssertTrue(definitionError(definitions)?.contains("security options are not allowed") == true)
        var parser = ProcessingURLParser(sources: try SourcePolicy())
        parser.presets = try ProcessingPresets(definitions: definitions)
        XCTAssertNoThrow(try parser.presets.validated(allowsSecurityOptions: true))
        parser.allowsSecurityOptions = true
        XCTAssertEqual(try parser.parseURL("/_/pr:safe/plain/local:///a.png").options.security.maxSourceResolution, 0.5)
    }
}
