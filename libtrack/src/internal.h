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

/* io.c: the dsync engine's helpers. pread()/pwrite() all of it or fail
 * (-errno, -EIO at the end of the file); the size of a block device or
 * regular file (-ENOTBLK for anything else); "1.5 GiB"; a decimal. */
int trk_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
int trk_pread_all(int fd, void *buf, size_t len, uint64_t off);
int trk_fd_size(int fd, uint64_t *size);
const char *trk_human(uint64_t bytes, char *buf, size_t len);
int trk_parse_u64(const char *s, uint64_t *v);

#endif /* LIBTRACK_INTERNAL_H */
