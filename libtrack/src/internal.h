/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers shared by libtrack's sources; never installed. */
#ifndef LIBTRACK_INTERNAL_H
#define LIBTRACK_INTERNAL_H

#include <libtrack.h>
#include <libtrack/dm.h>

/* Public symbols are exported explicitly; everything else stays hidden. */
#define TRACK_EXPORT __attribute__((visibility("default")))

#define TRACK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* dm.c: parse the status line of a track target. */
int trk_dm_parse_status(const char *line, struct track_dm_status *st);

#endif /* LIBTRACK_INTERNAL_H */
