/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the fanotify and inotify range selftests share: the event reader
 * around each file's next_event(), the write helpers, and the burst
 * machinery that checks the merge rule at the default queue size.
 *
 * The including file defines, before including this header:
 *   struct ev       with at least: uint32_t mask; bool range;
 *                   uint64_t off; uint64_t count;
 *   MODIFY_MASK     its interface's modification bit (FAN_MODIFY, IN_MODIFY)
 * and, anywhere after it:
 *   static int next_event(struct reader *r, struct ev *e, int timeout_ms);
 *                   the next event within TIMEOUT_MS: 1, 0 if none came,
 *                   -1 if malformed
 *   static bool has_report_range(void);
 *   static struct burst *burst_new(void);
 *                   a burst (burst_alloc()) whose two files f0 and f1 in
 *                   b->dir are open as b->fd[] and watched through b->r
 *   static void burst_read(struct burst *b);
 *                   read every queued event, burst_cover() each modification
 */
#ifndef RANGE_TESTS_H
#define RANGE_TESTS_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/aio_abi.h>
#include <liburing.h>

#include "kselftest_harness.h"
#include "vmtest.h"

struct reader {
	int fd;
	char buf[65536] __attribute__((aligned(8)));
	size_t pos, end;
};

static int next_event(struct reader *r, struct ev *e, int timeout_ms);

/* The next modification event, skipping others; 0 if none came. */
static inline int next_modify(struct reader *r, struct ev *e)
{
	int n;

	while ((n = next_event(r, e, 2000)) == 1)
		if (e->mask & MODIFY_MASK)
			return 1;
	return n;
}

static inline void drain(struct reader *r)
{
	struct ev e;

	while (next_event(r, &e, 200) == 1)
		;
}

/* No further modification event may come. */
#define EXPECT_NO_MORE_MODIFY(r) do {					\
	struct ev _e;							\
	while (next_event((r), &_e, 300) == 1)				\
		EXPECT_FALSE(_e.mask & MODIFY_MASK)			\
			TH_LOG("extra modification %llu+%llu",		\
			       (unsigned long long)_e.off,		\
			       (unsigned long long)_e.count);		\
} while (0)

/* What the tests write */
static char fill[65536];

/* One AIO write through the raw syscalls; its result, or -1. */
static inline long aio_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	aio_context_t ctx = 0;
	struct iocb cb = {
		.aio_fildes = fd,
		.aio_lio_opcode = IOCB_CMD_PWRITE,
		.aio_buf = (uintptr_t)buf,
		.aio_nbytes = n,
		.aio_offset = off,
	};
	struct iocb *cbs[1] = { &cb };
	struct io_event ev;
	long ret = -1;

	if (syscall(__NR_io_setup, 4, &ctx))
		return -1;
	if (syscall(__NR_io_submit, ctx, 1, cbs) == 1 &&
	    syscall(__NR_io_getevents, ctx, 1, 1, &ev, NULL) == 1)
		ret = ev.res;
	syscall(__NR_io_destroy, ctx);
	return ret;
}

/* One io_uring write; the result its CQE carries, INT_MIN if none came. */
static inline int uring_pwrite(int fd, const void *buf, unsigned int n,
			       off_t off)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int res = INT_MIN;

	if (io_uring_queue_init(4, &ring, 0))
		return INT_MIN;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_write(sqe, fd, buf, n, off);
	if (io_uring_submit(&ring) == 1 && !io_uring_wait_cqe(&ring, &cqe)) {
		res = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
	}
	io_uring_queue_exit(&ring);
	return res;
}

