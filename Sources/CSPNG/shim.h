/*
 * CSPNG: libspng for VipsCore's direct PNG path.
 *
 * libpng reports errors by longjmp from an error callback, which Swift code
 * cannot survive; libspng returns an error code from every call, and decodes
 * row by row (spng_decode_row), so Swift can call it directly and shrink the
 * rows as they arrive. Nothing is wrapped: every decision is made in Swift.
 */
#ifndef CSPNG_SHIM_H
#define CSPNG_SHIM_H

#include <spng.h>

#endif
