import Foundation
@_spi(Tooling) import VipsCore

/// `vipsload`: info, thumb, bench and serve over the VipsLoad library.
let usage = """
    usage: vipsload <command> [options]

    commands:
      info     print each image's size, format, bands, alpha, orientation and pages
      thumb    write thumbnails of images (files, folders, URLs) to a folder, in parallel
      bench    measure throughput, cache hits, coalescing, scrolling and scaling
      serve    serve thumbnails on demand over HTTP (imgproxy's URL format)
      corpus   generate (once) the built-in benchmark corpus and print its folder
      version  print the VipsLoad and libvips versions (also --version, -V)
      help     print this, or a command's options ('vipsload help thumb')

    Run 'vipsload <command> --help' for a command's options.

    Exit status: 0 on success, 1 when any input failed, 2 on usage errors.
    """

// Lower, flatter peak RSS when decoding on several threads (see the method's documentation).
VipsRuntime.tuneAllocatorForImageWork()

var arguments = Array(CommandLine.arguments.dropFirst())
// Hidden: a decode worker started by `WorkerPool` (not for people to run).
if arguments.first == DecodeWorker.command {
    exit(DecodeWorker.run(Array(arguments.dropFirst())))
}
guard let command = arguments.first else {
    Terminal.err(usage)
    exit(2)
}
arguments.removeFirst()

let commands: [String: ([String]) async throws(ArgumentParser.UsageError) -> Int32] = [
    "info": InfoCommand.run,
    "thumb": ThumbCommand.run,
    "corpus": CorpusCommand.run
]

if command == "--version" || command == "-V" || command == "version" {
    Terminal.out(Version.text)
    exit(0)
}
if command == "help", let topic = arguments.first {
    let usages = [
        "info": InfoCommand.usage, "thumb": ThumbCommand.usage, "bench": BenchCommand.usage,
        "serve": ServeCommand.usage,
        "corpus": CorpusCommand.usage, "version": "usage: vipsload version | --version | -V", "help": usage
    ]
    guard let text = usages[topic] else {
        Terminal.err("vipsload help: unknown command '\(topic)'\n\n\(usage)")
        exit(2)
    }
    Terminal.out(text)
    exit(0)
}
if command == "bench" {
    do {
        exit(try await BenchCommand.run(arguments))
    } catch {
        Terminal.err("vipsload bench: \(error.description)\nRun 'vipsload bench --help' for usage.")
        exit(2)
    }
}
// The server drains itself on SIGINT/SIGTERM (ServeSignals), so it runs outside SignalHandling.
if command == "serve" {
    do {
        exit(try await ServeCommand.run(arguments))
    } catch {
        Terminal.err("vipsload serve: \(error.description)\nRun 'vipsload serve --help' for usage.")
        exit(2)
    }
}
if command == "--help" || command == "-h" || command == "help" {
    Terminal.out(usage)
    exit(0)
}
guard let run = commands[command] else {
    Terminal.err("vipsload: unknown command '\(command)'\n\n\(usage)")
    exit(2)
}
do {
    // SIGINT/SIGTERM cancel the command, remove its temporary downloads and exit 130/143.
    exit(try await SignalHandling.run(run, arguments))
} catch {
    Terminal.err("vipsload \(command): \(error.description)\nRun 'vipsload \(command) --help' for usage.")
    exit(2)
}
