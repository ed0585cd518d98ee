/*
 * The C side of the fuzz harness: libFuzzer's driver entry and the function
 * the Swift target exports with @_cdecl.
 */
#ifndef CLIBFUZZER_H
#define CLIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry for programs with their own main (LLVM >= 12); defined by the -sanitize=fuzzer runtime. */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

/* Defined in Swift (FuzzTarget.swift). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
