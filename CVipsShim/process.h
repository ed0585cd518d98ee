/*
 * CVipsShim, processing and encoding wrappers (resize modes, processors,
 * output formats). Same rule as shim.h: each wrapper fixes one variadic
 * libvips call to a typed signature; every decision is made in Swift.
 * Kept apart from shim.h so decode and processing work do not collide.
 */
#ifndef CVIPS_PROCESS_H
#define CVIPS_PROCESS_H

#include "libvips.h"

static inline int vl_extract_area(const VLLibVips *v, VipsImage *in, VipsImage **out, int left, int top, int width,
                                  int height) {
    return v->vips_extract_area(in, out, left, top, width, height, NULL);
}

static inline int vl_smartcrop(const VLLibVips *v, VipsImage *in, VipsImage **out, int width, int height,
                               VipsInteresting interesting) {
    return v->vips_smartcrop(in, out, width, height, "interesting", interesting, NULL);
}

/* Places the image in a width × height canvas at a compass direction, filled with background. */
static inline int vl_gravity(const VLLibVips *v, VipsImage *in, VipsImage **out, VipsCompassDirection direction,
                             int width, int height,
                             const double *background, int n) {
    VipsArrayDouble *colour = v->vips_array_double_new(background, n);
    int status = v->vips_gravity(in, out, direction, width, height, "extend", VIPS_EXTEND_BACKGROUND,
                              "background", colour, NULL);
    v->vips_area_unref(VIPS_AREA(colour));
    return status;
}

static inline int vl_gaussblur(const VLLibVips *v, VipsImage *in, VipsImage **out, double sigma) {
    return v->vips_gaussblur(in, out, sigma, NULL);
}

static inline int vl_sharpen(const VLLibVips *v, VipsImage *in, VipsImage **out, double sigma) {
    return v->vips_sharpen(in, out, "sigma", sigma, NULL);
}

/* The bounding box of what differs from background (n bands) by more than threshold. */
static inline int vl_find_trim(const VLLibVips *v, VipsImage *in, int *left, int *top, int *width, int *height,
                               double threshold, const double *background, int n) {
    VipsArrayDouble *colour = v->vips_array_double_new(background, n);
    int status = v->vips_find_trim(in, left, top, width, height, "threshold", threshold, "background", colour, NULL);
    v->vips_area_unref(VIPS_AREA(colour));
    return status;
}

/* The image at (x, y) on a width × height canvas, the outside mirrored from the image. */
static inline int vl_embed_mirror(const VLLibVips *v, VipsImage *in, VipsImage **out, int x, int y, int width,
                                  int height) {
    return v->vips_embed(in, out, x, y, width, height, "extend", VIPS_EXTEND_MIRROR, NULL);
}

/* Each pixel repeated xfac × yfac times. */
static inline int vl_zoom(const VLLibVips *v, VipsImage *in, VipsImage **out, int xfac, int yfac) {
    return v->vips_zoom(in, out, xfac, yfac, NULL);
}

static inline int vl_rot(const VLLibVips *v, VipsImage *in, VipsImage **out, VipsAngle angle) {
    return v->vips_rot(in, out, angle, NULL);
}

static inline int vl_flip(const VLLibVips *v, VipsImage *in, VipsImage **out, VipsDirection direction) {
    return v->vips_flip(in, out, direction, NULL);
}

/* Overlay over base (porter-duff over) with its top-left corner at x, y. */
static inline int vl_composite_over(const VLLibVips *v, VipsImage *base, VipsImage *overlay, VipsImage **out, int x,
                                    int y) {
    return v->vips_composite2(base, overlay, out, VIPS_BLEND_MODE_OVER, "x", x, "y", y, NULL);
}

/* out = in * a + b, per band. */
static inline int vl_linear(const VLLibVips *v, VipsImage *in, VipsImage **out, const double *a, const double *b,
                            int n) {
    return v->vips_linear(in, out, a, b, n, NULL);
}

