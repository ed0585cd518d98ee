/*
 * CGLib: GLib's HMAC (GHmac) and checksums (GChecksum), for VipsServe's URL
 * signatures (URLSigningKey) and strong ETags (RepresentationKey).
 *
 * Why a module of its own: GLib is in every VipsLoad process already (libvips
 * and GObject link it), so its SHA-256 costs no new library, and the server
 * reaches it here rather than through CVipsShim, the libvips boundary, which
 * only the decode core imports. GLib allows <glib.h> alone to be included (not
 * <glib/ghmac.h>), so the whole of it is visible; the server calls
 * g_hmac_* and g_compute_checksum_for_string only. Swift calls them directly:
 * nothing is wrapped here.
 */
#ifndef CGLIB_SHIM_H
#define CGLIB_SHIM_H

#include <glib.h>

#endif
