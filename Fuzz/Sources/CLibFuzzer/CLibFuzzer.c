#include "CLibFuzzer.h"

/* From <vips/object.h> (declared here so this target needs no libvips headers; VipsCore links libvips).
   libvips registers every live VipsObject in a global table and maps over it. */
void *vips_object_map(void *(*fn)(void *object, void *a, void *b), void *a, void *b);

static void *count_object(void *object, void *a, void *b) {
    (void) object;
    (void) b;
    *(int *) a += 1;
    return NULL;
}

int FuzzLiveVipsObjects(void) {
    int count = 0;
    vips_object_map(count_object, &count, NULL);
    return count;
}

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
