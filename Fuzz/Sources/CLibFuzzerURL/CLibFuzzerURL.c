#include <stdio.h>
#include <string.h>

#include "CLibFuzzerURL.h"

/*
 * The URL fuzzer's main, in the slot SwiftPM's `--defsym main=FuzzURL_main`
 * names (see CLibFuzzer.c for why neither libFuzzer's main nor a Swift one can
 * be used): writes the seed corpus (`--write-seeds FOLDER`) or hands the
 * command line to libFuzzer's driver.
 */
int FuzzURL_main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "--write-seeds") == 0) {
        if (argc != 3) {
            fputs("usage: FuzzURL --write-seeds FOLDER\n", stderr);
            return 2;
        }
        return FuzzURLWriteSeeds(argv[2]);
    }
    return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
}
