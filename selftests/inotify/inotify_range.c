// SPDX-License-Identifier: GPL-2.0
/*
 * inotify with IN_REPORT_RANGE: every write path reports exactly the bytes
 * it changed, events merge when their ranges overlap or touch and widen
 * rather than overflow a queue plain inotify would not overflow, the queue
 * still overflows into IN_Q_OVERFLOW, and an instance without the flag
 * sees the upstream format. Skips on a kernel without the flag.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <fcntl.h>
/* <fcntl.h> has what <linux/inotify.h> wants of <linux/fcntl.h> */
#define _LINUX_FCNTL_H
#include <linux/inotify.h>
#include <liburing.h>

#include "kselftest_harness.h"
#include "vmtest.h"

#ifndef IN_REPORT_RANGE
#error "build against the patched kernel's uapi headers"
#endif

/* glibc's <sys/inotify.h> would clash with the uapi header */
int inotify_init1(int flags);
int inotify_add_watch(int fd, const char *path, uint32_t mask);

struct ev {
	int wd;
	uint32_t mask;
	uint32_t len;		/* the len field as read */
	char name[256];
	bool range;
	uint64_t off;
	uint64_t count;
};

#define MODIFY_MASK IN_MODIFY
#include "range_tests.h"

/* Next event within TIMEOUT_MS; 0 if none came. */
static int next_event(struct reader *r, struct ev *e, int timeout_ms)
{
	struct inotify_event hdr;
	struct inotify_range rg;
	uint32_t name_area;

	if (r->pos == r->end) {
		struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, timeout_ms) != 1)
			return 0;
		n = read(r->fd, r->buf, sizeof(r->buf));
		if (n <= 0)
			return -1;
		r->pos = 0;
		r->end = n;
	}
	if (r->end - r->pos < sizeof(hdr))
		return -1;
	memcpy(&hdr, r->buf + r->pos, sizeof(hdr));
	if (r->end - r->pos < sizeof(hdr) + hdr.len)
		return -1;
	memset(e, 0, sizeof(*e));
	e->wd = hdr.wd;
	e->mask = hdr.mask;
	e->len = hdr.len;
	name_area = hdr.len;
	if (hdr.mask & IN_RANGE) {
		if (hdr.len < sizeof(rg) + 16)
			return -1;
		name_area -= sizeof(rg);
		memcpy(&rg, r->buf + r->pos + sizeof(hdr) + name_area,
		       sizeof(rg));
		e->range = true;
		e->off = rg.offset;
		e->count = rg.length;
	}
	if (name_area)
		snprintf(e->name, sizeof(e->name), "%s",
			 r->buf + r->pos + sizeof(hdr));
	r->pos += sizeof(hdr) + hdr.len;
	return 1;
}

#define EXPECT_RANGE(r, o, c) do {					\
	struct ev _e;							\
	ASSERT_EQ(1, next_modify((r), &_e));				\
	EXPECT_STREQ("file", _e.name);					\
	ASSERT_TRUE(_e.range) TH_LOG("IN_MODIFY without IN_RANGE");	\
	EXPECT_EQ((uint64_t)(o), _e.off);				\
	EXPECT_EQ((uint64_t)(c), _e.count);				\
} while (0)

/* As EXPECT_RANGE, for an event of a watched file itself (no name) */
#define EXPECT_NODE_RANGE(r, o, c) do {					\
	struct ev _e;							\
	ASSERT_EQ(1, next_modify((r), &_e));				\
	EXPECT_STREQ("", _e.name);					\
	ASSERT_TRUE(_e.range) TH_LOG("IN_MODIFY without IN_RANGE");	\
	EXPECT_EQ((uint64_t)(o), _e.off);				\
	EXPECT_EQ((uint64_t)(c), _e.count);				\
} while (0)

