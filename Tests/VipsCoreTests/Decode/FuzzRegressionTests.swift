import Foundation
import VipsCore
import VipsSynthesis
import XCTest

@testable import VipsCore

/// Inputs found by the fuzzer (scripts/fuzz.sh, Fuzz/), each kept with the
/// options that exposed it. Crashers are stored minimised, as base64.
final class FuzzRegressionTests: XCTestCase {
    /// The fuzz harness's limits (Fuzz/Sources/FuzzDecode/FuzzTarget.swift).
    private let harnessLimits = DecodeLimits(
        maxPixelCount: 4_000_000, maxDimension: 8_192, maxPages: 64,
        maxInputBytes: 1 << 20)

    /// Found by the test command's fuzz smoke run on CI's machine: an ICO whose entries disagree in
    /// shape, a 16×16 BMP entry beside a 3328×7 PNG one. `info` reports the largest by area (3328×7);
    /// a 16×9 box took the 16×16 entry and gave a 9×9 bitmap, taller than the image `info` described.
    /// An entry wider or taller than the largest is now left out (`ICODirectory`).
    func testAnICOEntryOutsideTheLargestIsNeverDecoded() throws {
        let crasher = try XCTUnwrap(
            Data(
                base64Encoded:
                    "AAABAAIAEBAAAAEAIABoAwAAJgAAAA0HAAABACAAwAEAAI4DAAAoAAAAEAAAACAAAAABABgAAAAAAAAAAAATCwAAEwsAAAAAAAAA"
                    + "AAAAbXpxXWFvYFZgTFVqQlKBUGjKZHXTtXrHwWpskWpVoWtSp31jpoJ1kH+/g4zJdJPGb3F3aVduZUptVzxzR1G8WF6+anG5uYG6"
                    + "wnVfkG9NgGVBknJNnINeiXt0e4W/a4bAdm6Fc1VzuE58c1i/YGJ0XWpuaH2lv4iffoBXknRKhWxHhW5DjXpXhYd0cJDRbXTId2qD"
                    + "xVqB0V2Cv2F6dHBufHZpdntYf4dShYZRjHhLim9BlH5ElJFdl9BzgNPEbX+HgoaF0nGR33OE0aN7fnFxgoVihIxUh35QmYdNoHxC"
                    + "h3ZJn49anJqz2NLGh9bThcmI13aS22GP5reLjK96iLZsf39hhYZSyoZckItnnYZljnNioJKvlpjE16DS1JPU0YOVnXCSl2+dlLSK"
                    + "hLCKgW98cn5/foJ7yIp4jpOBi4R/inFti4lvkZbD0KXG05HN132Efnp/f3mCh7iHibGMgWSHcmyNdXaAhIJ+f398dG96e3RvgIZ4"
                    + "fpd4wad3x556wYV3aMdvbL9zfrd5z6+OzXeSc26QcHSSdneIbWyKaGKCZ3R4b4Zzf5pqwe5vvOtme91nauFbZMhldMJ7xb6IvquT"
                    + "rG6SZGmdcF+ZdF6TelyIfmOBfXx0eJVmcOZ3bu5ucuNecJR+coV0cX93vrWDrWeSVnSVZnSdem+3g2Wxe1yZyWSGk3eDiYx4baWL"
                    + "dvu9ffRuhpN8gH53enWId3GTanmYVnakZnmzcoq5eHmjfnGjznSd34iQkpiWg+vXhvrYgfTPmoSOjXOIf3KIcHmUWXqfU3SyV4v9"
                    + "YuH+bNejc5KYloqSrJOdnJqdl93in+jp25zdo5DoiHmBiWiFe3eXcoWdXn3oW+T0a/DwcN2sgd+IkNh2naOYmqCVnqjioazv7Jru"
                    + "k36OhWt7fmZudX15fImCZ4DeYNzscOTxc86gfMmGmMh7opF6mJOCnZ/WnaLi25TggoWBeXFubW1la2puWnKHVXfLY4DhapHShoV/"
                    + "kndgloVrr4ZvoYSBmYjNlpDcg5fYAAMAAAAAAAAAAAAAAAAAAAAAAAAAAE1lbUZyZWUAAAAAHgAA//8AAP//AAAP/wAAD/4AAAfA"
                    + "AAADAAAAAAAAACgAAAAADQAADgAAAAEAIAAGAAAAAAAAABMLAAATCwAAAAAAAAAAAAAAAP8AAP8AAP8AAAAAAAD/aIpjiFZqWphY"
                    + "Y1ygXmphn1ZlbJlPcG+SYGuCkMRbe5fQVmqk3FVWselgVLPqclqnoH5jlG5/go1nb26cXWxlo2VqZ6FXZW+YSHhtkGZ6cYzGc4eS"
                    + "1GZ7oNBaX63kXlKv8Wtepad6ZZSEgn2WeG5zpG5ofKppaoCkXnh8mFF6f4togIiEeo+JiIN9cJaMcW6j33Btp/OAa6Cmi4GTmXiP"
                    + "nohoha14aYGxaHSHqFN4jJdRdpmGWo/ffGjl3X502YCLfJN0maGIcZ+4joObqJKOk6KL6KOGdICxh2SDtHl0kqpwhJWXXn7dhFzm"
                    + "5nhu8uF6dN6ch4XfeJSV12eboqGNmZ6cjpKTfY6fhWp7rX1lbrF1fXioe4mAl2eA3IVg3Op7dEqFbEeFbkONeleFh3RwkNFtdMh3"
                    + "aoPFWoHRXYK/YXp0cG58dml2e1h/h1KFhlGMeEuKb0GUfkSUkV2X0HOA08Rtf4eChoXScZHfc4TRo3t+cXGChWKEjFSHflCZh02g"
                    + "fEKHdkmfj1qcmrPY0saH1tOFyYjXdpLbYY/mt4uMr3qItmx/f2GFhlLKhlyQi2edhmWOc2Kgkq+WmMTXoNLUk9TRg5WdcJKXb52U"
                    + "tIqEsIqBb3xyfn9+gnvIiniOk4GLhH+KcW2LiW+RlsPQpcbTkc3XfYR+en9/eYKHuIeJsYyBZIdybI11doCEgn5/f3x0b3p7dG+A"
                    + "hnh+l3jBp3fHnnrBhXdox29sv3N+t3nPr47Nd5JzbpBwdJJ2d4htbIpoYoJndHhvhnN/mmrB7m+862Z73Wdq4VtkyGV0wnvFvoi+"
                    + "q5OsbpJkaZ1wX5l0XpN6XIh+Y4F9fHR4lWZw5ndu7m5y415wlH5yhXRxf3e+tYOtZ5JWdJVmdJ16b7eDZbF7XJnJZIaTd4OJjHht"
                    + "pYt2+7199G6Gk3yAfnd6dYh3cZNqeZhWdqRmebNyirl4eaN+caPOdJ3fiJCSmJaD69eG+tiB9M+ahI6Nc4h/cohweZRZep9TdLJX"
                    + "i/1i4f5s16NzkpiWipKsk52cmp2X3eKf6OnbnN2jkOiIeYGJaIV7d5dyhZ1efehb5PRr8PBw3ayB34iQ2Hado5iaoJWeqOKhrO/s"
                    + "mu6Tfo6Fa3t+Zm51fXl8iYJngN5g3Oxw5PFzzqB8yYaYyHuikXqYk4Kdn9adouLblOCChYF5cW5tbWVram5acodVd8tjgOFqkdKG"
                    + "hX+Sd2CWhWuvhm+hhIGZiM2WkNyDl9gAAwAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAeAAD//wAA//8AAA//AAAP/gAA"
                    + "B8AAAAMAAAAAAAAAKAAAAA0AAAAOAAAAAQAgAAYAAAAAAAAAEwsAABMLAAAAAAAAAAAAAAAA/wAA/wAA/wAAAAAAAP9oimOIVmpa"
                    + "mFhjXKBeamGfVmVsmU9wb5Jga4KQxFt7l9BWaqTcVVax6WBUs+pyWqegfmOUbn+CjWdvbpxdbGWjZWpnoVdlb5hIeG2QZnpxjMZz"
                    + "h5LUZnug0FpfreReUq/xa16lp3pllISCfZZ4bnOkbmh8qmlqgKReeHyYUXp/i2iAiIR6j4mIg31wloxxbqPfcG2n84BroKaLgZOZ"
                    + "eI+eiGiFrXhpgbFodIeoU3iMl1F2mXHl7n10zp6KfcmDmJnIeJ6ikXibmJKAkoKFgZZ5cW6kbW1lqmtqbqRacoeYVXfLi2OA4YRq"
                    + "kdKIhoV/lpJ3YKOWhWunr4ZvoKGEgZMAAAAAAAAAAAAAAAADAAAAAwAAAAMAAAAAAAAA"))
        let decoder = ImageDecoder(options: DecodeOptions(limits: harnessLimits))
        let info = try decoder.info(.data(crasher))
        XCTAssertEqual([info.width, info.height], [3328, 7])
        for size in [TargetSize.original, .maxPixelSize(64), .fit(width: 16, height: 9)] {
            for strict in [false, true] {
                var options = decoder.options
                options.strict = strict
                do {
                    let bitmap = try ImageDecoder(options: options).decode(.data(crasher), size: size)
                    XCTAssertLessThanOrEqual(bitmap.width, info.width, "\(size), strict \(strict)")
                    XCTAssertLessThanOrEqual(bitmap.height, info.height, "\(size), strict \(strict)")
                } catch {
                    XCTAssertTrue([.truncatedData, .corruptData].contains(error.kind), "\(size): \(error)")
                }
            }
        }
    }

