/*
 * CVipsShim: the C boundary of VipsLoad.
 *
 * Swift cannot call C variadic functions, and most of libvips' API is
 * variadic (NULL-terminated name/value option lists) or macros. Each wrapper
 * here fixes one such call to a typed, non-variadic signature and does
 * nothing else: every decision (which options, when, why) is made in Swift.
 * libvips is not linked (see libvips.h): a wrapper calls it through the
 * table it is handed, `v`.
 */
#ifndef CVIPS_SHIM_H
#define CVIPS_SHIM_H

#include "libvips.h"
/* mallopt and its M_* constants, for VipsRuntime.tuneAllocatorForImageWork (glibc). */
#include <malloc.h>

/* ---- loading (header only until pixels are asked for) ------------------ */

/* Load with one named loader (e.g. "jpegload_source"), never libvips' own
   guess from the bytes: the guess falls back to other loaders (ImageMagick
   among them) when the expected one rejects the data. */
static inline VipsImage *vl_load_named(const VLLibVips *v, const char *loader, VipsSource *source, VipsAccess access,
                                       VipsFailOn fail_on) {
    VipsImage *out = NULL;
    return v->vips_call(loader, source, &out, "access", access, "fail_on", fail_on, NULL) ? NULL : out;
}

/* JPEG: decode at 1/shrink in the DCT domain (shrink is 1, 2, 4 or 8). */
static inline VipsImage *vl_load_named_shrink(const VLLibVips *v, const char *loader, VipsSource *source,
                                              VipsAccess access,
                                              VipsFailOn fail_on, int shrink) {
    VipsImage *out = NULL;
    return v->vips_call(loader, source, &out, "access", access, "fail_on", fail_on, "shrink", shrink,
                        NULL) ? NULL : out;
}

/* WebP: decode directly at any scale. */
static inline VipsImage *vl_load_named_scale(const VLLibVips *v, const char *loader, VipsSource *source,
                                             VipsAccess access,
                                             VipsFailOn fail_on, double scale) {
    VipsImage *out = NULL;
    return v->vips_call(loader, source, &out, "access", access, "fail_on", fail_on, "scale", scale, NULL) ? NULL : out;
}

/* ---- processing ---------------------------------------------------------- */

static inline int vl_thumbnail_image(const VLLibVips *v, VipsImage *in, VipsImage **out, int width, int height,
                                     VipsSize size,
                                     gboolean no_rotate) {
    return v->vips_thumbnail_image(in, out, width, "height", height, "size", size, "no_rotate", no_rotate, NULL);
}

static inline int vl_resize_kernel(const VLLibVips *v, VipsImage *in, VipsImage **out, double hscale, double vscale,
                                   VipsKernel kernel) {
    return v->vips_resize(in, out, hscale, "vscale", vscale, "kernel", kernel, NULL);
}

static inline int vl_shrink(const VLLibVips *v, VipsImage *in, VipsImage **out, double hshrink, double vshrink) {
    return v->vips_shrink(in, out, hshrink, vshrink, NULL);
}

static inline int vl_premultiply(const VLLibVips *v, VipsImage *in, VipsImage **out) {
    return v->vips_premultiply(in, out, NULL);
}

static inline int vl_unpremultiply(const VLLibVips *v, VipsImage *in, VipsImage **out) {
    return v->vips_unpremultiply(in, out, NULL);
}

static inline int vl_flatten(const VLLibVips *v, VipsImage *in, VipsImage **out, const double *background, int n) {
    VipsArrayDouble *colour = v->vips_array_double_new(background, n);
    int status = v->vips_flatten(in, out, "background", colour, NULL);
    v->vips_area_unref(VIPS_AREA(colour));
    return status;
}

/* VIPS_REGION_ADDR, spelled out: its pixel size is a libvips call. */
static inline VipsPel *vl_region_addr(const VLLibVips *v, VipsRegion *region, int x, int y) {
    size_t pixel = (size_t)v->vips_format_sizeof_unsafe(region->im->BandFmt) * (size_t)region->im->Bands;
    return region->data + (size_t)(y - region->valid.top) * VIPS_REGION_LSKIP(region) +
           (size_t)(x - region->valid.left) * pixel;
}

