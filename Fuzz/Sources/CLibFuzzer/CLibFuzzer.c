#include "CLibFuzzer.h"

/*
 * The fuzzer's main. SwiftPM links every executable target with
 * `--defsym main=<Module>_main` (so tests can link executables), and
 * `-sanitize=fuzzer` makes swiftc alias a Swift entry point to
 * LLVMFuzzerTestOneInput, so neither libFuzzer's own main nor a Swift one can
 * be used. This C definition takes the renamed slot and hands the command
 * line to libFuzzer's driver. (The seed corpus is written by `vipsload corpus
 * --fuzz-seeds`, see scripts/fuzz.sh.)
 */
int FuzzDecode_main(int argc, char **argv) {
    return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
}
