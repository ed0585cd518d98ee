import Dispatch
import Foundation
import VipsCore
import VipsLoad
import VipsServe

/// `vipsload serve`: an on-demand image server (`ImageServer`) over one
/// `ImagePipeline`, until SIGTERM or SIGINT drain it and it exits 0.
///
/// The command only turns flags into the pipeline's and the server's
/// configurations, writes the log to stderr (`ServeLog`) and handles the
/// signals: the first one drains the server (`ImageServer.shutdown()`), a
/// second one ends the process at once.
enum ServeCommand {
    static let usage = """
        usage: vipsload serve [--bind ADDRESS] [--port N] [--root DIR] [--allow-source PATTERN]...
                              [--allow-private-sources] [--key HEX --salt HEX]... [--key-file PATH --salt-file PATH]...
                              [--signature-size N] [--timeout S] [--drain-timeout S]
                              [--queue N] [--jobs N] [--max-age S] [--memory-cache MB]
                              [--memory-budget MB] [--cache-dir DIR] [--cache-size MB] [--max-source-bytes N] [--max-pixels N]
                              [--strict] [--allow LIST] [--isolate optin|all|none] [--worker-memory MB]
                              [--max-connections N] [--max-connections-per-ip N] [--connection-timeout S]
                              [--header-timeout S] [--downloads N] [--threads N] [--log-format text|json] [--quiet]
                              [--quality N] [--format-quality LIST] [--preferred-formats LIST]
                              [--auto-webp|--enforce-webp] [--auto-avif|--enforce-avif] [--auto-jxl|--enforce-jxl]
                              [--client-hints]
                              [--preset NAME=OPTIONS]... [--presets-file PATH] [--only-presets]
                              [--allow-security-options] [--max-src-resolution MP] [--max-src-file-size N]
                              [--watermark-path PATH | --watermark-data BASE64 | --watermark-url URL]
                              [--watermark-opacity X]

        Serves thumbnails on demand over HTTP/1.1, with imgproxy's URL format, until
        SIGTERM or SIGINT: then it stops accepting connections, answers new requests
        with 503, lets the requests in flight finish (at most --drain-timeout), and
        exits 0. A second signal exits at once. When it is ready it writes one line,
        'listening on http://ADDRESS:PORT', to stderr; then one access-log line per
        request. GET /health answers 200 (503 while draining), GET /metrics the
        Prometheus metrics. See docs/serve.md.

          --bind ADDRESS        the IPv4 or IPv6 address to listen on (default 127.0.0.1;
                                0.0.0.0 or :: for every interface)
          --port N              the port (default 8080; 0 picks a free one, as printed)
          --root DIR            where local:/// sources are read from (nothing outside it;
                                without it local sources get 404; a warning for /, /etc,
                                /usr and other folders of the system's files)
          --allow-source PATTERN
                                admit http(s):// sources whose host matches PATTERN: a host
                                name, *.example.com for its subdomains, an address, and an
                                optional scheme and port (repeat for more; without it remote
                                sources get 404)
          --allow-private-sources
                                let remote sources resolve to loopback, private, link-local
                                and other non-public addresses (refused by default, also after
                                a redirect: SSRF), for tests and intranets
          --key HEX, --salt HEX check URL signatures (HMAC-SHA256 over salt + path, as imgproxy);
                                a bad or missing one gets 403. Repeat both for several pairs
                                (key rotation). Without a key any signature is accepted.
                                Other users can read a command line: prefer the files or
                                the environment for real secrets
          --key-file PATH, --salt-file PATH
                                read the keys (salts) from PATH, one hex value a line
                                (repeatable; a file others may read gets a warning)
          --signature-size N    bytes of the HMAC a signature carries, 1-32 (default 32)

          Without these flags, imgproxy's IMGPROXY_KEY and IMGPROXY_SALT (comma-separated
          pairs) and IMGPROXY_SIGNATURE_SIZE are read from the environment.
          --preset NAME=OPTIONS a preset: options (rs:fill:300:200/q:80) a URL applies with
                                preset:NAME (pr:); 'default' applies to every URL (repeatable)
          --presets-file PATH   presets, one a line (blank lines and # comments skipped)
          --only-presets        a URL's options segment is preset names only (a:b)
          --allowed-options LIST
                                the option names URLs may use, comma-separated (w,h,pr); others 400
          --allow-security-options
                                URLs may set max_src_resolution (msr), max_src_file_size (msfs),
                                max_animation_frames (maf), max_animation_frame_resolution (mafr)
          --max-src-resolution MP
                                refuse sources over MP megapixels with 422
          --max-src-file-size N refuse source files over N bytes with 422 (0: no limit)
          --max-animation-frames N, --max-animation-frame-resolution MP
                                imgproxy's animation limits (serve renders the first frame)
          --download-timeout S  a source download's deadline (default --timeout)
          --path-prefix PREFIX  image URLs (and /health, /metrics) are under PREFIX (/img)
          --allow-origin ORIGIN Access-Control-Allow-Origin of image responses; OPTIONS answered

          Every flag above and below whose imgproxy variable docs/serve.md lists
          (IMGPROXY_BIND, IMGPROXY_TIMEOUT, IMGPROXY_PRESETS...) is read from the
          environment when the flag is not given; a set IMGPROXY_* variable serve does
          not know is an error.
          --timeout S           a request not answered within S seconds gets 504: loading,
                                decoding and encoding (default 10)
          --drain-timeout S     how long requests in flight may take after SIGTERM (default 10)
          --queue N             distinct images being made at once (decoding or waiting to)
                                beyond which a request gets 429 with Retry-After (default
                                4 × the usable CPUs); identical requests share one
          -j, --jobs N          decodes at once (default: the usable CPUs, as the container allows)
          --max-age S           Cache-Control max-age of images (default 31536000 for signed
                                URLs, 3600 otherwise)
          --memory-cache MB     encoded responses kept in memory (default a tenth of the memory
                                limit, at most 256); decoded bitmaps get a quarter of that more
          --memory-budget MB    memory the images being made may hold at once, estimated from
                                each source's header before decoding (default half of what the
                                memory limit leaves after the caches); an image that does not
                                fit waits its turn, one that needs more than all of it gets 422
          --cache-dir DIR       keep encoded responses on disk in DIR, so a restarted server
                                makes nothing it made before (several servers may share one)
          --cache-size MB       the disk cache's size limit (default 1024)
          --max-source-bytes N  refuse sources larger than N bytes with 422 (default 268435456)
          --max-connections N   open connections at most (default 1024)
          --max-connections-per-ip N
                                open connections per client address at most (default 128; 0 for
                                no limit; raise it behind a load balancer)
          --connection-timeout S
                                close a connection idle this long (default 30)
          --header-timeout S    close a connection whose request header is not complete S
                                seconds after it opened (after the previous response plus
                                --connection-timeout on a kept-alive one), however slowly
                                it sends (default 10; 0 for none). Near --max-connections,
                                new connections close the ones waiting longest for a header
          --downloads N         source downloads at once (default 6)
          --threads N           network threads (default 1)
          --watermark-path PATH, --watermark-data BASE64, --watermark-url URL
                                the image imgproxy's watermark option (wm:) draws: a file, the
                                image itself in base64, or a source URL the source rules admit
                                (local:///, an allowed http(s)://); loaded and decoded once, at
                                start (a bad one is an error then). Without these,
                                IMGPROXY_WATERMARK_DATA, _PATH or _URL
          --watermark-opacity X the watermark's opacity, above 0 and at most 1, that each URL's
                                own multiplies (default 1; else IMGPROXY_WATERMARK_OPACITY)
          --log-format F        text (default) or json: one object per line
          -q, --quiet           no access log (events and errors are still written)
        \(ServeOutputFlags.usage)
        \(DecoderFlags.help)
          --isolate WHAT     decode in worker processes, so an input that crashes or hangs
                             its decoder fails alone: 'optin' (default: the formats only
                             --allow enables), 'all', 'none'
          --worker-memory MB cap each worker's address space (default \(IsolationFlags.defaultWorkerMemory), 0 for no cap)

        Exit status: 0 after a graceful shutdown, 1 when the server cannot start, 2 on
        usage errors.
        """

