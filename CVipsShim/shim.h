/*
 * CVipsShim: the C boundary of VipsLoad.
 *
 * Swift cannot call C variadic functions, and most of libvips' API is
 * variadic (NULL-terminated name/value option lists) or macros. Each wrapper
 * here fixes one such call to a typed, non-variadic signature and does
 * nothing else: every decision (which options, when, why) is made in Swift.
 */
#ifndef CVIPS_SHIM_H
#define CVIPS_SHIM_H

#include <vips/vips.h>
/* mallopt and its M_* constants, for VipsRuntime.tuneAllocatorForImageWork (glibc). */
#include <malloc.h>

/* ---- threads ------------------------------------------------------------- */

/* pthread_setname_np is a GNU extension: <pthread.h> declares it only under
   _GNU_SOURCE, which Swift's Glibc module is not built with, so Swift cannot
   see it. Declared here (glibc has exported it since 2.12); remove once the
   Glibc module exposes it. The kernel keeps at most 15 bytes of a name. */
#include <pthread.h>
extern int pthread_setname_np(pthread_t thread, const char *name);
static inline int vl_set_current_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }

/* VIPS_INIT is a macro (ABI check + vips_init). */
static inline int vl_init(const char *argv0) { return VIPS_INIT(argv0); }

/* ---- loading (header only until pixels are asked for) ------------------ */

/* Load with one named loader (e.g. "jpegload_source"), never libvips' own
   guess from the bytes: the guess falls back to other loaders (ImageMagick
   among them) when the expected one rejects the data. */
static inline VipsImage *vl_load_named(const char *loader, VipsSource *source, VipsAccess access, VipsFailOn fail_on) {
    VipsImage *out = NULL;
    return vips_call(loader, source, &out, "access", access, "fail_on", fail_on, NULL) ? NULL : out;
}

/* JPEG: decode at 1/shrink in the DCT domain (shrink is 1, 2, 4 or 8). */
static inline VipsImage *vl_load_named_shrink(const char *loader, VipsSource *source, VipsAccess access,
                                              VipsFailOn fail_on, int shrink) {
    VipsImage *out = NULL;
    return vips_call(loader, source, &out, "access", access, "fail_on", fail_on, "shrink", shrink, NULL) ? NULL : out;
}

/* WebP: decode directly at any scale. */
static inline VipsImage *vl_load_named_scale(const char *loader, VipsSource *source, VipsAccess access,
                                             VipsFailOn fail_on, double scale) {
    VipsImage *out = NULL;
    return vips_call(loader, source, &out, "access", access, "fail_on", fail_on, "scale", scale, NULL) ? NULL : out;
}

/* ---- processing ---------------------------------------------------------- */

static inline int vl_thumbnail_image(VipsImage *in, VipsImage **out, int width, int height, VipsSize size,
                                     gboolean no_rotate) {
    return vips_thumbnail_image(in, out, width, "height", height, "size", size, "no_rotate", no_rotate, NULL);
}

static inline int vl_resize_kernel(VipsImage *in, VipsImage **out, double hscale, double vscale, VipsKernel kernel) {
    return vips_resize(in, out, hscale, "vscale", vscale, "kernel", kernel, NULL);
}

static inline int vl_shrink(VipsImage *in, VipsImage **out, double hshrink, double vshrink) {
    return vips_shrink(in, out, hshrink, vshrink, NULL);
}

static inline int vl_premultiply(VipsImage *in, VipsImage **out) {
    return vips_premultiply(in, out, NULL);
}

static inline int vl_unpremultiply(VipsImage *in, VipsImage **out) {
    return vips_unpremultiply(in, out, NULL);
}

static inline int vl_flatten(VipsImage *in, VipsImage **out, const double *background, int n) {
    VipsArrayDouble *colour = vips_array_double_new(background, n);
    int status = vips_flatten(in, out, "background", colour, NULL);
    vips_area_unref(VIPS_AREA(colour));
    return status;
}

static inline VipsPel *vl_region_addr(VipsRegion *region, int x, int y) {
    return VIPS_REGION_ADDR(region, x, y);
}

static inline int vl_colourspace(VipsImage *in, VipsImage **out, VipsInterpretation space) {
    return vips_colourspace(in, out, space, NULL);
}

/* Cast with bit shifting, so 16-bit 65535 becomes 8-bit 255 rather than clipping. */
static inline int vl_cast_shift(VipsImage *in, VipsImage **out, VipsBandFormat format) {
    return vips_cast(in, out, format, "shift", TRUE, NULL);
}

static inline int vl_cast(VipsImage *in, VipsImage **out, VipsBandFormat format) {
    return vips_cast(in, out, format, NULL);
}

static inline int vl_extract_bands(VipsImage *in, VipsImage **out, int first, int count) {
    return vips_extract_band(in, out, first, "n", count, NULL);
}

static inline int vl_copy_interpretation(VipsImage *in, VipsImage **out, VipsInterpretation interpretation) {
    return vips_copy(in, out, "interpretation", interpretation, NULL);
}

static inline int vl_icc_transform(VipsImage *in, VipsImage **out, const char *output_profile,
                                   const char *input_profile) {
    return vips_icc_transform(in, out, output_profile, "input_profile", input_profile, NULL);
}

/* Import with the image's embedded profile, export to output_profile (e.g. "srgb"),
   8-bit, relative colorimetric: what `vips icc_transform IN OUT srgb --embedded` does. */
static inline int vl_icc_transform_embedded(VipsImage *in, VipsImage **out, const char *output_profile) {
    return vips_icc_transform(in, out, output_profile, "embedded", TRUE, "depth", 8, NULL);
}

static inline int vl_linear1(VipsImage *in, VipsImage **out, double a, double b) {
    return vips_linear1(in, out, a, b, NULL);
}

static inline int vl_add(VipsImage *left, VipsImage *right, VipsImage **out) {
    return vips_add(left, right, out, NULL);
}

static inline int vl_bandjoin2(VipsImage *a, VipsImage *b, VipsImage **out) {
    return vips_bandjoin2(a, b, out, NULL);
}

static inline int vl_draw_rect(VipsImage *image, double *ink, int n, int left, int top, int width, int height) {
    return vips_draw_rect(image, ink, n, left, top, width, height, "fill", TRUE, NULL);
}

/* ---- synthesis (generated test and benchmark images) --------------------- */

static inline int vl_perlin(VipsImage **out, int width, int height, int cell_size, int seed) {
    return vips_perlin(out, width, height, "cell_size", cell_size, "seed", seed, NULL);
}

static inline int vl_gaussnoise(VipsImage **out, int width, int height, double mean, double sigma, int seed) {
    return vips_gaussnoise(out, width, height, "mean", mean, "sigma", sigma, "seed", seed, NULL);
}

static inline int vl_more_const1(VipsImage *in, VipsImage **out, double c) {
    return vips_moreeq_const1(in, out, c, NULL);
}

static inline int vl_bandjoin3(VipsImage *a, VipsImage *b, VipsImage *c, VipsImage **out) {
    VipsImage *in[3] = {a, b, c};
    return vips_bandjoin(in, out, 3, NULL);
}

/* ---- encoding (the savers with their options are in process.h) ----------- */

/* Any saver chosen by suffix and option string, e.g. ".png[bitdepth=16,interlace]". */
static inline int vl_write_to_buffer(VipsImage *in, const char *suffix, void **buf, size_t *len) {
    return vips_image_write_to_buffer(in, suffix, buf, len, NULL);
}

/* vips_vector_set_enabled, for VipsRuntime to switch ORC off (not in vips.h). */
#include <vips/vector.h>

#endif