/* A page that user space may not read: a write from it fails (EFAULT). */
static inline void *unreadable_page(void)
{
	void *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* DIR/src holding LEN bytes of DATA, open read-write; -1 on failure. */
static inline int make_source(const char *dir, const void *data, size_t len)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/src", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0 && write(fd, data, len) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Does the running kernel know file system FS? */
static inline bool fs_supported(const char *fs)
{
	char line[128];
	bool found = false;
	FILE *f = fopen("/proc/filesystems", "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		found = !strcmp(line + strcspn(line, "\t") + 1, fs);
	}
	fclose(f);
	return found;
}

/*
 * The merge rule at the default queue size (16384 events): a burst of
 * writes at scattered offsets must never overflow a queue that the
 * interface without ranges would not overflow, and every block written must
 * be covered by a reported range (or by an event without one).
 */
#define BURST_BLOCKS	4096		/* a 16 MiB file of 4 KiB blocks */

/* Which 4 KiB blocks of 2 files were written, and which reported */
struct burst {
	struct reader r;
	char dir[64];
	int fd[2];
	unsigned char fh[2][128];	/* fanotify: each file's handle */
	unsigned int fh_len[2];
	uint8_t written[2][BURST_BLOCKS];
	uint8_t covered[2][BURST_BLOCKS];
	int events[2];
	int ranged[2];
	bool overflow;
	uint64_t rnd;
};

static inline uint32_t burst_random(struct burst *b)
{
	b->rnd ^= b->rnd << 13;
	b->rnd ^= b->rnd >> 7;
	b->rnd ^= b->rnd << 17;
	return b->rnd >> 11;
}

/* A burst with its directory made from TEMPLATE, nothing watched yet */
static inline struct burst *burst_alloc(const char *template)
{
	struct burst *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->rnd = 0x9e3779b97f4a7c15ULL;
	b->r.fd = -1;
	b->fd[0] = -1;
	b->fd[1] = -1;
	snprintf(b->dir, sizeof(b->dir), "%s", template);
	if (!mkdtemp(b->dir)) {
		free(b);
		return NULL;
	}
	return b;
}

/* N writes of 4 KiB at random block offsets of file F */
static inline bool burst_write(struct burst *b, int f, int n)
{
	while (n--) {
		uint32_t blk = burst_random(b) % BURST_BLOCKS;

		if (pwrite(b->fd[f], fill, 4096, (off_t)blk * 4096) != 4096)
			return false;
		b->written[f][blk] = 1;
	}
	return true;
}

/* A modification of file F was read: mark what it reports */
static inline void burst_cover(struct burst *b, int f, const struct ev *e)
{
	uint64_t blk;

	b->events[f]++;
	if (!e->range) {
		memset(b->covered[f], 1, BURST_BLOCKS);
		return;
	}
	b->ranged[f]++;
	for (blk = e->off / 4096;
	     blk < BURST_BLOCKS && blk * 4096 < e->off + e->count; blk++)
		b->covered[f][blk] = 1;
}

/* Blocks written that no event reported */
static inline int burst_missed(struct burst *b, int f)
{
	int blk, missed = 0;

	for (blk = 0; blk < BURST_BLOCKS; blk++)
		missed += b->written[f][blk] && !b->covered[f][blk];
	return missed;
}

static inline void burst_free(struct burst *b)
{
	if (!b)
		return;
	if (b->fd[0] >= 0)
		close(b->fd[0]);
	if (b->fd[1] >= 0)
		close(b->fd[1]);
	if (b->r.fd >= 0)
		close(b->r.fd);
	vm_run("rm -rf %s", b->dir);
	free(b);
}

static bool has_report_range(void);
static struct burst *burst_new(void);
static void burst_read(struct burst *b);

/* Bursts under TCG and KASAN take minutes: the default 30 s is too short. */
FIXTURE(burst) {
	struct burst *b;
};

FIXTURE_SETUP(burst)
{
	if (!has_report_range())
		SKIP(return, "this kernel has no range reporting");
	self->b = burst_new();
	ASSERT_NE(NULL, self->b);
}

FIXTURE_TEARDOWN(burst)
{
	burst_free(self->b);
}

#endif /* RANGE_TESTS_H */
