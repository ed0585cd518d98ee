import Foundation
import VipsCore

/// `vipsload`: info, thumb, bench, serve and corpus over the VipsLoad library.
extension Command {
    /// The commands, listed once: the usage text, `help` and dispatch read
    /// this list, so a new command is one entry.
    static let all: [Command] = [
        Command(
            name: "info", summary: "print each image's size, format, bands, alpha, orientation and pages",
            usage: InfoCommand.usage, run: InfoCommand.run),
        Command(
            name: "thumb", summary: "write thumbnails of images (files, folders, URLs) to a folder, in parallel",
            usage: ThumbCommand.usage, run: ThumbCommand.run),
        Command(
            name: "bench", summary: "measure throughput, cache hits, coalescing, scrolling and scaling",
            usage: BenchCommand.usage, signals: .endTheProcess, run: BenchCommand.run),
        // The server drains itself on SIGINT/SIGTERM (ServeSignals), so it runs outside SignalHandling.
        Command(
            name: "serve", summary: "serve thumbnails on demand over HTTP (imgproxy's URL format)",
            usage: ServeCommand.usage, signals: .handledByTheCommand, run: ServeCommand.run),
        Command(
            name: "corpus", summary: "generate (once) the built-in benchmark corpus and print its folder",
            usage: CorpusCommand.usage, run: CorpusCommand.run),
        .version("usage: vipsload version | --version | -V"),
        .help { Command.all }
    ]
}

// Lower, flatter peak RSS when decoding on several threads (see the method's documentation).
VipsRuntime.tuneAllocatorForImageWork()

let arguments = Array(CommandLine.arguments.dropFirst())
// Hidden: a decode worker started by `WorkerPool` (not for people to run).
if arguments.first == DecodeWorker.command {
    exit(DecodeWorker.run(Array(arguments.dropFirst())))
}
await Command.dispatch(arguments, among: Command.all)
