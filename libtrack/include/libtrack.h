/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libtrack: write-range tracking for sync and backup programs.
 *
 * One header for the whole library. Every function returns 0 or a
 * positive count on success and a negative errno value on failure; none of
 * them sets errno. Handles are opaque and are released by their _close or
 * _free function.
 */
#ifndef LIBTRACK_H
#define LIBTRACK_H

#include <libtrack/version.h>
#include <libtrack/dm.h>
#include <libtrack/stream.h>
#include <libtrack/watch.h>
#include <libtrack/batch.h>

#endif /* LIBTRACK_H */
