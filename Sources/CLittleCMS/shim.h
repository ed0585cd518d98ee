/*
 * CLittleCMS: Little CMS 2 for VipsCore's sRGB-profile check (ICCProfile).
 *
 * libvips converts embedded profiles with Little CMS; the check that decides
 * whether a profile is sRGB (so the pixels need no conversion) reads the
 * profile with the same library. Nothing is wrapped: every call is a plain C
 * function, and every decision is made in Swift.
 */
#ifndef CLITTLECMS_SHIM_H
#define CLITTLECMS_SHIM_H

#include <lcms2.h>

#endif