    static let shortOptions: [Character: String] = ["j": "jobs", "q": "quiet"]

    /// Everything the flags say.
    struct Options {
        var server = ImageServer.Configuration()
        var pipeline: ImagePipeline.Configuration
        var root: String?
        var logFormat: ServeLog.Format
        var quiet: Bool
        var isolation: IsolationFlags.Settings
        var workerArguments: [String]
        /// Lines for stderr before the server starts (a key file others may read).
        var warnings: [String] = []
    }

    static func run(_ arguments: [String]) async throws(ArgumentParser.UsageError) -> Int32 {
        let parser = ArgumentParser(
            valueOptions: DecoderFlags.valueOptions.union([
                "bind", "port", "root", "allow-source", "key", "salt", "key-file", "salt-file", "signature-size",
                "timeout", "drain-timeout", "queue", "jobs",
                "max-age", "memory-cache", "memory-budget",
                "cache-dir", "cache-size", "max-source-bytes", "max-connections", "max-connections-per-ip",
                "connection-timeout", "header-timeout", "downloads", "threads", "log-format", "isolate",
                "worker-memory",
                "download-timeout", "preset", "presets-file", "max-src-resolution", "max-src-file-size",
                "max-animation-frames", "max-animation-frame-resolution", "path-prefix", "allow-origin",
                "allowed-options", "watermark-path", "watermark-data", "watermark-url", "watermark-opacity"
            ]).union(ServeOutputFlags.valueOptions),
            flagOptions: DecoderFlags.flagOptions.union([
                "quiet", "allow-private-sources", "only-presets", "allow-security-options"
            ]).union(ServeOutputFlags.flagOptions), shortOptions: shortOptions)
        let given = try parser.parse(arguments)
        // imgproxy's IMGPROXY_* variables stand in for the flags not given (ServeSettings+Imgproxy).
        let environment = given.help ? nil : try ServeSettings(given).imgproxyEnvironment()
        let parsed = environment?.parsed ?? given
        if parsed.help {
            Terminal.out(usage)
            return 0
        }
        guard parsed.positional.isEmpty else {
            throw ArgumentParser.UsageError(description: "unexpected argument '\(parsed.positional[0])'")
        }
        var options = try self.options(parsed)
        try environment?.apply(to: &options)
        let (watermark, watermarkWarnings) = try ServeSettings(parsed).watermark()
        for warning in options.warnings + watermarkWarnings { Terminal.err("vipsload serve: warning: \(warning)") }
        let log = ServeLog(format: options.logFormat, logsRequests: !options.quiet)
        options.server.log = log
        if let folder = parsed.value("cache-dir") {
            let megabytes = try parsed.int("cache-size", default: 1024, in: 1...1_048_576)
            do throws(VipsError) {
                options.server.dataCache = try DiskCache(
                    directory: URL(fileURLWithPath: folder), sizeLimit: megabytes << 20)
            } catch {
                Terminal.err("vipsload serve: \(error.message)")
                return 1
            }
        } else if parsed.value("cache-size") != nil {
            throw ArgumentParser.UsageError(description: "--cache-size needs --cache-dir")
        }
        // Isolation matters only for formats a worker would take: with --isolate optin
        // and no opt-in format allowed, nothing would go to one, so none is started.
        let optInAllowed = !options.pipeline.decodeOptions.allowedFormats.isSubset(of: ImageFormat.defaultAllowed)
        let isolating = options.isolation.scope == .all || (options.isolation.scope == .optIn && optInAllowed)
        let workers =
            isolating
            ? WorkerPool(
                capacity: options.pipeline.decodeConcurrency, timeoutSeconds: options.isolation.timeoutSeconds,
                workerMemory: options.isolation.workerMemory, workerArguments: options.workerArguments) : nil
        defer { workers?.shutdown() }
        if let workers { options.server.isolation = WorkerDecoding(workers: workers, settings: options.isolation) }
        let pipeline = ImagePipeline(configuration: options.pipeline)
        if let watermark {
            // Loaded and decoded once, before the server listens: a bad watermark stops the start.
            do throws(VipsError) {
                options.server.urls.watermark = try await WatermarkImage.load(
                    watermark.source, opacity: watermark.opacity, pipeline: pipeline,
                    sources: options.server.urls.sources)
            } catch {
                Terminal.err("vipsload serve: \(watermark.origin): \(error.message)")
                return 1
            }
        }
        let signals = ServeSignals()
        let server: ImageServer
        do throws(VipsError) {
            server = try ImageServer(pipeline: pipeline, configuration: options.server)
        } catch {
            Terminal.err("vipsload serve: \(error.message)")
            return 1
        }
        // The server has reported "listening on http://ADDRESS:PORT" through `log` (written at once).
        let signal = await signals.next()
        log.event("\(signal == SIGINT ? "interrupted" : "terminated"); draining (a second signal exits at once)")
        await server.shutdown()
        workers?.shutdown()
        TemporaryDownloads.removeAll()
        log.flush()
        return 0
    }

