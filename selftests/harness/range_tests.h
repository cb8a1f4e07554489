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
 *   static int reissue_watch(const char *dir, const char *file);
 *                   a reader fd watching FILE (in directory DIR) for
 *                   modifications, -1 on failure
 */
#ifndef RANGE_TESTS_H
#define RANGE_TESTS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
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

/*
 * Has this task an io-wq worker ("iou-wrk-<tid>")? A worker exists once
 * io_uring has punted a request to io-wq, and lingers idle for seconds.
 */
static inline bool has_io_wq_worker(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	bool found = false;

	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		char path[300], comm[32] = "";
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		found = fgets(comm, sizeof(comm), f) &&
			!strncmp(comm, "iou-wrk-", 8);
		fclose(f);
	}
	closedir(d);
	return found;
}

/*
 * One io_uring write; the result its CQE carries, INT_MIN if none came.
 * *PUNTED, if not NULL, says whether io_uring had handed it to io-wq by
 * the time its CQE came.
 */
static inline int uring_pwrite_punted(int fd, const void *buf, unsigned int n,
				      off_t off, bool *punted)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	int res = INT_MIN;

	if (punted)
		*punted = false;
	if (io_uring_queue_init(4, &ring, 0))
		return INT_MIN;
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_write(sqe, fd, buf, n, off);
	if (io_uring_submit(&ring) == 1 && !io_uring_wait_cqe(&ring, &cqe)) {
		res = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		if (punted)
			*punted = has_io_wq_worker();
	}
	io_uring_queue_exit(&ring);
	return res;
}

static inline int uring_pwrite(int fd, const void *buf, unsigned int n,
			       off_t off)
{
	return uring_pwrite_punted(fd, buf, n, off, NULL);
}

/*
 * A request io-wq ran may hold its file until the worker next runs its task
 * work (fput() from an io-wq worker is task work, and an idle worker sleeps
 * 5 s between rounds), so a file system or device it wrote is busy for a
 * few seconds after the test closed everything. Retry for up to 10 s.
 */
static inline int umount_retry(const char *dir)
{
	int i;

	for (i = 0; i < 100; i++) {
		if (!umount(dir) || errno != EBUSY)
			return 0;
		usleep(100000);
	}
	return -1;
}

static inline int dm_remove_retry(const char *name)
{
	int i;

	for (i = 0; i < 100; i++) {
		if (!vm_run("dmsetup remove --noudevsync %s 2>/dev/null", name))
			return 0;
		if (vm_run("dmsetup info %s >/dev/null 2>&1", name))
			return 0;
		usleep(100000);
	}
	return -1;
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

/*
 * A write that io_uring reissues after -EAGAIN or -EOPNOTSUPP. A block
 * device file opened while the device takes nowait I/O has FMODE_NOWAIT
 * (bdev_file_open_by_dev()). Once dm swaps in a table whose target cannot
 * take nowait I/O (dm-delay has no DM_TARGET_NOWAIT), io_uring still
 * issues a direct write with IOCB_NOWAIT, and submit_bio_noacct() fails
 * its REQ_NOWAIT bio with BLK_STS_NOTSUPP in the submitting task.
 * blkdev_bio_end_io_async() passes -EOPNOTSUPP to io_complete_rw(), whose
 * __io_complete_rw_common() marks the request REQ_F_REISSUE (not yet
 * completed) and io_write() returns -EAGAIN; io-wq then writes it again,
 * without IOCB_NOWAIT, and that write completes and reports.
 *
 * The device, over the first MiB of VM_DISK_D, is reached through a node
 * "file" in a directory of its own, so both interfaces watch it as a file.
 */
#define REISSUE_DM "lt-range-reissue"

static int reissue_watch(const char *dir, const char *file);

FIXTURE(reissue) {
	char dir[64];
	char file[128];
	struct reader r;
	int fd;
	void *buf;
};

FIXTURE_SETUP(reissue)
{
	struct stat st;

	self->r.fd = -1;
	self->fd = -1;
	if (!has_report_range())
		SKIP(return, "this kernel has no range reporting");
	if (!vm_dm_target_present("linear") || !vm_dm_target_present("delay"))
		SKIP(return, "this kernel has no dm-linear or dm-delay");
	vm_run("dmsetup remove --noudevsync " REISSUE_DM " 2>/dev/null");
	ASSERT_EQ(0, vm_run("echo '0 2048 linear %s 0' | "
			    "dmsetup create --noudevsync " REISSUE_DM,
			    VM_DISK_D));
	strcpy(self->dir, "/tmp/range-reissue.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	snprintf(self->file, sizeof(self->file), "%s/file", self->dir);
	ASSERT_EQ(0, stat("/dev/mapper/" REISSUE_DM, &st));
	ASSERT_EQ(0, mknod(self->file, S_IFBLK | 0600, st.st_rdev));
	self->fd = open(self->file, O_RDWR | O_DIRECT);
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, posix_memalign(&self->buf, 4096, 4096));
	memset(self->buf, 'r', 4096);
	self->r.fd = reissue_watch(self->dir, self->file);
	ASSERT_LE(0, self->r.fd);
}

FIXTURE_TEARDOWN(reissue)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->r.fd >= 0)
		close(self->r.fd);
	free(self->buf);
	dm_remove_retry(REISSUE_DM);
	vm_run("rm -rf %s", self->dir);
}

/* Swap in the table without nowait support; the open file keeps its flag. */
static inline int reissue_swap_table(void)
{
	return vm_run("echo '0 2048 delay %s 0 0' | "
		      "dmsetup load " REISSUE_DM " && "
		      "dmsetup resume --noudevsync " REISSUE_DM, VM_DISK_D);
}

#endif /* RANGE_TESTS_H */