static inline int vl_colourspace(const VLLibVips *v, VipsImage *in, VipsImage **out, VipsInterpretation space) {
    return v->vips_colourspace(in, out, space, NULL);
}

/* Cast with bit shifting, so 16-bit 65535 becomes 8-bit 255 rather than clipping. */
static inline int vl_cast_shift(const VLLibVips *v, VipsImage *in, VipsImage **out, VipsBandFormat format) {
    return v->vips_cast(in, out, format, "shift", TRUE, NULL);
}

static inline int vl_cast(const VLLibVips *v, VipsImage *in, VipsImage **out, VipsBandFormat format) {
    return v->vips_cast(in, out, format, NULL);
}

static inline int vl_extract_bands(const VLLibVips *v, VipsImage *in, VipsImage **out, int first, int count) {
    return v->vips_extract_band(in, out, first, "n", count, NULL);
}

static inline int vl_copy_interpretation(const VLLibVips *v, VipsImage *in, VipsImage **out,
                                         VipsInterpretation interpretation) {
    return v->vips_copy(in, out, "interpretation", interpretation, NULL);
}

static inline int vl_icc_transform(const VLLibVips *v, VipsImage *in, VipsImage **out, const char *output_profile,
                                   const char *input_profile) {
    return v->vips_icc_transform(in, out, output_profile, "input_profile", input_profile, NULL);
}

/* Import with the image's embedded profile, export to output_profile (e.g. "srgb"),
   8-bit, relative colorimetric: what `vips icc_transform IN OUT srgb --embedded` does. */
static inline int vl_icc_transform_embedded(const VLLibVips *v, VipsImage *in, VipsImage **out,
                                            const char *output_profile) {
    return v->vips_icc_transform(in, out, output_profile, "embedded", TRUE, "depth", 8, NULL);
}

static inline int vl_linear1(const VLLibVips *v, VipsImage *in, VipsImage **out, double a, double b) {
    return v->vips_linear1(in, out, a, b, NULL);
}

static inline int vl_add(const VLLibVips *v, VipsImage *left, VipsImage *right, VipsImage **out) {
    return v->vips_add(left, right, out, NULL);
}

static inline int vl_bandjoin2(const VLLibVips *v, VipsImage *a, VipsImage *b, VipsImage **out) {
    return v->vips_bandjoin2(a, b, out, NULL);
}

static inline int vl_draw_rect(const VLLibVips *v, VipsImage *image, double *ink, int n, int left, int top, int width,
                               int height) {
    return v->vips_draw_rect(image, ink, n, left, top, width, height, "fill", TRUE, NULL);
}

/* ---- synthesis (generated test and benchmark images) --------------------- */

static inline int vl_perlin(const VLLibVips *v, VipsImage **out, int width, int height, int cell_size, int seed) {
    return v->vips_perlin(out, width, height, "cell_size", cell_size, "seed", seed, NULL);
}

static inline int vl_gaussnoise(const VLLibVips *v, VipsImage **out, int width, int height, double mean, double sigma,
                                int seed) {
    return v->vips_gaussnoise(out, width, height, "mean", mean, "sigma", sigma, "seed", seed, NULL);
}

static inline int vl_more_const1(const VLLibVips *v, VipsImage *in, VipsImage **out, double c) {
    return v->vips_moreeq_const1(in, out, c, NULL);
}

static inline int vl_bandjoin3(const VLLibVips *v, VipsImage *a, VipsImage *b, VipsImage *c, VipsImage **out) {
    VipsImage *in[3] = {a, b, c};
    return v->vips_bandjoin(in, out, 3, NULL);
}

/* ---- encoding (the savers with their options are in process.h) ----------- */

/* Any saver chosen by suffix and option string, e.g. ".png[bitdepth=16,interlace]". */
static inline int vl_write_to_buffer(const VLLibVips *v, VipsImage *in, const char *suffix, void **buf, size_t *len) {
    return v->vips_image_write_to_buffer(in, suffix, buf, len, NULL);
}

#endif
