import Foundation

/// The URL fuzzer's seed corpus: request targets using every supported option
/// and source form, a few refused ones, and imgproxy's documented examples.
enum URLSeeds {
    static let targets: [String] = [
        "/insecure/plain/local:///seed.png",
        "/insecure/rs:fit:32:32/plain/local:///seed.png@png",
        "/insecure/rs:fill:20:20/g:sm/plain/local:///seed.png@webp",
        "/insecure/rs:fill-down:64:64:0:1:so/bg:ff0000/plain/local:///seed.png",
        "/insecure/rs:force:40:10:1/plain/local:///seed.png@jpg",
        "/insecure/rs:auto:30:20/g:fp:0.2:0.8/plain/local:///seed.png",
        "/insecure/resize:fit:100:0:1:1:noea:2:3/plain/local:///seed.png",
        "/insecure/size:16:16/resizing_type:fill/gravity:nowe:1:1/plain/local:///seed-alpha.png",
        "/insecure/w:20/h:10/el:1/ex:1:ce/dpr:2/plain/local:///seed.png",
        "/insecure/c:0.5:0.5:soea/rs:fit:10:10/plain/local:///seed.png",
        "/insecure/crop:30:20:fp:0.5:0.5/rot:90/plain/local:///seed.png",
        "/insecure/pd:1:2:3:4/bg:10:20:30/plain/local:///seed-alpha.png@png",
        "/insecure/padding:5/background:abc/q:80/f:avif/plain/local:///seed.png",
        "/insecure/bl:1.5/sh:0.5/rot:-270/sm:0/cb:1/plain/local:///seed.png",
        "/insecure/blur:2/sharpen:1/rotate:180/strip_metadata:false/quality:0/format:gif/plain/local:///seed.png",
        "/insecure/ext:png/cachebuster:abc/plain/local:///seed.png",
        "/insecure/rs:fill:10:10/c:10:10:sm/plain/local:///seed.png",
        "/insecure/g:no:-0.5:1e2/ex:0:we/plain/local:///seed.png",
        "/insecure/rs%3Afit%3A10%3A10/plain/local:/seed.png",
        "/insecure/plain/local:///sub/../seed.png",
        "/insecure/plain/local:///%2e%2e/seed.png",
        "/insecure/plain/local:///..%2Fseed.png",
        "/insecure/plain/local:///seed.png%00.jpg",
        "/insecure/bG9jYWw6Ly8vc2VlZC5wbmc.png",
        "/insecure/rs:fit:10:10/bG9jYWw6/Ly8vc2Vl/ZC5wbmc",
        "/insecure/plain/http://example.com/images/curiosity.jpg@png",
        "/insecure/plain/https://a.b.example.org/x%20y.jpg?q=1",
        "/insecure/plain/https://secure.example.net:8443/x.jpg",
        "/insecure/plain/http://user:pass@example.com/x.jpg",
        "/insecure/plain/ftp://example.com/x.jpg",
        "/insecure/trim:10/plain/local:///seed.png",
        "/insecure/t:5:ff00ff:1:0/rs:fill:16:16/plain/local:///seed-alpha.png",
        "/insecure/mw:40/mh:30/z:1.5:0.5/rs:fit:10:10/plain/local:///seed.png",
        "/insecure/exar:1:sowe:2:0.5/w:30/h:10/fl:1:1/pix:3/ar:0/plain/local:///seed.png",
        "/insecure/unknown:1/plain/local:///seed.png",
        "/insecure/f:tiff/plain/local:///seed.png",
        "/insecure/fill/300/200/ce/0/bG9jYWw6Ly8vc2VlZC5wbmc",
        "/rs:fill:300:400:0/g:sm/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png",
        "/oKfUtW34Dvo2BGQehJFR4Nr0_rIjOtdtzJ3QFsUcXH8/rs:fill:300:400:0/g:sm/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png",
        "/_/pr:sharp/rs:fill:300:400:0/g:sm/plain/http://example.com/images/curiosity.jpg@png"
    ]

    static func write(to folder: URL) -> Int32 {
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for (index, target) in targets.enumerated() {
                try Data(target.utf8).write(to: folder.appendingPathComponent(String(format: "url-%03d", index)))
            }
            return 0
        } catch {
            FileHandle.standardError.write(Data("FuzzURL --write-seeds: \(error)\n".utf8))
            return 1
        }
    }
}

/// `FuzzURL --write-seeds FOLDER` (called from the C main in CLibFuzzer).
@_cdecl("FuzzURLWriteSeeds")
public func fuzzURLWriteSeeds(_ folder: UnsafePointer<CChar>) -> Int32 {
    URLSeeds.write(to: URL(fileURLWithPath: String(cString: folder), isDirectory: true))
}
