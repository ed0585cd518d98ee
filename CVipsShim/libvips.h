/*
 * CVipsShim/libvips.h: libvips opened at run time (dlopen), not linked.
 *
 * Why: a process linked with Debian 12's libvips loads it and the ~100 shared
 * libraries it needs (ImageMagick's and poppler's stacks, HDF5, OpenEXR,
 * cairo, ...) before main, about 25 ms of CPU and 1,400 page faults, though
 * VipsLoad's direct JPEG, PNG and WebP paths never call libvips. So VipsCore's
 * `LibVips` opens the library when the first image needs it and binds this
 * table; the wrappers in shim.h and process.h and VipsCore's direct calls all
 * go through it. Swift decides which file to open and what a failure means.
 *
 * Remove (and link "vips" in module.modulemap again) if libvips becomes cheap
 * to load: a build without the heavy optional loaders, or its loaders as
 * modules, as libvips 8.13+ can do for some of them.
 *
 * Every libvips function VipsLoad calls is listed once here; a call to one
 * not listed fails to link, since nothing links libvips.
 */
#ifndef CVIPS_LIBVIPS_H
#define CVIPS_LIBVIPS_H

#include <dlfcn.h>
#include <vips/vips.h>
/* vips_vector_set_enabled, for VipsRuntime to switch ORC off (not in vips.h). */
#include <vips/vector.h>

#define VL_LIBVIPS_FUNCTIONS(X) \
    X(vips_add) \
    X(vips_area_unref) \
    X(vips_array_double_new) \
    X(vips_bandjoin) \
    X(vips_bandjoin2) \
    X(vips_bandjoin_const1) \
    X(vips_blob_get) \
    X(vips_block_untrusted_set) \
    X(vips_cache_set_max) \
    X(vips_cache_set_max_files) \
    X(vips_cache_set_max_mem) \
    X(vips_call) \
    X(vips_cast) \
    X(vips_colourspace) \
    X(vips_composite2) \
    X(vips_concurrency_set) \
    X(vips_copy) \
    X(vips_draw_rect) \
    X(vips_embed) \
    X(vips_error) \
    X(vips_error_buffer_copy) \
    X(vips_error_clear) \
    X(vips_extract_area) \
    X(vips_extract_band) \
    X(vips_find_trim) \
    X(vips_flatten) \
    X(vips_flip) \
    X(vips_format_sizeof_unsafe) \
    X(vips_gaussblur) \
    X(vips_gaussnoise) \
    X(vips_gifsave_buffer) \
    X(vips_gravity) \
    X(vips_heifsave_buffer) \
    X(vips_icc_transform) \
    X(vips_image_copy_memory) \
    X(vips_image_get_array_int) \
    X(vips_image_get_bands) \
    X(vips_image_get_blob) \
    X(vips_image_get_format) \
    X(vips_image_get_height) \
    X(vips_image_get_int) \
    X(vips_image_get_interpretation) \
    X(vips_image_get_page_height) \
    X(vips_image_get_string) \
    X(vips_image_get_typeof) \
    X(vips_image_get_width) \
    X(vips_image_hasalpha) \
    X(vips_image_new_from_memory) \
    X(vips_image_new_from_memory_copy) \
    X(vips_image_set_array_int) \
    X(vips_image_set_blob_copy) \
    X(vips_image_set_int) \
    X(vips_image_set_kill) \
    X(vips_image_write_to_buffer) \
    X(vips_init) \
    X(vips_jpegsave_buffer) \
    X(vips_jxlsave_buffer) \
    X(vips_linear) \
    X(vips_linear1) \
    X(vips_moreeq_const1) \
    X(vips_multiply) \
    X(vips_object_map) \
    X(vips_operation_block_set) \
    X(vips_perlin) \
    X(vips_pngsave_buffer) \
    X(vips_premultiply) \
    X(vips_profile_load) \
    X(vips_region_new) \
    X(vips_region_prepare) \
    X(vips_resize) \
    X(vips_rot) \
    X(vips_sharpen) \
    X(vips_shrink) \
    X(vips_smartcrop) \
    X(vips_source_new_from_file) \
    X(vips_source_new_from_memory) \
    X(vips_thumbnail_image) \
    X(vips_tiffsave_buffer) \
    X(vips_type_find) \
    X(vips_unpremultiply) \
    X(vips_vector_set_enabled) \
    X(vips_version) \
    X(vips_webpsave_buffer) \
    X(vips_zoom)

/* One field per function, named as the function, typed as its declaration.
   Non-null: a table is only used once vl_libvips_bind filled every field. */
#define VL_LIBVIPS_FIELD(name) __typeof__(&name) _Nonnull name;
typedef struct VLLibVips {
    VL_LIBVIPS_FUNCTIONS(VL_LIBVIPS_FIELD)
} VLLibVips;
#undef VL_LIBVIPS_FIELD

/* Fills table from handle (dlopen's). NULL when every function was found,
   else the name of the first one missing: the table must not be used. */
static inline const char *vl_libvips_bind(VLLibVips *table, void *handle) {
#define VL_LIBVIPS_BIND(name) \
    if ((table->name = (__typeof__(&name))dlsym(handle, #name)) == NULL) return #name;
    VL_LIBVIPS_FUNCTIONS(VL_LIBVIPS_BIND)
#undef VL_LIBVIPS_BIND
    return NULL;
}

/* VIPS_INIT through the table: the macro's ABI check, then vips_init. */
static inline int vl_init(const VLLibVips *v, const char *argv0) {
    if (v->vips_version(3) - v->vips_version(5) != VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE) {
        v->vips_error("vips_init", "ABI mismatch: libvips has ABI version %d, VipsLoad was built for %d",
                      v->vips_version(3) - v->vips_version(5), VIPS_LIBRARY_CURRENT - VIPS_LIBRARY_AGE);
        return -1;
    }
    return v->vips_init(argv0);
}

#endif
