import Foundation
import VipsLoad
import VipsServe
import XCTest

/// imgproxy's URL grammar: the two source encodings, the extension, every
/// supported option's arguments, and a 400 naming the option for anything else.
final class ProcessingURLParserTests: XCTestCase {
    private let parser = ProcessingURLParser(sources: try! SourcePolicy())

    private func options(_ segments: String, file: StaticString = #filePath, line: UInt = #line) -> ProcessingOptions? {
        do {
            return try parser.parseURL("/_/\(segments)/plain/http://example.com/a.jpg").options
        } catch {
            XCTFail("\(segments): \(error)", file: file, line: line)
            return nil
        }
    }

    private func assertRefused(
        _ target: String, _ reason: ProcessingURLError.Reason, naming text: String? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            let parsed = try parser.parseURL(target)
            XCTFail("\(target) parsed: \(parsed.options)", file: file, line: line)
        } catch {
            XCTAssertEqual(error.reason, reason, "\(target): \(error)", file: file, line: line)
            if let text {
                XCTAssertTrue(error.message.contains(text), "\(target): \(error)", file: file, line: line)
            }
        }
    }

    private func assertOptionRefused(
        _ segment: String, _ reason: ProcessingURLError.Reason = .invalidOption, naming text: String? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let name = text ?? String(segment.prefix { $0 != ":" })
        assertRefused("/_/\(segment)/plain/http://example.com/a.jpg", reason, naming: name, file: file, line: line)
    }

    // MARK: - Source URLs

    func testPlainSourceWithAndWithoutExtension() throws {
        var parsed = try parser.parseURL("/_/w:100/plain/http://example.com/images/curiosity.jpg@png")
        XCTAssertEqual(parsed.source, "http://example.com/images/curiosity.jpg")
        XCTAssertEqual(parsed.options.format, .png)
        parsed = try parser.parseURL("/_/plain/http://example.com/images/curiosity.jpg")
        XCTAssertEqual(parsed.source, "http://example.com/images/curiosity.jpg")
        XCTAssertNil(parsed.options.format)
        // An empty extension is none.
        parsed = try parser.parseURL("/_/plain/http://example.com/a.jpg@")
        XCTAssertNil(parsed.options.format)
    }

    func testPlainSourceIsPercentDecodedOnceAndAtStartsTheExtension() throws {
        let parsed = try parser.parseURL("/_/plain/http://example.com/a%20b%3Fc%40d%25252F.jpg@webp")
        XCTAssertEqual(parsed.source, "http://example.com/a b?c@d%252F.jpg")
        XCTAssertEqual(parsed.options.format, .webp)
        XCTAssertEqual(try parser.parseURL("/_/plain/http://example.com/%C3%BC.jpg").source, "http://example.com/ü.jpg")
        assertRefused("/_/plain/http://example.com/a.jpg@png@jpg", .malformedURL, naming: "extension")
        assertRefused("/_/plain/http://example.com/a%zz.jpg", .malformedURL, naming: "percent")
        assertRefused("/_/plain/http://example.com/a%4", .malformedURL)
        assertRefused("/_/plain/http://example.com/%FF.jpg", .malformedURL)
        assertRefused("/_/plain/@png", .malformedURL, naming: "empty")
        assertRefused("/_/plain/", .malformedURL)
    }

    func testBase64SourceMaySplitAndTakesADotExtension() throws {
        let encoded = "aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn"
        var parsed = try parser.parseURL("/_/rs:fit:10:10/\(encoded).png")
        XCTAssertEqual(parsed.source, "http://example.com/images/curiosity.jpg")
        XCTAssertEqual(parsed.options.format, .png)
        parsed = try parser.parseURL("/_/\(encoded.replacingOccurrences(of: "/", with: ""))")
        XCTAssertEqual(parsed.source, "http://example.com/images/curiosity.jpg")
        XCTAssertNil(parsed.options.format)
        // Padding is trimmed, as imgproxy does.
        XCTAssertEqual(try parser.parseURL("/_/YQ==").source, "a")
        assertRefused("/_/\(encoded).png.jpg", .malformedURL, naming: "extension")
        assertRefused("/_/not+base64", .malformedURL, naming: "base64")
        assertRefused("/_/.png", .malformedURL, naming: "empty")
        assertRefused("/_/_w", .malformedURL) // decodes to a byte that is not UTF-8
        assertRefused("/_/w:100/", .malformedURL)
        assertRefused("/_/w:100", .malformedURL, naming: "missing")
    }

    func testEncryptedSourcesAreRefusedByName() {
        // imgproxy Pro's /enc/%encrypted_source_url (its examples/encrypted_source_url.go's URL): named, not
        // read as base64.
        let encrypted = "AAECAwQFBgcICQoLDA0OD3aaI6kd15b5bLmZDYvy6wbk983mDqGTSAM2eEJghVjEoPQzJcSASge0lCMv-gcceQ"
        assertRefused("/_/rs:fit:300:300/enc/\(encrypted).jpg", .unsupportedOption, naming: "encrypted")
        assertRefused("/_/enc/\(encrypted)", .unsupportedOption, naming: "encrypted")
    }

    func testPathShape() {
        assertRefused("", .malformedURL)
        assertRefused("no-slash", .malformedURL)
        assertRefused("/", .malformedURL)
        assertRefused("/_", .malformedURL)
        assertRefused("/_/", .malformedURL)
        assertRefused("//plain/http://example.com/a.jpg", .malformedURL)
        // imgproxy's old basic format (/fill/300/200/…) is refused, as imgproxy refuses it.
        assertRefused("/_/fill/300/200/ce/0/aHR0cDovL2V4YW1wbGUuY29t", .malformedURL, naming: "basic")
    }

    func testProxyRepairs() throws {
        var parsed = try parser.parseURL("/_/rs%3Afill%3A10%3A20/plain/http:/example.com/a.jpg")
        XCTAssertEqual(parsed.options.resizingType, .fill)
        XCTAssertEqual(parsed.source, "http://example.com/a.jpg")
        parsed = try parser.parseURL("/_/plain/local:/photos/a.jpg")
        XCTAssertEqual(parsed.source, "local:///photos/a.jpg")
        parsed = try parser.parseURL("/_/plain/local:///photos/a.jpg")
        XCTAssertEqual(parsed.source, "local:///photos/a.jpg")
    }

    // MARK: - Options

    func testResizeAndItsParts() throws {
        var o = try XCTUnwrap(options("rs:fill:300:400:1:1:so:5:6"))
        XCTAssertEqual(o.resizingType, .fill)
        XCTAssertEqual([o.width, o.height], [300, 400])
        XCTAssertTrue(o.enlarge)
        XCTAssertTrue(o.extend)
        XCTAssertEqual(o.extendGravity, .init(.south, x: 5, y: 6))
        o = try XCTUnwrap(options("resize:fit/size:10:20:t/resizing_type:fill-down"))
        XCTAssertEqual(o.resizingType, .fillDown)
        XCTAssertEqual([o.width, o.height], [10, 20])
        XCTAssertTrue(o.enlarge)
        // Empty arguments leave values as they were.
        o = try XCTUnwrap(options("w:50/h:60/s::70/rs:::80"))
        XCTAssertEqual([o.width, o.height], [50, 80])
        o = try XCTUnwrap(options("width:7/height:8/enlarge:1/enlarge:false/extend:true:nowe/ex:0"))
        XCTAssertEqual([o.width, o.height], [7, 8])
        XCTAssertFalse(o.enlarge)
        XCTAssertFalse(o.extend)
        XCTAssertEqual(o.extendGravity.kind, .northWest)
        for type in ["fit", "fill", "fill-down", "force", "auto"] {
            XCTAssertEqual(options("rt:\(type)")?.resizingType.rawValue, type)
        }
        assertOptionRefused("rt:cover")
        assertOptionRefused("rs:fit:1:2:0:0:ce:0:0:9", naming: "rs")
        assertOptionRefused("s:1:2:0:0:ce:0:0:9", naming: "s")
        assertOptionRefused("w:-1")
        assertOptionRefused("w:1.5")
        assertOptionRefused("w:")
        assertOptionRefused("w:1:2")
        assertOptionRefused("h:abc")
        assertOptionRefused("el:yes")
        assertOptionRefused("ex:1:sm", naming: "ex")
    }

    func testGravity() throws {
        let names: [String: ProcessingOptions.Gravity.Kind] = [
            "ce": .centre, "no": .north, "so": .south, "ea": .east, "we": .west, "noea": .northEast,
            "nowe": .northWest, "soea": .southEast, "sowe": .southWest, "sm": .smart
        ]
        for (name, kind) in names { XCTAssertEqual(options("g:\(name)")?.gravity.kind, kind, name) }
        XCTAssertEqual(options("gravity:fp:0.25:0.75")?.gravity, .init(.focusPoint, x: 0.25, y: 0.75))
        XCTAssertEqual(options("g:no:10:0.5")?.gravity, .init(.north, x: 10, y: 0.5))
        // Offsets persist until set again; smart gravity clears them.
        XCTAssertEqual(options("g:no:10:20/g:so")?.gravity, .init(.south, x: 10, y: 20))
        XCTAssertEqual(options("g:no:10:20/g:so::3")?.gravity, .init(.south, x: 10, y: 3))
        XCTAssertEqual(options("g:no:10:20/g:sm")?.gravity, .init(.smart))
        assertOptionRefused("g:sm:1")
        assertOptionRefused("g:fp:0.5")
        assertOptionRefused("g:fp:1.5:0.5")
        assertOptionRefused("g:no:1:2:3")
        assertOptionRefused("g:center")
        assertOptionRefused("g:no:x")
        assertOptionRefused("g:no:inf")
        assertOptionRefused("g:no:nan")
        assertOptionRefused("g:no:0x10")
    }

    func testSmartGravityArgumentAndStripMetadataOptionShareAName() throws {
        // `sm` as an argument of gravity is smart gravity; as an option name it is strip_metadata.
        let o = try XCTUnwrap(options("g:sm/sm:0"))
        XCTAssertEqual(o.gravity.kind, .smart)
        XCTAssertFalse(o.stripMetadata)
        XCTAssertTrue(try XCTUnwrap(options("strip_metadata:1")).stripMetadata)
        XCTAssertTrue(try XCTUnwrap(options("w:1")).stripMetadata, "stripped by default")
        assertOptionRefused("sm:sm")
    }

    func testCrop() throws {
        var o = try XCTUnwrap(options("c:100:50"))
        XCTAssertEqual([o.cropWidth, o.cropHeight], [100, 50])
        XCTAssertNil(o.cropGravity)
        o = try XCTUnwrap(options("crop:0.5:0:nowe"))
        XCTAssertEqual([o.cropWidth, o.cropHeight], [0.5, 0])
        XCTAssertEqual(o.cropGravity?.kind, .northWest)
        o = try XCTUnwrap(options("c:10/c:20"))
        XCTAssertEqual([o.cropWidth, o.cropHeight], [20, 0])
        XCTAssertEqual(options("c:1:1:fp:0.1:0.9")?.cropGravity, .init(.focusPoint, x: 0.1, y: 0.9))
        XCTAssertEqual(options("c:1:1:sm")?.cropGravity?.kind, .smart)
        assertOptionRefused("c:")
        assertOptionRefused("c:-1")
        assertOptionRefused("c::10")
        assertOptionRefused("c:1:1:no:1:1:1")
    }

    func testPaddingDefaultsAsCSS() throws {
        func sides(_ segment: String) -> [Int]? {
            options(segment).map { [$0.padding.top, $0.padding.right, $0.padding.bottom, $0.padding.left] }
        }
        XCTAssertEqual(sides("pd:10"), [10, 10, 10, 10])
        XCTAssertEqual(sides("pd:10:20"), [10, 20, 10, 20])
        XCTAssertEqual(sides("pd:10:20:30"), [10, 20, 30, 20])
        XCTAssertEqual(sides("padding:1:2:3:4"), [1, 2, 3, 4])
        XCTAssertEqual(sides("pd:5/pd::7"), [5, 7, 5, 7])
        assertOptionRefused("pd:1:2:3:4:5")
        assertOptionRefused("pd:-1")
    }

    func testBackground() throws {
        XCTAssertEqual(options("bg:ff8000")?.background, Colour(red: 255, green: 128, blue: 0))
        XCTAssertEqual(options("bg:FfF")?.background, .white)
        XCTAssertEqual(options("background:1:2:3")?.background, Colour(red: 1, green: 2, blue: 3))
        XCTAssertEqual(options("bg:0255:0:0")?.background, Colour(red: 255, green: 0, blue: 0))
        XCTAssertNil(options("bg:fff/bg:")?.background)
        // A raw `#` is no option text at all: a client never sends one (refused before the options are read).
        assertOptionRefused("bg:#fff", .malformedURL, naming: "#")
        assertOptionRefused("bg:%23fff")
        assertOptionRefused("bg:ffff")
        assertOptionRefused("bg:gggggg")
        assertOptionRefused("bg:1:2")
        assertOptionRefused("bg:1:2:256")
        assertOptionRefused("bg:1:2:-3")
        assertOptionRefused("bg:1:2:+3")
    }

    func testQualityFormatFiltersRotationDPR() throws {
        let o = try XCTUnwrap(options("q:85/f:webp/bl:2.5/sh:0.7/rot:-90/dpr:2/cb:v2"))
        XCTAssertEqual(o.quality, 85)
        XCTAssertEqual(o.format, .webp)
        XCTAssertEqual(o.blur, 2.5)
        XCTAssertEqual(o.sharpen, 0.7)
        XCTAssertEqual(o.rotate, 270)
        XCTAssertEqual(o.dpr, 2)
        XCTAssertEqual(o.cacheBuster, "v2")
        XCTAssertEqual(options("quality:0")?.quality, 0)
        XCTAssertEqual(options("format:jpeg")?.format, .jpeg)
        XCTAssertEqual(options("ext:jpg")?.format, .jpeg)
        XCTAssertNil(options("f:png/f:auto")?.format)
        XCTAssertEqual(options("rotate:450")?.rotate, 90)
        XCTAssertEqual(options("rot:0")?.rotate, 0)
        XCTAssertEqual(options("blur:1e1")?.blur, 10)
        XCTAssertEqual(options("dpr:.5")?.dpr, 0.5)
        assertOptionRefused("q:101")
        assertOptionRefused("q:-1")
        assertOptionRefused("rot:45")
        assertOptionRefused("bl:-1")
        assertOptionRefused("bl:501")
        assertOptionRefused("sh:11")
        assertOptionRefused("dpr:0")
        assertOptionRefused("dpr:-1")
        assertOptionRefused("f:PNG")
        assertOptionRefused("f:foo")
        // SVG is only passed through by imgproxy, `best` is imgproxy Pro's.
        for format in ["svg", "best"] {
            assertOptionRefused("f:\(format)", .unsupportedFormat, naming: format)
            assertRefused("/_/plain/http://example.com/a.jpg@\(format)", .unsupportedFormat, naming: format)
        }
        for (name, format) in [
            ("tiff", ProcessingOptions.Format.tiff), ("bmp", .bmp), ("heic", .heic), ("jxl", .jxl), ("ico", .ico)
        ] {
            XCTAssertEqual(options("f:\(name)")?.format, format, name)
            XCTAssertEqual(try parser.parseURL("/_/plain/http://example.com/a.jpg@\(name)").options.format, format)
        }
        XCTAssertEqual(try parser.parseURL("/_/plain/http://example.com/a.jpg@jpeg").options.format, .jpeg)
    }

    func testUnknownAndUnsupportedOptionsAreNamed() {
        assertOptionRefused("frobnicate:1", .unknownOption, naming: "frobnicate")
        assertOptionRefused("W:100", .unknownOption, naming: "W")
        for name in ["mrd", "wmt", "ra", "brightness", "page"] {
            assertOptionRefused("\(name):1", .unsupportedOption, naming: name)
        }
    }

    func testLaterOptionsOverrideEarlierOnes() throws {
        let o = try XCTUnwrap(options("w:100/w:200/rt:fill/rt:fit/q:10/q:20/g:no/g:so"))
        XCTAssertEqual(o.width, 200)
        XCTAssertEqual(o.resizingType, .fit)
        XCTAssertEqual(o.quality, 20)
        XCTAssertEqual(o.gravity.kind, .south)
    }

    private func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    func testFormatQualityMaxBytesAndTheColourOptions() throws {
        let parsed = try XCTUnwrap(options("fq:webp:30:jpeg:40/fq:avif:50:webp:0/mb:1000/scp:0/kcr:f/ph:1"))
        XCTAssertEqual(parsed.formatQuality, [.jpeg: 40, .avif: 50], "pairs add up; 0 clears one")
        XCTAssertEqual(parsed.maxBytes, 1000)
        XCTAssertEqual(parsed.stripColorProfile, false)
        XCTAssertEqual(parsed.keepCopyright, false)
        XCTAssertEqual(parsed.preserveHDR, true)
        XCTAssertEqual(
            parsed.canonicalSegments.suffix(5), ["fq:avif:50:jpg:40", "mb:1000", "scp:0", "kcr:0", "ph:1"])
        XCTAssertNil(options("cb:1")?.stripColorProfile, "unset: the server's default")
        for refused in ["fq:jpg", "fq:jpg:10:png", "fq:foo:10", "fq:jpg:101", "fq:jpg:x", "mb:-1", "mb:1:2", "scp:x"] {
            assertOptionRefused(refused)
        }
    }

    func testCanonicalPathReparsesToTheSameURL() throws {
        let targets = [
            "/_/plain/http://example.com/a.jpg",
            "/_/rs:fill-down:300:200:1:1:noea:3:4/g:fp:0.2:0.8/c:0.5:120:sowe:1:2/pd:1:2:3:4/bg:0a0b0c/q:77"
                + "/bl:0.5/sh:1/rot:180/sm:0/dpr:1.5/cb:x/plain/http://example.com/a%20b%3Fc%40d.jpg@avif",
            "/_/rt:auto/w:10/c:0:0:sm/ex:0:fp:0.5:0.5/\(base64URL("local:///ü/x@y:/z.png?")).gif",
            "/_/g:no:-0.0:1e-05/plain/https:/host/x",
            "/_/bg:/cb:/plain/local:///a%25b",
            "/_/fq:webp:30:jpeg:40:avif:0/mb:1000/scp:0/kcr:f/ph:1/plain/http://example.com/a.jpg@jxl"
        ]
        for target in targets {
            let parsed = try parser.parseURL(target)
            let again = try parser.parseURL(parsed.canonicalPath)
            XCTAssertEqual(again.options, parsed.options, target)
            XCTAssertEqual(again.source, parsed.source, target)
            XCTAssertEqual(again.canonicalPath, parsed.canonicalPath, target)
        }
        XCTAssertEqual(
            try parser.parseURL("/x/s:300:200/rt:fill/g:sm/plain/http://example.com/a.jpg@png").canonicalPath,
            "/_/rt:fill/w:300/h:200/g:sm/plain/http%3A//example.com/a.jpg@png")
    }
}
