/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libtrack: write-range tracking for sync and backup programs.
 *
 * One header for the whole library. Every function returns 0 or a
 * positive count on success and a negative errno value on failure; none of
 * them sets errno. Handles are opaque and are released by their _free
 * function. See libtrack(7).
 *
 * The device-mapper part (track_dm_*) is a library of its own,
 * libtrack-dm, with its own header <libtrack/dm.h>: only a client that
 * drives dm-track devices links it (and, through it, libdevmapper and
 * libmnl).
 */
#ifndef LIBTRACK_H
#define LIBTRACK_H

#include <libtrack/version.h>
#include <libtrack/stream.h>
#include <libtrack/watch.h>
#include <libtrack/extents.h>
#include <libtrack/batch.h>
#include <libtrack/dsync.h>

#endif /* LIBTRACK_H */
