/*
 * CXXHash: xxHash (libxxhash) for the disk cache's checksums and file names.
 *
 * XXH3 is a maintained, fast non-cryptographic hash: the disk cache checks
 * every entry's bytes with its streaming 64-bit form as they are written and
 * read, and names entry files by the 128-bit hash of their key. Its calls are
 * plain C functions Swift calls directly (VipsCore's XXH3Stream and XXH3.hash128):
 * nothing is wrapped here.
 */
#ifndef CXXHASH_SHIM_H
#define CXXHASH_SHIM_H

#include <xxhash.h>

#endif
