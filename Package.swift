// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "VipsLoad",
    products: [
        .library(name: "VipsCore", targets: ["VipsCore"]),
        .library(name: "VipsLoad", targets: ["VipsLoad"]),
        .library(name: "VipsServe", targets: ["VipsServe"]),
        .executable(name: "vipsload", targets: ["vipsload"])
    ],
    targets: [
        // The C boundary: a module map and static inline wrappers for libvips' variadic calls.
        .systemLibrary(
            name: "CVipsShim",
            path: "CVipsShim",
            pkgConfig: "vips",
            providers: [.apt(["libvips-dev"])]
        ),
        // libjpeg-turbo's TurboJPEG API, for the direct JPEG path: its calls return error codes,
        // where libjpeg's own API reports errors by longjmp, which Swift cannot take.
        .systemLibrary(
            name: "CTurboJPEG",
            path: "CTurboJPEG",
            pkgConfig: "libturbojpeg",
            providers: [.apt(["libturbojpeg0-dev"])]
        ),
        // libwebp's decoder and demuxer, for the direct WebP path: its scaled decode writes
        // straight into the bitmap, without libvips' loader and strip pipeline around it.
        .systemLibrary(
            name: "CWebP",
            path: "CWebP",
            pkgConfig: "libwebpdemux",
            providers: [.apt(["libwebp-dev"])]
        ),
        // libspng, for the direct PNG path: it returns error codes where libpng longjmps, and
        // decodes row by row, so a large PNG is box-shrunk as it is read, never held whole.
        .systemLibrary(
            name: "CSPNG",
            path: "CSPNG",
            pkgConfig: "spng",
            providers: [.apt(["libspng-dev"])]
        ),
        // libcurl's multi interface, for VipsLoad's HTTP transport: wrappers for its variadic
        // setters only (curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt).
        .systemLibrary(
            name: "CCurl",
            path: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        // Decode core: the only Swift that speaks C to the image libraries.
        .target(
            name: "VipsCore", dependencies: ["CVipsShim", "CTurboJPEG", "CWebP", "CSPNG"], path: "Sources/VipsCore"),
        // Loading pipeline: requests, queue, coalescing, caches, loaders, slots, progressive.
        .target(name: "VipsLoad", dependencies: ["VipsCore", "CCurl"], path: "Sources/VipsLoad"),
        // The image server library: imgproxy's URL grammar, signatures and source policy over the pipeline.
        // (CVipsShim for GLib's GHmac, linked through libvips.)
        .target(name: "VipsServe", dependencies: ["VipsLoad", "VipsCore", "CVipsShim"], path: "Sources/VipsServe"),
        // Benchmark corpus and scenarios, shared by the CLI's `bench` and the tests.
        .target(name: "VipsBench", dependencies: ["VipsLoad", "VipsCore"], path: "Sources/VipsBench"),
        // The command-line tool.
        .executableTarget(
            name: "vipsload", dependencies: ["VipsBench", "VipsLoad", "VipsCore"], path: "Sources/vipsload"),
        .testTarget(name: "VipsCoreTests", dependencies: ["VipsCore", "CVipsShim"], path: "Tests/VipsCoreTests"),
        // A real HTTP server on 127.0.0.1, shared by the library and CLI tests.
        .target(name: "TestSupport", dependencies: ["VipsCore"], path: "Tests/TestSupport"),
        .testTarget(
            name: "VipsLoadTests", dependencies: ["VipsLoad", "VipsCore", "TestSupport"], path: "Tests/VipsLoadTests"),
        .testTarget(
            name: "VipsServeTests", dependencies: ["VipsServe", "VipsLoad", "VipsCore", "TestSupport"],
            path: "Tests/VipsServeTests"),
        .testTarget(
            name: "VipsBenchTests", dependencies: ["VipsBench", "VipsLoad", "VipsCore"], path: "Tests/VipsBenchTests"),
        // Runs the built `vipsload` binary as a user would.
        .testTarget(name: "CLITests", dependencies: ["VipsCore", "vipsload", "TestSupport"], path: "Tests/CLITests")
    ],
    swiftLanguageModes: [.v6]
)
