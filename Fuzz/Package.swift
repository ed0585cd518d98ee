// swift-tools-version:6.0
// The libFuzzer harness of VipsLoad: a separate package, so the root package's
// `swift build` never sees it. scripts/fuzz.sh builds it (debug: the harness
// uses `@testable import VipsCore`) with `-sanitize=fuzzer,address
// -parse-as-library`, which instruments VipsCore as well.
import PackageDescription

let package = Package(
    name: "VipsLoadFuzz",
    dependencies: [.package(name: "VipsLoad", path: "..")],
    targets: [
        // Declares libFuzzer's LLVMFuzzerRunDriver (defined by the fuzzer runtime).
        .target(name: "CLibFuzzer"),
        // `FuzzDecode [libFuzzer flags] [CORPUS...]` fuzzes probe + decode + thumbnail;
        // its seeds come from `vipsload corpus --fuzz-seeds DIR` (scripts/fuzz.sh).
        .executableTarget(
            name: "FuzzDecode",
            dependencies: ["CLibFuzzer", .product(name: "VipsCore", package: "VipsLoad")]
        ),
        // Declares libFuzzer's driver for the URL target and holds its C main.
        .target(name: "CLibFuzzerURL"),
        // `FuzzURL [libFuzzer flags] [CORPUS...]` fuzzes VipsServe's processing-URL parser (options,
        // signatures, sources) and the requests it makes; `FuzzURL --write-seeds DIR` writes its seeds.
        // A target of its own, so the decode target builds without VipsLoad and VipsServe.
        .executableTarget(
            name: "FuzzURL",
            dependencies: [
                "CLibFuzzerURL", .product(name: "VipsCore", package: "VipsLoad"),
                .product(name: "VipsLoad", package: "VipsLoad"), .product(name: "VipsServe", package: "VipsLoad")
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