static inline int vl_bandjoin_const1(const VLLibVips *v, VipsImage *in, VipsImage **out, double c) {
    return v->vips_bandjoin_const1(in, out, c, NULL);
}

static inline int vl_multiply(const VLLibVips *v, VipsImage *left, VipsImage *right, VipsImage **out) {
    return v->vips_multiply(left, right, out, NULL);
}

/* Every page of a multi-page or animated image, stacked top to bottom (n = -1). */
static inline VipsImage *vl_load_named_all_pages(const VLLibVips *v, const char *loader, VipsSource *source,
                                                 VipsAccess access,
                                                 VipsFailOn fail_on) {
    VipsImage *out = NULL;
    return v->vips_call(loader, source, &out, "access", access, "fail_on", fail_on, "n", -1, NULL) ? NULL : out;
}

/* ---- encoding ------------------------------------------------------------ */

/* libvips' built-in sRGB profile (the one decoded pixels are in), as a blob the caller unrefs. */
static inline VipsBlob *vl_srgb_profile(const VLLibVips *v) {
    VipsBlob *profile = NULL;
    return v->vips_profile_load("srgb", &profile, NULL) ? NULL : profile;
}

static inline int vl_jpegsave_options(const VLLibVips *v, VipsImage *in, void **buf, size_t *len, int quality,
                                      gboolean interlace,
                                      VipsForeignSubsample subsample, gboolean strip) {
    return v->vips_jpegsave_buffer(in, buf, len, "Q", quality, "interlace", interlace, "subsample_mode", subsample,
                                "strip", strip, NULL);
}

static inline int vl_pngsave_options(const VLLibVips *v, VipsImage *in, void **buf, size_t *len, int compression,
                                     gboolean palette,
                                     gboolean strip) {
    return v->vips_pngsave_buffer(in, buf, len, "compression", compression, "palette", palette, "strip", strip, NULL);
}

static inline int vl_webpsave_options(const VLLibVips *v, VipsImage *in, void **buf, size_t *len, int quality,
                                      gboolean lossless,
                                      int effort, gboolean strip) {
    return v->vips_webpsave_buffer(in, buf, len, "Q", quality, "lossless", lossless, "effort", effort,
                                "strip", strip, NULL);
}

/* AVIF is HEIF with AV1 compression. */
static inline int vl_avifsave_options(const VLLibVips *v, VipsImage *in, void **buf, size_t *len, int quality,
                                      int effort, gboolean strip) {
    return v->vips_heifsave_buffer(in, buf, len, "Q", quality, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_AV1,
                                "effort", effort, "strip", strip, NULL);
}

static inline int vl_gifsave_options(const VLLibVips *v, VipsImage *in, void **buf, size_t *len, gboolean strip) {
    return v->vips_gifsave_buffer(in, buf, len, "strip", strip, NULL);
}

/* HEIC is HEIF with HEVC compression, 8 bits a sample (as imgproxy saves it). */
static inline int vl_heicsave_options(const VLLibVips *v, VipsImage *in, void **buf, size_t *len, int quality,
                                      int effort, gboolean strip) {
    return v->vips_heifsave_buffer(in, buf, len, "Q", quality, "compression", VIPS_FOREIGN_HEIF_COMPRESSION_HEVC,
                                   "bitdepth", 8, "effort", effort, "strip", strip, NULL);
}

static inline int vl_jxlsave_options(const VLLibVips *v, VipsImage *in, void **buf, size_t *len, int quality,
                                     int effort, gboolean lossless, gboolean strip) {
    return v->vips_jxlsave_buffer(in, buf, len, "Q", quality, "effort", effort, "lossless", lossless,
                                  "strip", strip, NULL);
}

/* TIFF at Q (used by its JPEG compression only; libvips' default compression is none, as imgproxy saves it). */
static inline int vl_tiffsave_options(const VLLibVips *v, VipsImage *in, void **buf, size_t *len, int quality,
                                      gboolean strip) {
    return v->vips_tiffsave_buffer(in, buf, len, "Q", quality, "strip", strip, NULL);
}

#endif
