/*
 * CTIFF: libtiff for VipsCore's TIFF fallback, the RGBA interface
 * (TIFFReadRGBAStrip/TIFFReadRGBATile) for TIFF layouts libvips' tiffload
 * refuses. Everything else is called from Swift directly; policy is Swift's.
 *
 * The wrappers exist because TIFFGetField and TIFFGetFieldDefaulted are
 * variadic (their out-parameters' types depend on the tag), which Swift
 * cannot call: each wrapper fixes one tag type to a typed signature.
 */
#ifndef CTIFF_SHIM_H
#define CTIFF_SHIM_H

#include <tiffio.h>

/* A 32-bit tag's value (width, length, rows per strip, tile sides); 1 when present. */
static inline int vl_tiff_get_uint32(TIFF *tif, uint32_t tag, uint32_t *value) {
    return TIFFGetField(tif, tag, value);
}

/* A 16-bit tag's value, or libtiff's default for it; 1 when there is one. */
static inline int vl_tiff_get_uint16_defaulted(TIFF *tif, uint32_t tag, uint16_t *value) {
    return TIFFGetFieldDefaulted(tif, tag, value);
}

/* The ExtraSamples tag: a count and libtiff's array of sample kinds; 1 when present. */
static inline int vl_tiff_get_extra_samples(TIFF *tif, uint16_t *count, uint16_t **kinds) {
    return TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, count, kinds);
}

#endif