    /// The URL rules the flags (and imgproxy's variables) describe: signing
    /// keys, the local root, the source patterns; and the warnings about them.
    static func urls(
        _ settings: ServeSettings, root: String?
    ) throws(ArgumentParser.UsageError)
        -> (parser: ProcessingURLParser, warnings: [String])
    {
        let (signingKeys, warnings) = try settings.signingKeys()
        do throws(VipsError) {
            var patterns: [SourcePattern] = []
            for pattern in settings.parsed.values("allow-source") {
                patterns.append(try SourcePattern(pattern))
            }
            let parser = ProcessingURLParser(
                signingKeys: signingKeys, sources: try SourcePolicy(localRoot: root, allowedSources: patterns))
            return (parser, warnings)
        } catch {
            throw ArgumentParser.UsageError(description: error.message)
        }
    }

    /// System folders no image root should be, or be inside of.
    static let systemFolders = [
        "/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/boot", "/dev", "/proc", "/sys", "/run", "/root"
    ]
    /// Folders that hold every user's or every service's files: no root should be one (inside is fine).
    static let sharedFolders = ["/home", "/var"]

    /// A warning for a `--root` that serves the system's files: `/`, a system
    /// folder or a folder inside one, or `/home` or `/var` themselves
    /// (symbolic links resolved first).
    static func rootWarning(_ root: String) -> String? {
        let real = URL(fileURLWithPath: root).resolvingSymlinksInPath().standardizedFileURL.path
        let isSystem =
            real == "/" || sharedFolders.contains(real)
            || systemFolders.contains { real == $0 || real.hasPrefix($0 + "/") }
        guard isSystem else { return nil }
        return "--root '\(root)' serves the system's files (\(real)) to anyone who can reach the server; "
            + "give it a folder of images"
    }

