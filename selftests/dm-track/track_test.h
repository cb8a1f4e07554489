/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers for the dm-track selftests: create a device, write to it, and
 * read its dirty sets back as a list of extents.
 */
#ifndef TRACK_TEST_H
#define TRACK_TEST_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <libtrack.h>
#include <libtrack/dm.h>

#include "vmtest.h"

/*
 * Each test gets 5 minutes, not the harness's 30 s: under TCG and KASAN,
 * with other QEMUs and the host tests sharing two CPUs, a test that runs
 * dmsetup forty times can take a minute. tests.list bounds each program.
 */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 300

#define TT_NAME "lt-track"
#define TT_PATH "/dev/mapper/" TT_NAME

struct tt_extents {
	size_t n, cap;
	struct { uint64_t first, count; } *e;
};

static inline int tt_collect(uint64_t first, uint64_t count, void *arg)
{
	struct tt_extents *x = arg;

	if (x->n == x->cap) {
		x->cap = x->cap ? 2 * x->cap : 64;
		x->e = realloc(x->e, x->cap * sizeof(*x->e));
		if (!x->e)
			return -ENOMEM;
	}
	x->e[x->n].first = first;
	x->e[x->n].count = count;
	x->n++;
	return 0;
}

/* Read SET of device NAME; returns -errno or 0. X is reset first. */
static inline int tt_extents(const char *name, enum track_dm_set set,
			     struct tt_extents *x)
{
	struct track_dm *dm;
	int r;

	x->n = 0;
	r = track_dm_open(name, &dm);
	if (r)
		return r;
	r = track_dm_for_each_extent(dm, set, tt_collect, x);
	track_dm_free(dm);
	return r;
}

static inline uint64_t tt_blocks(const struct tt_extents *x)
{
	uint64_t n = 0;
	size_t i;

	for (i = 0; i < x->n; i++)
		n += x->e[i].count;
	return n;
}

/* Is BLOCK in the extents? */
static inline int tt_has(const struct tt_extents *x, uint64_t block)
{
	size_t i;

	for (i = 0; i < x->n; i++)
		if (block >= x->e[i].first &&
		    block < x->e[i].first + x->e[i].count)
			return 1;
	return 0;
}

/* The extents as text, for failure messages. */
static inline const char *tt_str(const struct tt_extents *x)
{
	static char buf[512];
	size_t i, n = 0;

	buf[0] = 0;
	for (i = 0; i < x->n && n < sizeof(buf) - 48; i++)
		n += snprintf(buf + n, sizeof(buf) - n, "%s%" PRIu64 "+%" PRIu64,
			      i ? " " : "", x->e[i].first, x->e[i].count);
	if (i < x->n)
		snprintf(buf + n, sizeof(buf) - n, " ...");
	return buf;
}

static inline int tt_status(const char *name, struct track_dm_status *st)
{
	struct track_dm *dm;
	int r = track_dm_open(name, &dm);

	if (r)
		return r;
	r = track_dm_get_status(dm, st);
	track_dm_free(dm);
	return r;
}

static inline int tt_message(const char *name, const char *msg)
{
	return vm_run("dmsetup message %s 0 %s >/dev/null 2>&1", name, msg);
}

static inline void tt_remove(const char *name)
{
	vm_run("dmsetup remove --noudevsync %s 2>/dev/null", name);
}

/* Write LEN bytes of a pattern at OFF of PATH with FLAGS (e.g. O_DIRECT). */
static inline int tt_pwrite(const char *path, int flags, uint64_t off,
			    size_t len)
{
	void *buf;
	ssize_t n;
	int fd;

	if (posix_memalign(&buf, 4096, len ? len : 1))
		return -ENOMEM;
	vm_fill(buf, len, 7, off);
	fd = open(path, O_WRONLY | flags);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	n = pwrite(fd, buf, len, off);
	if (n == (ssize_t)len && fsync(fd))
		n = -1;
	close(fd);
	free(buf);
	return n == (ssize_t)len ? 0 : -EIO;
}

/* Skip unless the kernel has the track target. */
#define TT_REQUIRE_TARGET()						\
	do {								\
		if (!vm_dm_target_present("track"))			\
			SKIP(return, "no dm-track target in this kernel"); \
	} while (0)

#endif /* TRACK_TEST_H */