static bool has_report_range(void)
{
	int fd = inotify_init1(IN_REPORT_RANGE);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/*
 * The reissue fixture's reader: a watch on the node itself. A directory
 * watch gets no IN_MODIFY for a device node inside it (__fsnotify_parent()
 * keeps the parent out of reads and writes of special files).
 */
static int reissue_watch(const char *dir, const char *file)
{
	int fd = inotify_init1(IN_REPORT_RANGE | IN_NONBLOCK);

	(void)dir;
	if (fd >= 0 && inotify_add_watch(fd, file, IN_MODIFY) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A watched directory DIR with FILE inside, opened as FD: on tmpfs, or on a
 * file system made on a VM disk (ext4; XFS, which also clones ranges).
 */
FIXTURE(dir) {
	char dir[64];
	char file[128];
	struct reader r;
	int fd;
	bool mounted;
};

FIXTURE_VARIANT(dir) {
	const char *fs;		/* NULL: tmpfs */
	const char *mkfs;
	const char *disk;
};

FIXTURE_VARIANT_ADD(dir, tmpfs) { .fs = NULL };
FIXTURE_VARIANT_ADD(dir, ext4) {
	.fs = "ext4", .mkfs = "mkfs.ext4 -q -F", .disk = VM_DISK_D,
};
/* XFS wants 300 MB or more; -K: no discard of the whole disk first. */
FIXTURE_VARIANT_ADD(dir, xfs) {
	.fs = "xfs", .mkfs = "mkfs.xfs -q -f -K", .disk = VM_DISK_B,
};

static bool reflinks(const char *fs)
{
	return fs && !strcmp(fs, "xfs");
}

FIXTURE_SETUP(dir)
{
	if (!has_report_range())
		SKIP(return, "this kernel has no IN_REPORT_RANGE");
	if (variant->fs && !fs_supported(variant->fs))
		SKIP(return, "this kernel has no %s", variant->fs);
	strcpy(self->dir, "/tmp/inotify-range.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	if (variant->fs) {
		ASSERT_EQ(0, vm_run("%s %s >/dev/null 2>&1", variant->mkfs,
				    variant->disk));
		ASSERT_EQ(0, mount(variant->disk, self->dir, variant->fs, 0,
				   NULL));
		self->mounted = true;
	}
	snprintf(self->file, sizeof(self->file), "%s/file", self->dir);
	self->fd = open(self->file, O_RDWR | O_CREAT, 0644);
	ASSERT_LE(0, self->fd);
	self->r.fd = inotify_init1(IN_REPORT_RANGE | IN_NONBLOCK);
	ASSERT_LE(0, self->r.fd);
	ASSERT_LE(0, inotify_add_watch(self->r.fd, self->dir, IN_MODIFY));
}

FIXTURE_TEARDOWN(dir)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->r.fd > 0)
		close(self->r.fd);
	if (self->mounted)
		umount_retry(self->dir);
	vm_run("rm -rf %s", self->dir);
}

TEST_F(dir, write_reports_its_range)
{
	ASSERT_EQ(5, write(self->fd, "hello", 5));
	EXPECT_RANGE(&self->r, 0, 5);
	ASSERT_EQ(3, write(self->fd, "abc", 3));
	EXPECT_RANGE(&self->r, 5, 3);
}

TEST_F(dir, pwrite_reports_its_range)
{
	char b[100] = { 1 };

	ASSERT_EQ(100, pwrite(self->fd, b, 100, 12345));
	EXPECT_RANGE(&self->r, 12345, 100);
}

TEST_F(dir, writev_reports_the_sum_of_its_vectors)
{
	struct iovec iov[3] = {
		{ "aa", 2 }, { "bbbb", 4 }, { "c", 1 },
	};

	ASSERT_EQ(0, lseek(self->fd, 0, SEEK_SET));
	ASSERT_EQ(7, writev(self->fd, iov, 3));
	EXPECT_RANGE(&self->r, 0, 7);
	ASSERT_EQ(7, pwritev(self->fd, iov, 3, 1000));
	EXPECT_RANGE(&self->r, 1000, 7);
}

TEST_F(dir, pwritev2_reports_its_range)
{
	struct iovec iov = { "0123456789", 10 };

	ASSERT_EQ(10, pwritev2(self->fd, &iov, 1, 4096, RWF_DSYNC));
	EXPECT_RANGE(&self->r, 4096, 10);
	/* offset -1: the file position, here 0 */
	ASSERT_EQ(10, pwritev2(self->fd, &iov, 1, -1, 0));
	EXPECT_RANGE(&self->r, 0, 10);
}

TEST_F(dir, append_reports_where_the_data_landed)
{
	int afd;

	ASSERT_EQ(100, pwrite(self->fd, fill, 100, 0));
	drain(&self->r);
	afd = open(self->file, O_WRONLY | O_APPEND);
	ASSERT_LE(0, afd);
	/* the position of AFD is 0; the data goes to 100 */
	ASSERT_EQ(4, write(afd, "tail", 4));
	close(afd);
	EXPECT_RANGE(&self->r, 100, 4);
}

TEST_F(dir, io_uring_write_reports_its_range)
{
	ASSERT_EQ(5, uring_pwrite(self->fd, "uring", 5, 777));
	EXPECT_RANGE(&self->r, 777, 5);
}

/*
 * An append through io_uring or AIO has no range: the file system picks
 * the position, and the rest of a short io_uring append goes to wherever
 * the end of file is by then. A plain event is right; a range may not be.
 */
TEST_F(dir, async_append_has_no_range)
{
	struct ev e;
	int afd;

	ASSERT_EQ(100, pwrite(self->fd, fill, 100, 0));
	drain(&self->r);
	afd = open(self->file, O_WRONLY | O_APPEND);
	ASSERT_LE(0, afd);
	ASSERT_EQ(4, uring_pwrite(afd, "more", 4, 0));
	ASSERT_EQ(1, next_modify(&self->r, &e));
	EXPECT_FALSE(e.range)
		TH_LOG("io_uring append: a range %llu+%llu",
		       (unsigned long long)e.off, (unsigned long long)e.count);
	ASSERT_EQ(4, aio_pwrite(afd, "tail", 4, 0));
	ASSERT_EQ(1, next_modify(&self->r, &e));
	EXPECT_FALSE(e.range)
		TH_LOG("AIO append: a range %llu+%llu",
		       (unsigned long long)e.off, (unsigned long long)e.count);
	close(afd);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

/*
 * An io_uring write that fails or writes nothing changed nothing: no
 * event, as for write(2), and none to widen the next write's range.
 */
TEST_F(dir, io_uring_failed_or_empty_write_sends_no_event)
{
	void *bad = unreadable_page();

	ASSERT_NE(NULL, bad);
	ASSERT_EQ(0, uring_pwrite(self->fd, "", 0, 0));
	EXPECT_NO_MORE_MODIFY(&self->r);
	EXPECT_GT(0, uring_pwrite(self->fd, bad, 4096, 0));
	munmap(bad, 4096);
	EXPECT_NO_MORE_MODIFY(&self->r);
	ASSERT_EQ(5, uring_pwrite(self->fd, "after", 5, 10));
	EXPECT_RANGE(&self->r, 10, 5);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

/*
 * A short io_uring write: the file size limit stops it 3096 bytes in, and
 * io_uring issues the rest from where it stopped (from io-wq), where it
 * fails with EFBIG. The CQE carries the 3096 bytes written; one event must
 * report exactly those.
 */
TEST_F(dir, io_uring_short_write_reports_what_it_wrote)
{
	struct rlimit old, lim;

	ASSERT_EQ(0, getrlimit(RLIMIT_FSIZE, &old));
	lim = old;
	lim.rlim_cur = 4096;
	ASSERT_NE(SIG_ERR, signal(SIGXFSZ, SIG_IGN));
	ASSERT_EQ(0, setrlimit(RLIMIT_FSIZE, &lim));
	EXPECT_EQ(3096, uring_pwrite(self->fd, fill, 8192, 1000));
	ASSERT_EQ(0, setrlimit(RLIMIT_FSIZE, &old));
	EXPECT_RANGE(&self->r, 1000, 3096);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

/*
 * A write io_uring reissues (see the reissue fixture): the reissued write
 * reports its own range when it completes. Nothing may be sent before it:
 * a plain event merged with that range would widen it to the whole file.
 */
TEST_F(reissue, io_uring_reissued_write_reports_one_exact_range)
{
	bool punted;

	/* dm-linear takes nowait I/O: written inline, no reissue */
	ASSERT_EQ(4096, uring_pwrite_punted(self->fd, self->buf, 4096, 4096,
					    &punted));
	EXPECT_FALSE(punted);
	EXPECT_NODE_RANGE(&self->r, 4096, 4096);
	EXPECT_NO_MORE_MODIFY(&self->r);

	ASSERT_EQ(0, reissue_swap_table());
	ASSERT_EQ(4096, uring_pwrite_punted(self->fd, self->buf, 4096, 65536,
					    &punted));
	ASSERT_TRUE(punted) TH_LOG("the write was not reissued from io-wq");
	EXPECT_NODE_RANGE(&self->r, 65536, 4096);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

TEST_F(dir, aio_write_reports_its_range)
{
	ASSERT_EQ(6, aio_pwrite(self->fd, "kernel", 6, 300));
	EXPECT_RANGE(&self->r, 300, 6);
}

/* Direct I/O completes in interrupt context: the deferred report. */
TEST_F(dir, aio_direct_write_reports_its_range)
{
	void *buf;
	int dfd;

	if (!variant->fs)
		SKIP(return, "direct I/O is tested on a disk file system");
	ASSERT_EQ(0, posix_memalign(&buf, 4096, 8192));
	memset(buf, 'd', 8192);
	/* allocated and written blocks: the direct write is an overwrite */
	ASSERT_EQ(65536, pwrite(self->fd, fill, 65536, 0));
	ASSERT_EQ(0, fsync(self->fd));
	drain(&self->r);
	dfd = open(self->file, O_WRONLY | O_DIRECT);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(8192, aio_pwrite(dfd, buf, 8192, 16384));
	close(dfd);
	free(buf);
	EXPECT_RANGE(&self->r, 16384, 8192);
}

TEST_F(dir, splice_from_a_pipe_reports_its_range)
{
	loff_t off = 2000;
	int p[2];

	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(6, write(p[1], "splice", 6));
	ASSERT_EQ(6, splice(p[0], NULL, self->fd, &off, 6, 0));
	close(p[0]);
	close(p[1]);
	EXPECT_RANGE(&self->r, 2000, 6);
}

TEST_F(dir, sendfile_reports_its_range)
{
	off_t in_off = 0;
	int in = make_source(self->dir, "sendfile-data", 13);

	ASSERT_LE(0, in);
	drain(&self->r);
	ASSERT_EQ(50, lseek(self->fd, 50, SEEK_SET));
	ASSERT_EQ(8, sendfile(self->fd, in, &in_off, 8));
	close(in);
	EXPECT_RANGE(&self->r, 50, 8);
}

TEST_F(dir, copy_file_range_reports_the_destination_range)
{
	loff_t in_off = 2, out_off = 200;
	int in = make_source(self->dir, "copy-file-range", 15);

	ASSERT_LE(0, in);
	drain(&self->r);
	ASSERT_EQ(10, copy_file_range(in, &in_off, self->fd, &out_off, 10, 0));
	close(in);
	EXPECT_RANGE(&self->r, 200, 10);
}

TEST_F(dir, clone_range_reports_the_destination_range)
{
	struct file_clone_range fcr = { .src_length = 4096,
					.dest_offset = 8192 };
	char b[4096] = { 7 };
	int in = make_source(self->dir, "", 0);

	ASSERT_LE(0, in);
	ASSERT_EQ(4096, write(in, b, 4096));
	drain(&self->r);
	fcr.src_fd = in;
	if (ioctl(self->fd, FICLONERANGE, &fcr)) {
		int e = errno;

		close(in);
		/* XFS reflinks: there, the test must run. */
		if (!reflinks(variant->fs) &&
		    (e == EOPNOTSUPP || e == EXDEV || e == EINVAL))
			SKIP(return, "no reflink on this filesystem");
		ASSERT_EQ(0, e);
	}
	close(in);
	EXPECT_RANGE(&self->r, 8192, 4096);
}

/* Deduplication leaves the data as it was: no event, as upstream. */
TEST_F(dir, dedupe_range_sends_no_modify)
{
	struct file_dedupe_range *fdr;
	char b[4096];
	int in = make_source(self->dir, "", 0);

	if (!reflinks(variant->fs)) {
		close(in);
		SKIP(return, "no reflink on this filesystem");
	}
	memset(b, 9, sizeof(b));
	ASSERT_LE(0, in);
	ASSERT_EQ(4096, write(in, b, 4096));
	ASSERT_EQ(4096, pwrite(self->fd, b, 4096, 0));
	ASSERT_EQ(0, fsync(in));
	ASSERT_EQ(0, fsync(self->fd));
	drain(&self->r);
	fdr = calloc(1, sizeof(*fdr) + sizeof(fdr->info[0]));
	ASSERT_NE(NULL, fdr);
	fdr->src_length = 4096;
	fdr->dest_count = 1;
	fdr->info[0].dest_fd = self->fd;
	ASSERT_EQ(0, ioctl(in, FIDEDUPERANGE, fdr));
	EXPECT_EQ(FILE_DEDUPE_RANGE_SAME, fdr->info[0].status);
	EXPECT_EQ(4096, fdr->info[0].bytes_deduped);
	free(fdr);
	close(in);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

TEST_F(dir, fallocate_reports_each_mode)
{
	ASSERT_EQ(0, fallocate(self->fd, 0, 0, 65536));
	EXPECT_RANGE(&self->r, 0, 65536);
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_PUNCH_HOLE |
			       FALLOC_FL_KEEP_SIZE, 4096, 8192));
	EXPECT_RANGE(&self->r, 4096, 8192);
	if (!variant->fs)
		return;		/* tmpfs has no zero range */
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_ZERO_RANGE, 20480, 100));
	EXPECT_RANGE(&self->r, 20480, 100);
}

/*
 * Collapse and insert range move everything after the offset, up to an end
 * of file known only under the file system's lock: no range, rather than
 * one computed after the lock was dropped.
 */
TEST_F(dir, collapse_and_insert_report_no_range)
{
	struct ev e;

	if (!variant->fs)
		SKIP(return, "tmpfs cannot collapse or insert ranges");
	ASSERT_EQ(65536, pwrite(self->fd, fill, 65536, 0));
	ASSERT_EQ(0, fsync(self->fd));
	drain(&self->r);
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_COLLAPSE_RANGE, 8192,
			       4096));
	ASSERT_EQ(1, next_modify(&self->r, &e));
	EXPECT_FALSE(e.range)
		TH_LOG("collapse: a range %llu+%llu",
		       (unsigned long long)e.off, (unsigned long long)e.count);
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_INSERT_RANGE, 4096, 4096));
	ASSERT_EQ(1, next_modify(&self->r, &e));
	EXPECT_FALSE(e.range)
		TH_LOG("insert: a range %llu+%llu",
		       (unsigned long long)e.off, (unsigned long long)e.count);
}