    /// The configurations the flags describe.
    static func options(_ parsed: ArgumentParser.Parsed) throws(ArgumentParser.UsageError) -> Options {
        let resources = SystemResources.current
        let timeout = try parsed.int("timeout", default: 10, in: 1...86_400)
        let jobs = try parsed.int("jobs", default: resources.usableCPUs, in: 1...256)
        var decodeOptions = try DecoderFlags.options(parsed)
        let maxSourceBytes = try parsed.int(
            "max-source-bytes", default: decodeOptions.limits.maxInputBytes, in: 1...(1 << 40))
        decodeOptions.limits.maxInputBytes = maxSourceBytes
        var server = ImageServer.Configuration()
        server.address = parsed.value("bind") ?? server.address
        server.port = UInt16(try parsed.int("port", default: 8080, in: 0...65_535))
        server.requestTimeout = .seconds(timeout)
        server.drainTimeout = .seconds(try parsed.int("drain-timeout", default: 10, in: 0...86_400))
        server.queueLimit = try parsed.int("queue", default: 4 * resources.usableCPUs, in: 1...1_000_000)
        if parsed.value("max-age") != nil {
            server.maxAge = try parsed.int("max-age", default: 0, in: 0...(10 * 31_536_000))
        }
        let memoryMegabytes = try parsed.int(
            "memory-cache", default: server.responseCacheBytes >> 20, in: 0...1_048_576)
        server.responseCacheBytes = memoryMegabytes << 20
        if parsed.value("memory-budget") != nil {
            server.memoryBudget = try parsed.int("memory-budget", default: 0, in: 1...16_777_216) << 20
        }
        server.maxConnections = try parsed.int("max-connections", default: server.maxConnections, in: 1...1_000_000)
        server.maxConnectionsPerIP = try parsed.int(
            "max-connections-per-ip", default: server.maxConnectionsPerIP, in: 0...1_000_000)
        server.connectionTimeout = .seconds(
            try parsed.int("connection-timeout", default: 30, in: 0...86_400))
        server.headerTimeout = .seconds(try parsed.int("header-timeout", default: 10, in: 0...86_400))
        server.networkThreads = try parsed.int("threads", default: 1, in: 1...64)
        server.output = try ServeOutputFlags.settings(parsed)

        var pipeline = ImagePipeline.Configuration(
            decodeConcurrency: jobs,
            memoryCache: memoryMegabytes > 0 ? MemoryCache(costLimit: (memoryMegabytes << 20) / 4) : nil,
            decodeOptions: decodeOptions)
        // --timeout (at least 1, checked when parsed): a decode is stopped cooperatively.
        try? pipeline.setDecodeTimeLimit(.seconds(timeout))
        // A request that times out or whose client hangs up stops its decode and processors, not only its answer.
        pipeline.stopsAbandonedWork = true
        let downloadTimeout = try parsed.int("download-timeout", default: timeout, in: 1...86_400)
        pipeline.http.requestTimeout = TimeInterval(downloadTimeout)
        pipeline.http.resourceTimeout = TimeInterval(downloadTimeout)
        pipeline.http.maxBodyBytes = maxSourceBytes
        pipeline.http.maxConcurrentDownloads = try parsed.int("downloads", default: 6, in: 1...1024)

        let root = parsed.value("root")
        if let root {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root, isDirectory: &isFolder), isFolder.boolValue else {
                throw ArgumentParser.UsageError(description: "--root: '\(root)' is not a folder")
            }
        }
        let rules = try urls(ServeSettings(parsed), root: root)
        server.urls = rules.parser
        try ServeSettings.applyProcessingFlags(parsed, to: &server.urls)
        server.allowOrigin = parsed.value("allow-origin")
        var warnings = rules.warnings
        if let root, let warning = rootWarning(root) { warnings.append(warning) }
        pipeline.http.addressPolicy = parsed.flag("allow-private-sources") ? .unrestricted : .publicOnly
        let scope =
            IsolationFlags.Scope(rawValue: try parsed.choice("isolate", ["optin", "all", "none"], default: "optin"))
            ?? .optIn
        let workerMemory = try parsed.int(
            "worker-memory", default: IsolationFlags.defaultWorkerMemory, in: 0...1_048_576)
        var workerArguments = ["--worker-memory", String(workerMemory)]
        for name in ["max-pixels", "allow"] {
            if let value = parsed.value(name) { workerArguments += ["--\(name)", value] }
        }
        if parsed.flag("strict") { workerArguments.append("--strict") }
        return Options(
            server: server, pipeline: pipeline, root: root,
            logFormat: ServeLog.Format(rawValue: try parsed.choice("log-format", ["text", "json"], default: "text"))
                ?? .text,
            quiet: parsed.flag("quiet"),
            isolation: IsolationFlags.Settings(scope: scope, timeoutSeconds: timeout, workerMemory: workerMemory),
            workerArguments: workerArguments, warnings: warnings)
    }
}
