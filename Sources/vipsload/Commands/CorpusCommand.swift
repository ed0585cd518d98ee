import Foundation
import VipsBench

/// `vipsload corpus [--out DIR]`: makes sure the benchmark corpus exists and prints its folder.
enum CorpusCommand {
    static let usage = """
        usage: vipsload corpus [--out DIR] [--fuzz-seeds DIR]

        Generates the built-in benchmark corpus once (deterministic photo-like
        images: 24 JPEGs 4000×3000, 8 PNGs and 8 WebPs 2000×1500, 32 JPEGs
        640×480) and prints its folder. Later runs reuse it.

          --out DIR          where to keep it (default: $VIPSLOAD_CACHE_DIR/corpus-v1,
                             else $XDG_CACHE_HOME/vipsload/corpus-v1, else ~/.cache/vipsload/corpus-v1)
          --fuzz-seeds DIR   write the fuzzer's seed corpus (small images of every
                             decode path, scripts/fuzz.sh) into DIR instead
        """

    static func run(_ arguments: [String]) throws(ArgumentParser.UsageError) -> Int32 {
        let parsed = try ArgumentParser(valueOptions: ["out", "fuzz-seeds"], flagOptions: []).parse(arguments)
        if parsed.help { Terminal.out(usage); return 0 }
        guard parsed.positional.isEmpty else {
            throw ArgumentParser.UsageError(description: "unexpected argument '\(parsed.positional[0])'")
        }
        if let seeds = parsed.value("fuzz-seeds") {
            do {
                let count = try FuzzSeedCorpus.write(to: URL(fileURLWithPath: seeds, isDirectory: true))
                Terminal.out("\(count) seeds in \(seeds)")
                return 0
            } catch {
                Terminal.err("vipsload corpus --fuzz-seeds: \(error)")
                return 1
            }
        }
        let corpus = BenchmarkCorpus(
            folder: parsed.value("out").map { URL(fileURLWithPath: $0) } ?? BenchmarkCorpus.defaultFolder)
        do {
            _ = try corpus.prepare { done, total in Terminal.progress("corpus: generated \(done)/\(total)") }
            Terminal.endProgress()
            Terminal.out(corpus.folder.path)
            return 0
        } catch {
            Terminal.endProgress()
            Terminal.err("vipsload corpus: \(error)")
            return 1
        }
    }
}
