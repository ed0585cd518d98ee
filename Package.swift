// swift-tools-version:6.0
import PackageDescription

/// A C library found by pkg-config: its module map and header are in `Sources/<name>` (or `path`),
/// and Debian's `debianPackage` provides it.
func systemLibrary(_ name: String, path: String? = nil, pkgConfig: String, debianPackage: String) -> Target {
    .systemLibrary(name: name, path: path, pkgConfig: pkgConfig, providers: [.apt([debianPackage])])
}

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
        // libvips itself is opened at run time (CVipsShim/libvips.h), so only GObject is linked;
        // its headers come with libvips-dev, at the compiler's default include path. It stays at the
        // repository's top level, the one door to libvips, apart from the plain system libraries.
        systemLibrary("CVipsShim", path: "CVipsShim", pkgConfig: "gobject-2.0", debianPackage: "libvips-dev"),
        // libjpeg-turbo's TurboJPEG API, for the direct JPEG path: its calls return error codes,
        // where libjpeg's own API reports errors by longjmp, which Swift cannot take.
        systemLibrary("CTurboJPEG", pkgConfig: "libturbojpeg", debianPackage: "libturbojpeg0-dev"),
        // libwebp's decoder and demuxer, for the direct WebP path: its scaled decode writes
        // straight into the bitmap, without libvips' loader and strip pipeline around it.
        systemLibrary("CWebP", pkgConfig: "libwebpdemux", debianPackage: "libwebp-dev"),
        // libspng, for the direct PNG path: it returns error codes where libpng longjmps, and
        // decodes row by row, so a large PNG is box-shrunk as it is read, never held whole.
        systemLibrary("CSPNG", pkgConfig: "spng", debianPackage: "libspng-dev"),
        // libdeflate, for the direct PNG path: a PNG whose image data inflates within a budget
        // is inflated in one call (about twice zlib's streaming speed), then unfiltered in Swift.
        systemLibrary("CDeflate", pkgConfig: "libdeflate", debianPackage: "libdeflate-dev"),
        // libtiff's RGBA interface, for the TIFF layouts libvips' tiffload refuses (TIFFGetField is
        // variadic: a few typed wrappers).
        systemLibrary("CTIFF", pkgConfig: "libtiff-4", debianPackage: "libtiff-dev"),
        // libexif, for EXIF orientation read exactly as libvips reads it.
        systemLibrary("CEXIF", pkgConfig: "libexif", debianPackage: "libexif-dev"),
        // Little CMS 2, for the sRGB-profile check, with the library libvips converts profiles with.
        systemLibrary("CLittleCMS", pkgConfig: "lcms2", debianPackage: "liblcms2-dev"),
        // xxHash, for the disk cache's content checksums and file names (VipsCore's XXH3 calls it).
        systemLibrary("CXXHash", pkgConfig: "libxxhash", debianPackage: "libxxhash-dev"),
        // GLib's HMAC and SHA-256, for the server's URL signatures and ETags: GLib is in the process
        // already (libvips links it), and a module of its own keeps the server off CVipsShim.
        systemLibrary("CGLib", pkgConfig: "glib-2.0", debianPackage: "libglib2.0-dev"),
        // libmicrohttpd, the HTTP server under VipsServe: its daemon start and info calls are
        // variadic (and return unions), so a few static inline wrappers fix them to typed signatures.
        systemLibrary("CMicroHTTPD", pkgConfig: "libmicrohttpd", debianPackage: "libmicrohttpd-dev"),
        // libcurl's multi interface, for VipsLoad's HTTP transport: wrappers for its variadic
        // setters only (curl_easy_setopt, curl_easy_getinfo, curl_multi_setopt).
        systemLibrary("CCurl", pkgConfig: "libcurl", debianPackage: "libcurl4-openssl-dev"),
        // Linux calls Swift cannot make directly (gettid, sched_getaffinity, eventfd), for the decode
        // core and the server's HTTP layer alike. Part of libc: nothing for pkg-config to find.
        .systemLibrary(name: "CSystem"),
        // The one lock type (TSan-visible, rank-checked in debug builds) and Dispatch helpers, below
        // every other Swift target: the decode core and the HTTP layer alike.
        .target(name: "VipsSync", dependencies: ["CSystem"]),
        // Decode core: the only Swift that speaks C to the image libraries.
        .target(
            name: "VipsCore",
            dependencies: [
                "VipsSync", "CVipsShim", "CSystem", "CTurboJPEG", "CWebP", "CSPNG", "CDeflate", "CTIFF", "CEXIF",
                "CLittleCMS", "CXXHash"
            ]),
        // Loading pipeline: requests, queue, coalescing, caches, loaders, slots, progressive.
        .target(name: "VipsLoad", dependencies: ["VipsCore", "CCurl"]),
        // Generated photo-like images and a seeded generator, for the tests, the benchmark corpus and
        // the fuzz seeds: a target, not a product, so it is no part of the library's API. Its libvips
        // calls are VipsCore's (VipsImageHandle+Synthesis).
        .target(name: "VipsSynthesis", dependencies: ["VipsCore"]),
        // The server's HTTP layer: libmicrohttpd's daemon, suspended connections, hang-ups and header
        // deadlines. It knows nothing of images: neither the decode core nor CVipsShim.
        .target(name: "VipsHTTP", dependencies: ["VipsSync", "CMicroHTTPD", "CSystem"]),
        // The image server: imgproxy's URLs and signatures (GLib's GHmac, through CGLib), the source
        // policy, response caches, metrics.
        .target(name: "VipsServe", dependencies: ["VipsHTTP", "VipsLoad", "VipsCore", "CGLib"]),
        // Benchmark corpus and scenarios, shared by the CLI's `bench` and the tests.
        .target(name: "VipsBench", dependencies: ["VipsLoad", "VipsCore", "VipsSynthesis"]),
        // The command-line tool. A release build links the Swift runtime and Foundation statically,
        // so the dynamic linker binds none of their symbols when a command starts: `vipsload help`
        // 31 → 19 ms, a `thumb` of 32 small JPEGs 68 → 60 ms (both median, CPU and wall alike).
        // The link prints one linker note, "the use of `mktemp' is dangerous", from the toolchain's
        // static Foundation (swiftlang/swift-foundation#1358), not from VipsLoad's code. Debug builds
        // (the tests') keep the shared libraries and their quicker links. Library products are
        // unaffected: the flags are this executable target's own.
        .executableTarget(
            name: "vipsload", dependencies: ["VipsBench", "VipsServe", "VipsLoad", "VipsCore"],
            swiftSettings: [.unsafeFlags(["-static-stdlib"], .when(configuration: .release))],
            linkerSettings: [.unsafeFlags(["-static-stdlib"], .when(configuration: .release))]
        ),
        .testTarget(
            name: "VipsCoreTests", dependencies: ["VipsCore", "CVipsShim", "CDeflate", "VipsSynthesis", "TestSupport"]),
        // A real HTTP server on 127.0.0.1, shared by the library and CLI tests: a library target in
        // Tests/, so its path is not SwiftPM's default.
        .target(name: "TestSupport", dependencies: ["VipsCore"], path: "Tests/TestSupport"),
        .testTarget(name: "VipsLoadTests", dependencies: ["VipsLoad", "VipsCore", "VipsSynthesis", "TestSupport"]),
        .testTarget(
            name: "VipsServeTests",
            dependencies: ["VipsServe", "VipsHTTP", "VipsLoad", "VipsCore", "VipsSynthesis", "TestSupport"]),
        .testTarget(name: "VipsBenchTests", dependencies: ["VipsBench", "VipsLoad", "VipsCore"]),
        // Runs the built `vipsload` binary as a user would.
        .testTarget(
            name: "CLITests", dependencies: ["VipsCore", "VipsServe", "VipsSynthesis", "vipsload", "TestSupport"])
    ],
    swiftLanguageModes: [.v6]
)