/* io_uring's fallocate: the range, and no second plain event. */
TEST_F(dir, io_uring_fallocate_reports_its_range_once)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;

	ASSERT_EQ(0, io_uring_queue_init(4, &ring, 0));
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_fallocate(sqe, self->fd, 0, 4096, 16384);
	ASSERT_EQ(1, io_uring_submit(&ring));
	ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
	ASSERT_EQ(0, cqe->res);
	io_uring_cqe_seen(&ring, cqe);
	io_uring_queue_exit(&ring);
	EXPECT_RANGE(&self->r, 4096, 16384);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

TEST_F(dir, truncate_reports_the_range_between_old_and_new_size)
{
	char b[100] = { 1 };
	struct ev e;
	int tfd;

	ASSERT_EQ(100, write(self->fd, b, 100));
	drain(&self->r);
	ASSERT_EQ(0, ftruncate(self->fd, 40));
	EXPECT_RANGE(&self->r, 40, 60);
	/* by name: no file whose path the range could carry, no range */
	ASSERT_EQ(0, truncate(self->file, 1000));
	ASSERT_EQ(1, next_modify(&self->r, &e));
	EXPECT_FALSE(e.range);
	tfd = open(self->file, O_WRONLY | O_TRUNC);
	ASSERT_LE(0, tfd);
	close(tfd);
	EXPECT_RANGE(&self->r, 0, 1000);
}

