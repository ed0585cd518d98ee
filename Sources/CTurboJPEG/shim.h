/*
 * CTurboJPEG: libjpeg-turbo's TurboJPEG API for VipsCore's direct JPEG path.
 *
 * libjpeg's own API reports errors by longjmp from an error callback, which
 * Swift code cannot survive; TurboJPEG catches them itself and returns -1
 * with an error code (warning or fatal) and a message, so Swift can call it
 * directly. Nothing is wrapped: every decision is made in Swift.
 */
#ifndef CTURBOJPEG_SHIM_H
#define CTURBOJPEG_SHIM_H

#include <turbojpeg.h>

#endif
