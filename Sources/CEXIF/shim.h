/*
 * CEXIF: libexif for VipsCore's EXIF orientation (EXIFOrientation).
 *
 * libvips reads the orientation of every image it loads through libexif; the
 * direct codecs read it through the same library, with the same options, so
 * both paths give every file the same orientation, however odd its EXIF
 * block. Nothing is wrapped: every call is a plain C function, and every
 * decision is made in Swift.
 */
#ifndef CEXIF_SHIM_H
#define CEXIF_SHIM_H

#include <libexif/exif-data.h>
#include <libexif/exif-utils.h>

#endif
