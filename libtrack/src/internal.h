/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers shared by libtrack's sources; never installed. */
#ifndef LIBTRACK_INTERNAL_H
#define LIBTRACK_INTERNAL_H

#include <libtrack.h>
#include <libtrack/dm.h>

/* Public symbols are exported explicitly; everything else stays hidden. */
#define TRACK_EXPORT __attribute__((visibility("default")))

#define TRACK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Reserved fields a caller passes in must be zero (room to grow). */
static inline int trk_all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		if (c[i])
			return 0;
	return 1;
}

/* dm.c: parse the status line of a track target. */
int trk_dm_parse_status(const char *line, struct track_dm_status *st);

#endif /* LIBTRACK_INTERNAL_H */