    /// Found by the test command's fuzz smoke run on a fresh machine: an ICO with a 16×16 entry and
    /// a 13×7 one, inside it but of another shape. `info` reports 16×16; a fill into 7×7 took the
    /// 13×7 entry (the smallest covering the box) and gave 7×4. Only entries of the largest's
    /// shape are picked for a box now (`ICODirectory.entry(fitting:)`).
    func testAnICOEntryOfAnotherShapeIsNeverPickedForABox() throws {
        let crasher = try XCTUnwrap(
            Data(
                base64Encoded:
                    "AAABAAIAEBAAAAEAIABoAwAAJgAAAA0HAAABACAAwAEAAI4DAAAoAAAAEAAAACAAAAABABgAAAAAAAAAAAATCwAAEwsAAAAAAAAA"
                    + "AAAAbXpxXWFvYFZgTFVqQlKBUGjKZHXTtXrHwWpskWpVoWtSp31jpoJ1kH+/g4zJdJPGb3F3aVduZUptVzxzR1G8WF6+anG5uYG6"
                    + "wnVfkG9NgGVBknJNnINeiXt0e4W/a4bAdm6Fc1VzuE58c1i/YGJ0XWpuaH2lv4iffoBXknRKhWxHhW5DjXpXhYd0cJDRbXTId2qD"
                    + "xVqB0V2Cv2F6dHBufHZpdntYf4dShYZRjHhLim9BlH5ElJFdl9BzgNPEbX+HgoaF0nGR33OE0aN7fnFxgoVihIxUh35QmYdNoHxC"
                    + "h3ZJn49anJqz2NLGh9bThcmI13aS22GP5reLjK96iLZsf39hhYZayoZckItnnYZljnNioJKvlpjE16DS1JPU0YOVnXCSl2+dlLSK"
                    + "hLCKgW98cn5/foJ7yIp4jpOBi4R/inFti4lvkZbD0KXG05HN132Efnp/f3mCh7iHibGMgWSHcmyNdXaAhIJ+f398dG96e3RvgIZ4"
                    + "fpd4wad3x556wYV3aMdvbL9zfrd5z6+OzXeSc26QcHSSdneIbWyKaGKCZ3R4b4Zzf5pqwe5vvOtme91nauFbZMhldMJ7xb6IvquT"
                    + "rG6SZGmdcF+ZdF6TelyIfmOBfXx0eJVmcOZ3bu5ucuNecJR+coV0cX93vrWDrWeSVnSVZnSdem+3g2Wxe1yZyWSGk3eDiYx4baWL"
                    + "dvu9ffRuhpN8gH53enWId3GTanmYVnakZnmzcoq5eHmjfnGjznSd34iQkpiWg+vXhvrYgfTPmoSOjXOIf3KIcHmUWXqfU3SyV4v9"
                    + "YuH+bNejc5KYloqSrJOdnJqdl93in+jp25zdo5DoiHmBiWiFe3eXcoV9nV7oW+T0a/DwcN2sgd+IkNh2naOYmqCVnqjioazv7Jru"
                    + "k36OhWt7fmZudX15fImCZ4DeYNzscOTxc86gfMmGmMh7opF6mJOCnZ/WnaLi25TggoWBeXFubW1la2puWnKHVXfLY4DhapHShoV/"
                    + "kndgloVrr4ZvoYSBmYjNlpDcg5fYAAMAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAHgAA//8AAP//AAAP/wAAD/4AAAfA"
                    + "AAADAAAAAAAAACgAAAANAAAADgAAAAEAIAAGAAAAAAAAABMLAAATCwAAAAAAAAAAAAAAAP8AAP8AAP8AAAAAAAD/aIpjiFZqWphY"
                    + "Y1ygXmphn1ZlbJlPcG+SYGuCkMRbe5fQVmqk3FVWselgVBIBAwABAAAAs+pyWqegfmOUbn+CjWdvbpxdbGWjZWpnoVdlb5hIeG2Q"
                    + "ZnpxjMZzh5LUZnug0FpfreReUq/xa16lp3pllISCfZZ4bnOkbmh8qmlqgKReeHyYUXp/i2iAiIR6j4mIg31wloxxbqPfcG2n84Br"
                    + "oKaLgZOZeI+eiGiFrXhpgbFodIeoU3iMl1F2mYZaj998aOXdfnTZgIt8k3SZoYhxn7iOg5uoko6Toovoo4Z0gLGHZIO0eXSSqnCE"
                    + "lZdeft2EXObmeG7y4Xp03pyHhd94lJXXZ5uioY2ZnpyOkpN9jp+FanutfWVusXV9eKh7iYCXZ4DchWDc6ntx5e59dM6ein3Jg5iZ"
                    + "yHieopF4m5iSgJKChYGWeXFupG1tZapram6kWnKHmFV3y4tjgOGEapHSiIaFf5aSd2CjloVrp6+Gb6ChhIGTAAAAAAAAAAAAAAAA"
                    + "AwAAAAMAAAADAAAAAAAAAA=="))
        let decoder = ImageDecoder(options: DecodeOptions(limits: harnessLimits))
        let info = try decoder.info(.data(crasher))
        XCTAssertEqual([info.width, info.height], [16, 16])
        for mode in [ResizeMode.fill(.northEast), .stretch, .fill(.centre)] {
            let bitmap = try decoder.decode(.data(crasher), size: .maxPixelSize(7), mode: mode)
            XCTAssertEqual([bitmap.width, bitmap.height], [7, 7], "\(mode)")
        }
        let fitted = try decoder.decode(.data(crasher), size: .maxPixelSize(7))
        XCTAssertEqual([fitted.width, fitted.height], [7, 7], "the 16×16 entry's shape")
    }

