#include <stdio.h>
#include <string.h>

#include "CLibFuzzer.h"

/*
 * The fuzzer's main. SwiftPM links every executable target with
 * `--defsym main=<Module>_main` (so tests can link executables), and
 * `-sanitize=fuzzer` makes swiftc alias a Swift entry point to
 * LLVMFuzzerTestOneInput, so neither libFuzzer's own main nor a Swift one can
 * be used. This C definition takes the renamed slot: it writes the seed corpus
 * (`--write-seeds FOLDER`) or hands the command line to libFuzzer's driver.
 */
int FuzzDecode_main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--write-seeds") == 0) {
        if (argc != 3) {
            fputs("usage: FuzzDecode --write-seeds FOLDER\n", stderr);
            return 2;
        }
        return FuzzDecodeWriteSeeds(argv[2]);
    }
    return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
}
