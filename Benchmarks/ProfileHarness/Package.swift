// swift-tools-version:6.0
// The single-threaded harness scripts/profile.sh runs under callgrind: a separate package, so
// the root build never sees it. (`vipsload thumb` itself cannot run under valgrind 3.19: it
// crashes inside valgrind as soon as the CLI starts its worker threads.)
import PackageDescription

let package = Package(
    name: "VipsLoadProfile",
    dependencies: [.package(name: "VipsLoad", path: "../..")],
    targets: [
        // `ProfileThumb SIZE OUTDIR FILE...`: what `vipsload thumb` does per file, on one thread.
        .executableTarget(
            name: "ProfileThumb",
            dependencies: [.product(name: "VipsCore", package: "VipsLoad")]
        )
    ],
    swiftLanguageModes: [.v6]
)