    /// Found in the 30-minute run after the direct PNG path came (about 94,000 executions):
    /// a PNG whose pHYs chunk type was mutated to "pH\\xB6s" before IDAT. libpng (so libvips'
    /// probe) refuses a chunk type that is not four letters; libspng skips it, so the direct
    /// path decoded a file `info` called corrupt. `info` and `decode` now read one header, the
    /// same way (`CodecRegistry`): where the direct codec takes the file (fast mode), both read
    /// it; where it does not (quality mode), libvips reads it for both, and both refuse it.
    func testAPNGWithAnInvalidChunkTypeGetsOneAnswerFromProbeAndDecode() throws {
        let crasher = try XCTUnwrap(
            Data(
                base64Encoded:
                    "iVBORw0KGgoAAAANSUhEUgAAABgAAAAQCAIAAACDRijCAAACZWlDQ1BpY2MAACiRY2BgepCTnFvMJMDAkJtXUhTk7qQQERmlwP6I"
                    + "gZlBhIGTgY9BNzO5uMA32C2EAQiKE8uLk0uKchhQwLdrDIwg+rJuRmJeSnU+/+kHro5m9v4upqel2iQZ8APOlNTiZCD9AYjjkguK"
                    + "ShgYGHmAbJ7ykgIQWwLIFikCOgrI1gGx0yFsBxA7CcIOAasJCXIGsjOAuCIdiZ2ExIbaBQKsxQHGzsgOKUmtKAHRzs4GDKAwgIh+"
                    + "DgT7jVHsDEKs+T4Dg+1+EAsh5gUcijRnYODaihDTsGBgEORiYDhRkVxaVAa1ZhsQyzBYMIQwFDD0MKxgOMLwkJGBUYnRjTGXcSrj"
                    + "QcYPTApMoUzdTEeYGZntmZuYj7HwsUSyLGf5yerDuoT1H1sM2z52RfYu9i8cyRxXOT05D3PZc+3nduI+yRPC85C3hI+TbxG/A/8D"
                    + "gVZBXcFbQl3CdsLfRDaJFoqZif0VPyUxUzJPyk1aSYZZ5rnsBbm98usUlijOU5qjPF9lqepGtQPqVzXeanFpa+sE6tbordK/Zyhm"
                    + "FGQ8xeSmmYp5scUxKwXrGpv7dq72GxwVnaa5CLj2uwt5zPbS8N7tG+j3LqA/yDT4QeiEcNdIhqh9MS1xPgnSie+Tj6cuS+/MLMyO"
                    + "zw3M9yp0K/YqDSyPqyys7qhdVn+i8UOLXFtAR2fX0V7O/sCJ8yd/nuY9Y/VsvrkV858vil5ybXnYyttr0td939i/RWvbmZ0lexT3"
                    + "XT3Ye8TnuMDJW2dWn6+/FHPV9obKbaF7LA/+Pf7znPEVz1uZDyafA74V/5z959T//wDUytJGPF1SSAAAAAlwSLZzAAAD6AAAA+gB"
                    + "tXtSawAABEZJREFUOI0Nx/tPE3cAAPD7z2aybNkyzTRDcGJ5FSh9XK/3fr/v2+txRx/XlpaWh6ti6VQwBXkpgiIMHUQL6FhBNIBx"
                    + "S1Aw2y8m/LB9fvtAGtAQlOmGYTgQNHDPIt+8DfxrmYgCop1kPCL34nxWJcXHJLmGc45CqKbK2YqftnlzQM+Unh2OHR0c1za3IFt2"
                    + "mZAOdwucSOmWWAOhv9/gJ0dqZUPMrmrOYlJUgc4iKQGJk5EoSWCsGGZkmNY4Jq5G89v1ex++HO//sQ/tZW4orKn4TZfhB6JEXev6"
                    + "/B49PZWn98TBXctZd/KOkRbwTQHNUcFehKYDsqfB9XkTDDwaNcb23h0ffTjZG6xDjpEHhG3gUpJDB/iWCn3lU6rjywE1/prNJcmk"
                    + "4gxw/fmwtHODfn2LShRx+EfQcS7nOX8z0nUH6KVSrf7mr9NXYzuQ4pqMpACKi2N0mgsNMc23BX/VoYZ4toiK/YFlJ/zC9eubd+la"
                    + "FX9WYdCfYt3nhtu+LgfaRzWh/GxrcPfz7ovTNUhL47RBMDIWn1pw/JUkeTVH9dzF+LJfS3pY5doTpTVOt0etEPxkhp+9YxOXB8IX"
                    + "9jq/LXR7Mrew2KRLLB33pz/ZkLrPSKuIvSSkF57mf33oIGPZYHeqI2K34aqHETwi6RdDhCTwvDkDMN/vpOcV9t0efCleaYpOEtyU"
                    + "pE2NkLH3OmSs4GCBNO/r2fH1OLNmI3gfiQKGAjAstvcw4R6KwXBNtzefGxvruLyFdq1RnX2VgIWRxCSrzRgsao1GEhQkknHCyqkZ"
                    + "O33P0brkGIxJFClrhijLDEKgEZYXRdni1MJssv6YBgovMzZHcTiJKYqQMuzsUyOxSunLUB9a6Eez6cl+dyLGIYos4YIm8day4cZV"
                    + "wwojgDK0JRcsj80NHd5P1fnhLTljB500BZKmNpxwhzYs97kD6lAfXYt5tzPTB2A8IU45PknuBKALrIR7EyFQ8OHmeCazPKLXTxbK"
                    + "/wqj/yDDHwPjh6FiAY7nBafglN/9VtqupfteQCCqOdi6SuzopQ0UFf2G1m4bV8VoczR3iS9epuVgNjFdib48flQ5k0pnbPks/Mtc"
                    + "aPM2nCjwZjmde5sdeeUOrvRCcpDiry0Krc+pjrlwhPh/rRzVEpU9wLjMWBciahPQsZKgj6sjZ7POLGLepdxRGlyn7GFJvekOndwa"
                    + "2jUFIgKpCBVuRMmL1WoLjnrb4EDLiBwsWg/aZKkB77sY4i/huC9GytdJtzph3phaGlF2aXBzLaSULH44Gd+vF/+0lngUolAkcKWn"
                    + "5wdv6KvGiabzVW/zBBGq6tNeYqEh7HzvJZswKRjTWIOcjs/M5efnXXXSHIg4CX8qB+cOek920m8T80wQwrkw3NHS0tjqa7zANXyz"
                    + "ADeucj0PpWoo8OBnv9Pky/jpJCfGZlj6kcgsxoQHUZM1HEor4PEyUjxKHn58eXK0UbP+A6QZfwG9xr2+AAAAAElFTkSuQmCC"
            ))
        XCTAssertEqual(crasher.count, 1797)
        let harness = ImageDecoder(options: DecodeOptions(limits: harnessLimits))
        let quality = ImageDecoder(options: DecodeOptions(limits: harnessLimits, shrinkOnLoad: .quality))
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "invalid-chunk-\(UUID().uuidString).png")
        try crasher.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        for input in [ImageInput.data(crasher), .file(file.path)] {
            let info = try harness.info(input)
            XCTAssertEqual([info.width, info.height, info.bands], [24, 16, 3], input.label)
            XCTAssertEqual(try harness.route(input), .direct, input.label)
            HostileFiles.assertFails(.corruptData, "quality info \(input.label)") { () throws(VipsError) in
                try quality.info(input)
            }
            for size in [TargetSize.original, .maxPixelSize(16)] {
                let bitmap = try harness.decode(input, size: size)
                XCTAssertEqual(bitmap.source?.info, info, "decode \(input.label) \(size)")
                HostileFiles.assertFails(.corruptData, "quality decode \(input.label) \(size)") {
                    () throws(VipsError) in try quality.decode(input, size: size)
                }
            }
        }
    }

    /// Found after about 100,000 executions (fuzz run 2): a 221-byte JPEG stored 65498×24
    /// with EXIF orientation 6, so displayed 24×65498. The probe checked the stored height
    /// twice (24×24) instead of the displayed size, so a rotated image passed both the side
    /// and the pixel limit, and the harness's "probe respects the limits" invariant broke.
    /// (Fixed in VipsCore by checking the displayed size; see `DecodeLimits.check`.)
    func testRotatedJPEGIsCheckedAtItsDisplayedSize() throws {
        let crasher = try XCTUnwrap(
            Data(
                base64Encoded:
                    "/9j/4QC8RXhpZgAASUkqAAgAAAAGABIBAwABAAAABgAAAAUAAQAAAFYAbi1wYWdlcwEAAF4AAAAoAQMAAQAAYwAA6ANzStilQgAA"
                    + "SUkqASkSimz/2U9NZW1GcmVlT09PT09PT09PT09PT//AABEIABj/AQAAAAACEQEDEQABAAIRA9kBAAIRA9kASUkqASlYcmVz2f/Z"
                    + "A1hyZXNK2KVCAABJSSoBKRKKbP/ZT01lbUZyZWVPT09PT09PT09PT09P/8AAEQgAGP/aAwEiAAIRAQMR+v/aAAwDAQACEQM="
            ))
        XCTAssertEqual(crasher.count, 221)
        let harness = ImageDecoder(options: DecodeOptions(limits: harnessLimits))
        for size in [TargetSize.original, .maxPixelSize(64), .maxPixelSize(8_187)] {
            HostileFiles.assertFails(.tooLarge, "crasher \(size)") { () throws(VipsError) in
                try harness.decode(.data(crasher), size: size)
            }
        }
        let error = HostileFiles.assertFails(.tooLarge, "crasher info") { () throws(VipsError) in
            try harness.info(.data(crasher))
        }
        XCTAssertTrue(error?.message.contains("24×65498") ?? false, error?.message ?? "")
        // With room for its size, the same bytes are an upright 24 px wide, 65498 px tall image.
        let roomy = ImageDecoder(options: DecodeOptions(limits: DecodeLimits(maxDimension: 65_500)))
        let info = try roomy.info(.data(crasher))
        XCTAssertEqual([info.width, info.height, info.orientation], [24, 65_498, 6])
    }

    /// The same bypass at the default limits, where it mattered most: 65500×10000 stored
    /// and rotated was checked as 10000² = 100 MP (allowed), but is 655 MP (2 GB of RGB).
    func testRotationCannotHideMegapixelsFromTheDefaultLimits() throws {
        let decoder = ImageDecoder()
        for orientation in [5, 6, 7, 8] {
            let bomb = try HostileFiles.jpeg(claimingWidth: 65_500, height: 10_000, orientation: orientation)
            let error = HostileFiles.assertFails(.tooLarge, "orientation \(orientation)") { () throws(VipsError) in
                try decoder.info(.data(bomb))
            }
            XCTAssertTrue(error?.message.contains("10000×65500") ?? false, error?.message ?? "")
        }
        // Upright, the same claim is refused as well: the limit does not depend on orientation.
        let upright = try HostileFiles.jpeg(claimingWidth: 65_500, height: 10_000)
        HostileFiles.assertFails(.tooLarge, "upright") { () throws(VipsError) in try decoder.info(.data(upright)) }
    }
    /// Found in the fixed-seed one-minute smoke run of a fresh clone: a 2×48
    /// progressive JPEG thumbnailed to 8 px or less aborted the process. For
    /// 48→8 fast mode asked libjpeg for 1/4, and libvips 8.14 rounds 2/4 down
    /// to a width of 0 and fails an assertion (not an error). WebP's scaled
    /// decode of such a strip refuses "bad image dimensions". A loader's own
    /// shrink is now capped so the short side keeps at least a pixel.
    func testThinImagesShrinkOnLoadNoFurtherThanTheirShortSide() throws {
        let formats: [ImageSynthesizer.Format] = [.jpeg(), .jpeg(progressive: true), .webp()]
        for format in formats {
            for (width, height) in [(2, 48), (48, 2), (1, 300), (3, 9)] {
                let data = try ImageSynthesizer.data(width: width, height: height, seed: 61, format: format)
                for options in [DecodeOptions(), DecodeOptions(shrinkOnLoad: .quality)] {
                    for side in [16, 8, 4, 2, 1] {
                        let label = "\(format) \(width)×\(height) to \(side) (\(options.shrinkOnLoad))"
                        let bitmap = try ImageDecoder(options: options).decode(.data(data), size: .maxPixelSize(side))
                        XCTAssertEqual(max(bitmap.width, bitmap.height), min(side, max(width, height)), label)
                        XCTAssertGreaterThanOrEqual(min(bitmap.width, bitmap.height), 1, label)
                    }
                }
            }
        }
    }
}