/* Not covered: stores through a shared mapping send no event at all. */
TEST_F(dir, mmap_stores_are_not_reported)
{
	char *p;

	ASSERT_EQ(0, ftruncate(self->fd, 4096));
	drain(&self->r);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	memcpy(p + 100, "mapped", 6);
	ASSERT_EQ(0, msync(p, 4096, MS_SYNC));
	munmap(p, 4096);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

TEST_F(dir, appends_coalesce_into_one_event)
{
	int i;

	for (i = 0; i < 10; i++)
		ASSERT_EQ(10, write(self->fd, "0123456789", 10));
	EXPECT_RANGE(&self->r, 0, 100);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

TEST_F(dir, overlapping_writes_merge_into_their_union)
{
	ASSERT_EQ(10, pwrite(self->fd, "0123456789", 10, 20));
	ASSERT_EQ(10, pwrite(self->fd, "0123456789", 10, 15));
	ASSERT_EQ(5, pwrite(self->fd, "01234", 5, 30));
	EXPECT_RANGE(&self->r, 15, 20);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

TEST_F(dir, disjoint_writes_stay_separate)
{
	ASSERT_EQ(10, pwrite(self->fd, "0123456789", 10, 0));
	ASSERT_EQ(10, pwrite(self->fd, "0123456789", 10, 11));
	ASSERT_EQ(10, pwrite(self->fd, "0123456789", 10, 4096));
	EXPECT_RANGE(&self->r, 0, 10);
	EXPECT_RANGE(&self->r, 11, 10);
	EXPECT_RANGE(&self->r, 4096, 10);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

/* A change without a known range (an mtime update) absorbs the range. */
TEST_F(dir, modify_without_range_widens_a_merged_event)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { 12345, 0 } };
	struct ev e;

	ASSERT_EQ(10, pwrite(self->fd, "0123456789", 10, 0));
	ASSERT_EQ(0, futimens(self->fd, ts));
	ASSERT_EQ(1, next_modify(&self->r, &e));
	EXPECT_FALSE(e.range);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

TEST_F(dir, range_follows_the_nul_padded_name)
{
	struct ev e;

	ASSERT_EQ(5, write(self->fd, "hello", 5));
	ASSERT_EQ(1, next_modify(&self->r, &e));
	/* "file" padded to 16, then the 16-byte range */
	EXPECT_EQ(32U, e.len);
	EXPECT_EQ(IN_MODIFY | IN_RANGE, e.mask);
	EXPECT_STREQ("file", e.name);
}

TEST(unknown_init_flags_are_still_refused)
{
	int fd;

	if (!has_report_range())
		SKIP(return, "this kernel has no IN_REPORT_RANGE");
	EXPECT_EQ(-1, inotify_init1(0x2));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, inotify_init1(IN_REPORT_RANGE | 0x4));
	EXPECT_EQ(EINVAL, errno);
	/* IN_REPORT_RANGE is no open flag: the descriptor stays read-only */
	fd = inotify_init1(IN_REPORT_RANGE | IN_CLOEXEC);
	ASSERT_LE(0, fd);
	EXPECT_EQ(O_RDONLY, fcntl(fd, F_GETFL) & O_ACCMODE);
	EXPECT_NE(0, fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
}

TEST(watched_file_gets_range_after_nul_padding)
{
	char dir[] = "/tmp/inotify-file.XXXXXX", path[64];
	struct reader *r = calloc(1, sizeof(*r));
	struct ev e;
	int fd;

	if (!has_report_range())
		SKIP(return, "this kernel has no IN_REPORT_RANGE");
	ASSERT_NE(NULL, mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_RDWR | O_CREAT, 0644);
	ASSERT_LE(0, fd);
	r->fd = inotify_init1(IN_REPORT_RANGE | IN_NONBLOCK);
	ASSERT_LE(0, inotify_add_watch(r->fd, path, IN_MODIFY));
	ASSERT_EQ(3, pwrite(fd, "abc", 3, 9));
	ASSERT_EQ(1, next_modify(r, &e));
	EXPECT_EQ(32U, e.len);
	EXPECT_STREQ("", e.name);
	EXPECT_TRUE(e.range);
	EXPECT_EQ(9ULL, e.off);
	EXPECT_EQ(3ULL, e.count);
	close(fd);
	close(r->fd);
	free(r);
	vm_run("rm -rf %s", dir);
}

/*
 * A character device's ->write may ignore the position (/dev/null never
 * moves it): such a write has no range to report, only the event.
 */
TEST(character_device_write_has_no_range)
{
	struct reader r = { 0 };
	struct ev e;
	int fd;

	if (!has_report_range())
		SKIP(return, "this kernel has no IN_REPORT_RANGE");
	r.fd = inotify_init1(IN_REPORT_RANGE | IN_NONBLOCK);
	ASSERT_LE(0, r.fd);
	ASSERT_LE(0, inotify_add_watch(r.fd, "/dev/null", IN_MODIFY));
	fd = open("/dev/null", O_WRONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(5, write(fd, "bytes", 5));
	ASSERT_EQ(5, pwrite(fd, "bytes", 5, 100));
	close(fd);
	ASSERT_EQ(1, next_modify(&r, &e));
	EXPECT_FALSE(e.range)
		TH_LOG("a range %llu+%llu for /dev/null",
		       (unsigned long long)e.off, (unsigned long long)e.count);
	close(r.fd);
}

/*
 * A file of a kernel interface file system (procfs, sysfs, cgroupfs) takes
 * commands and values; its ->write may ignore the position (comm does), so
 * the write has no range to report, only the event.
 */
TEST(kernel_interface_file_write_has_no_range)
{
	static const char * const files[] = {
		"/proc/self/comm",
		"/sys/block/vdd/queue/read_ahead_kb",
	};
	char val[64];
	unsigned int i;

	if (!has_report_range())
		SKIP(return, "this kernel has no IN_REPORT_RANGE");
	for (i = 0; i < ARRAY_SIZE(files); i++) {
		struct reader r = { 0 };
		struct ev e;
		ssize_t n;
		int fd;

		fd = open(files[i], O_RDWR);
		ASSERT_LE(0, fd) TH_LOG("%s: %s", files[i], strerror(errno));
		/* write back what is there: nothing changes but the event */
		n = read(fd, val, sizeof(val));
		ASSERT_LT(0, n);
		if (val[n - 1] == '\n')
			n--;	/* comm would keep it */
		r.fd = inotify_init1(IN_REPORT_RANGE | IN_NONBLOCK);
		ASSERT_LE(0, r.fd);
		ASSERT_LE(0, inotify_add_watch(r.fd, files[i], IN_MODIFY));
		/* not pwrite(): comm is a seq_file, which refuses it */
		ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
		ASSERT_EQ(n, write(fd, val, n));
		close(fd);
		ASSERT_EQ(1, next_modify(&r, &e));
		EXPECT_FALSE(e.range)
			TH_LOG("a range %llu+%llu for %s",
			       (unsigned long long)e.off,
			       (unsigned long long)e.count, files[i]);
		close(r.fd);
	}
}

TEST(instance_without_flag_sees_the_upstream_format)
{
	char dir[] = "/tmp/inotify-plain.XXXXXX", path[64];
	struct reader *r = calloc(1, sizeof(*r));
	struct ev e;
	int fd;

	ASSERT_NE(NULL, mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_RDWR | O_CREAT, 0644);
	ASSERT_LE(0, fd);
	r->fd = inotify_init1(IN_NONBLOCK);
	ASSERT_LE(0, inotify_add_watch(r->fd, dir, IN_MODIFY));
	/* disjoint writes: one merged event, as upstream */
	ASSERT_EQ(3, pwrite(fd, "abc", 3, 0));
	ASSERT_EQ(3, pwrite(fd, "abc", 3, 4096));
	ASSERT_EQ(1, next_modify(r, &e));
	EXPECT_EQ(IN_MODIFY, e.mask);
	EXPECT_EQ(16U, e.len);
	EXPECT_STREQ("file", e.name);
	EXPECT_EQ(0, next_event(r, &e, 300));
	close(fd);
	close(r->fd);
	free(r);
	vm_run("rm -rf %s", dir);
}

/* Set max_queued_events to N for the instances made until restored. */
static void set_max_queued(char *old, size_t size, int n)
{
	FILE *f = fopen("/proc/sys/fs/inotify/max_queued_events", "r");

	if (old && f && fgets(old, size, f))
		old[strcspn(old, "\n")] = 0;
	if (f)
		fclose(f);
	vm_run("echo %d >/proc/sys/fs/inotify/max_queued_events", n);
}

static void restore_max_queued(const char *old)
{
	vm_run("echo %s >/proc/sys/fs/inotify/max_queued_events", old);
}

/* Events for distinct names fill the queue as without ranges. */
TEST(overflow_is_reported_when_ranges_fill_the_queue)
{
	char dir[] = "/tmp/inotify-ovf.XXXXXX", path[64], old[32] = "16384";
	struct reader *r = calloc(1, sizeof(*r));
	struct ev e;
	int fd, i, n = 0, got;

	if (!has_report_range())
		SKIP(return, "this kernel has no IN_REPORT_RANGE");
	set_max_queued(old, sizeof(old), 8);
	r->fd = inotify_init1(IN_REPORT_RANGE | IN_NONBLOCK);
	restore_max_queued(old);
	ASSERT_LE(0, r->fd);

	ASSERT_NE(NULL, mkdtemp(dir));
	ASSERT_LE(0, inotify_add_watch(r->fd, dir, IN_MODIFY));
	for (i = 0; i < 20; i++) {
		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		fd = open(path, O_RDWR | O_CREAT, 0644);
		ASSERT_LE(0, fd);
		ASSERT_EQ(1, pwrite(fd, "x", 1, i * 10));
		close(fd);
	}
	while ((got = next_event(r, &e, 300)) == 1) {
		n++;
		if (e.mask & IN_Q_OVERFLOW)
			break;
		EXPECT_TRUE(e.range);
		EXPECT_EQ((uint64_t)(n - 1) * 10, e.off);
	}
	EXPECT_EQ(1, got);
	EXPECT_TRUE(e.mask & IN_Q_OVERFLOW);
	EXPECT_EQ(-1, e.wd);
	EXPECT_EQ(9, n);
	close(r->fd);
	free(r);
	vm_run("rm -rf %s", dir);
}

/*
 * The merge rule. Plain inotify merges a burst of modifications of one
 * file into one event; with ranges, a burst of writes at scattered offsets
 * must never overflow a queue that plain inotify would not overflow, and
 * the ranges stay exact while that costs little.
 */

/* A burst instance at the default queue size (16384) watching DIR */
static struct burst *burst_new(void)
{
	struct burst *b = burst_alloc("/tmp/inotify-burst.XXXXXX");
	char old[32] = "16384", path[96];
	int i;

	if (!b)
		return NULL;
	set_max_queued(old, sizeof(old), 16384);
	b->r.fd = inotify_init1(IN_REPORT_RANGE | IN_NONBLOCK);
	restore_max_queued(old);
	if (b->r.fd < 0 ||
	    inotify_add_watch(b->r.fd, b->dir, IN_MODIFY) < 0)
		goto fail;
	for (i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/f%d", b->dir, i);
		b->fd[i] = open(path, O_RDWR | O_CREAT, 0644);
		if (b->fd[i] < 0)
			goto fail;
	}
	return b;
fail:
	burst_free(b);
	return NULL;
}

/* Read every queued event; the file is the one it names */
static void burst_read(struct burst *b)
{
	struct ev e;

	while (next_event(&b->r, &e, 300) == 1) {
		if (e.mask & IN_Q_OVERFLOW) {
			b->overflow = true;
			continue;
		}
		if ((e.mask & IN_MODIFY) && e.name[0] == 'f' &&
		    (e.name[1] == '0' || e.name[1] == '1'))
			burst_cover(b, e.name[1] - '0', &e);
	}
}

/* Plain inotify queues one event here; ranges must not overflow. */
TEST_F_TIMEOUT(burst, random_writes_to_one_file_do_not_overflow_the_default_queue, 900)
{
	struct burst *b = self->b;

	ASSERT_TRUE(burst_write(b, 0, 100000));
	burst_read(b);
	EXPECT_FALSE(b->overflow) TH_LOG("100,000 random writes overflowed");
	EXPECT_GE(4, b->events[0]);
	EXPECT_EQ(b->events[0], b->ranged[0]);
	EXPECT_EQ(0, burst_missed(b, 0));
}

/* Bursts that alternate between two files: plain inotify queues 40. */
TEST_F_TIMEOUT(burst, interleaved_bursts_do_not_overflow_the_default_queue, 900)
{
	struct burst *b = self->b;
	int round;

	for (round = 0; round < 20; round++)
		ASSERT_TRUE(burst_write(b, round & 1, 1000));
	burst_read(b);
	EXPECT_FALSE(b->overflow) TH_LOG("20 bursts of 1,000 overflowed");
	EXPECT_GE(40, b->events[0]);
	EXPECT_GE(40, b->events[1]);
	EXPECT_EQ(0, burst_missed(b, 0));
	EXPECT_EQ(0, burst_missed(b, 1));
}

/* A modification without a range first: the burst merges into it. */
TEST_F_TIMEOUT(burst, plain_event_before_a_ranged_burst_absorbs_it, 900)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { 12345, 0 } };
	struct burst *b = self->b;

	ASSERT_EQ(0, futimens(b->fd[0], ts));
	ASSERT_TRUE(burst_write(b, 0, 20000));
	/* and a ranged burst, a plain event, a ranged burst */
	ASSERT_TRUE(burst_write(b, 1, 100));
	ASSERT_EQ(0, futimens(b->fd[1], ts));
	ASSERT_TRUE(burst_write(b, 1, 20000));
	burst_read(b);
	EXPECT_FALSE(b->overflow);
	EXPECT_EQ(1, b->events[0]);
	EXPECT_EQ(0, b->ranged[0]);
	EXPECT_GE(4, b->events[1]);
	EXPECT_EQ(0, burst_missed(b, 1));
}

/*
 * Four disjoint writes stay four exact events; a fifth and sixth widen the
 * last one to the span covering them, the first three stay exact.
 */
TEST_F(dir, disjoint_writes_beyond_four_widen_the_last_event)
{
	int i;

	for (i = 0; i < 6; i++)
		ASSERT_EQ(10, pwrite(self->fd, "0123456789", 10, i * 100));
	EXPECT_RANGE(&self->r, 0, 10);
	EXPECT_RANGE(&self->r, 100, 10);
	EXPECT_RANGE(&self->r, 200, 10);
	EXPECT_RANGE(&self->r, 300, 210);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

/* From half the queue on, a ranged instance queues as plain inotify. */
TEST(half_full_queue_widens_instead_of_queueing)
{
	char dir[] = "/tmp/inotify-half.XXXXXX", path[64], old[32] = "16384";
	struct reader *r = calloc(1, sizeof(*r));
	struct ev e;
	int fd, i, n = 0;

	if (!has_report_range())
		SKIP(return, "this kernel has no IN_REPORT_RANGE");
	set_max_queued(old, sizeof(old), 16);
	r->fd = inotify_init1(IN_REPORT_RANGE | IN_NONBLOCK);
	restore_max_queued(old);
	ASSERT_LE(0, r->fd);
	ASSERT_NE(NULL, mkdtemp(dir));
	ASSERT_LE(0, inotify_add_watch(r->fd, dir, IN_MODIFY));
	/* 8 events for 8 files: the queue is half full */
	for (i = 0; i < 9; i++) {
		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		fd = open(path, O_RDWR | O_CREAT, 0644);
		ASSERT_LE(0, fd);
		ASSERT_EQ(1, pwrite(fd, "x", 1, 0));
		if (i < 8)
			close(fd);
	}
	/* the ninth file: 100 disjoint writes, one widened event */
	for (i = 1; i < 100; i++)
		ASSERT_EQ(1, pwrite(fd, "x", 1, i * 10));
	close(fd);
	while (next_event(r, &e, 300) == 1) {
		n++;
		EXPECT_FALSE(e.mask & IN_Q_OVERFLOW);
		EXPECT_TRUE(e.range);
		if (!strcmp(e.name, "f8")) {
			EXPECT_EQ(0ULL, e.off);
			EXPECT_EQ(991ULL, e.count);
		}
	}
	EXPECT_EQ(9, n);
	close(r->fd);
	free(r);
	vm_run("rm -rf %s", dir);
}

/*
 * inotify_init1() takes O_* values: IN_REPORT_RANGE must be none of them,
 * and IN_RANGE no bit upstream uses or reserved (0x00080000 is the
 * deprecated FAN_DIR_MODIFY).
 */
TEST(range_flags_collide_with_no_open_flag_or_reserved_bit)
{
	const int open_flags[] = {
		O_WRONLY, O_RDWR, O_CREAT, O_EXCL, O_NOCTTY, O_TRUNC, O_APPEND,
		O_DSYNC, O_DIRECT, O_LARGEFILE, O_DIRECTORY, O_NOFOLLOW,
		O_NOATIME, O_PATH, O_SYNC, O_TMPFILE,
	};
	unsigned int i;
	struct reader *r = calloc(1, sizeof(*r));
	char dir[] = "/tmp/inotify-bits.XXXXXX", path[64];
	struct ev e;
	int fd;

	if (!has_report_range())
		SKIP(return, "this kernel has no IN_REPORT_RANGE");
	for (i = 0; i < sizeof(open_flags) / sizeof(open_flags[0]); i++) {
		if (!open_flags[i])	/* O_LARGEFILE on 64-bit */
			continue;
		EXPECT_EQ(0, IN_REPORT_RANGE & open_flags[i]);
		fd = inotify_init1(open_flags[i]);
		EXPECT_EQ(-1, fd) TH_LOG("open flag %#o accepted", open_flags[i]);
		if (fd >= 0)
			close(fd);
	}
	ASSERT_NE(NULL, mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_RDWR | O_CREAT, 0644);
	ASSERT_LE(0, fd);
	r->fd = inotify_init1(IN_REPORT_RANGE | IN_NONBLOCK);
	ASSERT_LE(0, inotify_add_watch(r->fd, dir, IN_MODIFY));
	ASSERT_EQ(3, pwrite(fd, "abc", 3, 0));
	ASSERT_EQ(1, next_modify(r, &e));
	EXPECT_TRUE(e.range);
	EXPECT_EQ(0U, e.mask & 0x00080000);
	EXPECT_EQ(0U, e.mask & ~(IN_ALL_EVENTS | IN_ISDIR | IN_RANGE));
	close(fd);
	close(r->fd);
	free(r);
	vm_run("rm -rf %s", dir);
}

TEST_HARNESS_MAIN
