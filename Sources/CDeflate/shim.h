/*
 * CDeflate: libdeflate for VipsCore's direct PNG path.
 *
 * libdeflate inflates a whole zlib or raw DEFLATE stream in one call, about
 * twice as fast as zlib's streaming inflate, and computes CRC-32 with SIMD.
 * Its functions take plain pointers and sizes, so Swift calls them directly:
 * nothing is wrapped, every decision is made in Swift.
 */
#ifndef CDEFLATE_SHIM_H
#define CDEFLATE_SHIM_H

#include <libdeflate.h>

#endif
