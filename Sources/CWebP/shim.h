/*
 * CWebP: libwebp's decoder and demuxer for VipsCore's direct WebP path.
 *
 * libwebp's calls return status codes (no callbacks, no longjmp), so Swift
 * calls them directly: WebPDemux reads the RIFF chunks (VP8X flags, ICCP,
 * EXIF, ANIM) exactly as libvips' webpload does, and WebPDecode decodes with
 * its own scaling straight into the bitmap's memory. Nothing is wrapped:
 * every decision is made in Swift.
 */
#ifndef CWEBP_SHIM_H
#define CWEBP_SHIM_H

#include <webp/decode.h>
#include <webp/demux.h>

#endif
