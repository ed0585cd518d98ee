/*
 * The C side of the URL fuzz target (FuzzURL): libFuzzer's driver entry and the
 * two functions the Swift target exports with @_cdecl. Apart from CLibFuzzer so
 * the decode target's build (and CI's smoke run of it) stays as it was.
 */
#ifndef CLIBFUZZERURL_H
#define CLIBFUZZERURL_H

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry for programs with their own main (LLVM >= 12); defined by the -sanitize=fuzzer runtime. */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

/* Defined in Swift (FuzzURL.swift, URLSeeds.swift). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int FuzzURLWriteSeeds(const char *folder);

#endif
