// SPDX-License-Identifier: GPL-2.0
/*
 * fanotify with FAN_REPORT_RANGE: FAN_MODIFY events carry upstream's range
 * info record (FAN_EVENT_INFO_TYPE_RANGE, struct fanotify_event_info_range)
 * with exactly the bytes each write path changed, events merge when their
 * ranges overlap or touch and widen rather than overflow, a group without
 * the flag sees no record, an unprivileged group in file handle mode gets
 * ranges, and fdinfo shows the flag. Skips on a kernel without the flag.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/fanotify.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <liburing.h>

#ifndef FAN_REPORT_RANGE
#error "build against the patched kernel's uapi headers"
#endif

struct ev {
	uint32_t mask;
	uint32_t event_len;
	bool range;
	uint64_t off;
	uint64_t count;
	unsigned char fh[128];	/* the object's handle (fid records) */
	unsigned int fh_len;
	int fd;
};

#define MODIFY_MASK FAN_MODIFY
#include "range_tests.h"

/* Next event within TIMEOUT_MS; 0 if none came, -1 if malformed. */
static int next_event(struct reader *r, struct ev *e, int timeout_ms)
{
	struct fanotify_event_metadata md;
	size_t at;

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
	if (r->end - r->pos < sizeof(md))
		return -1;
	memcpy(&md, r->buf + r->pos, sizeof(md));
	if (md.event_len < sizeof(md) || r->end - r->pos < md.event_len)
		return -1;
	memset(e, 0, sizeof(*e));
	e->mask = md.mask;
	e->event_len = md.event_len;
	e->fd = md.fd;
	for (at = md.metadata_len; at < md.event_len;) {
		struct fanotify_event_info_header h;
		const char *rec = r->buf + r->pos + at;

		if (md.event_len - at < sizeof(h))
			return -1;
		memcpy(&h, rec, sizeof(h));
		if (h.len < sizeof(h) || h.len > md.event_len - at)
			return -1;
		if (h.info_type == FAN_EVENT_INFO_TYPE_RANGE) {
			struct fanotify_event_info_range rg;

			if (h.len != sizeof(rg))
				return -1;
			memcpy(&rg, rec, sizeof(rg));
			if (rg.pad)
				return -1;
			e->range = true;
			e->off = rg.offset;
			e->count = rg.count;
		} else if (h.info_type == FAN_EVENT_INFO_TYPE_FID) {
			const struct fanotify_event_info_fid *fid =
				(const void *)rec;
			const struct file_handle *fh =
				(const void *)fid->handle;

			e->fh_len = fh->handle_bytes;
			if (e->fh_len <= sizeof(e->fh))
				memcpy(e->fh, fh->f_handle, e->fh_len);
		}
		at += h.len;
	}
	r->pos += md.event_len;
	if (e->fd >= 0)
		close(e->fd);
	return 1;
}

#define EXPECT_RANGE(r, o, c) do {					\
	struct ev _e;							\
	ASSERT_EQ(1, next_modify((r), &_e));				\
	ASSERT_TRUE(_e.range) TH_LOG("FAN_MODIFY without a range");	\
	EXPECT_EQ((uint64_t)(o), _e.off);				\
	EXPECT_EQ((uint64_t)(c), _e.count);				\
} while (0)

#define EXPECT_NO_RANGE(r) do {						\
	struct ev _e;							\
	ASSERT_EQ(1, next_modify((r), &_e));				\
	EXPECT_FALSE(_e.range)						\
		TH_LOG("a range %llu+%llu", (unsigned long long)_e.off,	\
		       (unsigned long long)_e.count);			\
} while (0)

#define FID_RANGE (FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_REPORT_RANGE | \
		   FAN_NONBLOCK)

/* A group that gets file descriptors rather than file handles */
#define FD_RANGE (FAN_CLASS_NOTIF | FAN_REPORT_RANGE | FAN_NONBLOCK)

static bool has_report_range(void)
{
	int fd = fanotify_init(FID_RANGE, O_RDONLY);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* A group of FLAGS with an inode mark for FAN_MODIFY on PATH */
static int watch_file(unsigned int flags, const char *path)
{
	int fd = fanotify_init(flags, O_RDONLY);

	if (fd < 0)
		return -1;
	if (fanotify_mark(fd, FAN_MARK_ADD, FAN_MODIFY, AT_FDCWD, path)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The reissue fixture's reader: an inode mark on the node */
static int reissue_watch(const char *dir, const char *file)
{
	(void)dir;
	return watch_file(FID_RANGE, file);
}

/*
 * FILE in a directory DIR, opened as FD and watched by an unprivileged-style
 * group (file handles, inode mark): on tmpfs, or on a file system made on a
 * VM disk (XFS, which also clones ranges and does direct I/O).
 */
FIXTURE(fan) {
	char dir[64];
	char file[128];
	struct reader r;
	int fd;
	bool mounted;
};

FIXTURE_VARIANT(fan) {
	const char *fs;		/* NULL: tmpfs */
	const char *mkfs;
	const char *disk;
};

FIXTURE_VARIANT_ADD(fan, tmpfs) { .fs = NULL };
/* XFS wants 300 MB or more; -K: no discard of the whole disk first. */
FIXTURE_VARIANT_ADD(fan, xfs) {
	.fs = "xfs", .mkfs = "mkfs.xfs -q -f -K", .disk = VM_DISK_B,
};

FIXTURE_SETUP(fan)
{
	self->r.fd = -1;
	self->fd = -1;
	if (!has_report_range())
		SKIP(return, "this kernel has no FAN_REPORT_RANGE");
	strcpy(self->dir, "/tmp/fanotify-range.XXXXXX");
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
	self->r.fd = watch_file(FID_RANGE, self->file);
	ASSERT_LE(0, self->r.fd);
}

FIXTURE_TEARDOWN(fan)
{
	if (self->fd >= 0)
		close(self->fd);
	if (self->r.fd >= 0)
		close(self->r.fd);
	if (self->mounted)
		umount_retry(self->dir);
	vm_run("rm -rf %s", self->dir);
}

TEST_F(fan, write_reports_its_range)
{
	ASSERT_EQ(5, write(self->fd, "hello", 5));
	EXPECT_RANGE(&self->r, 0, 5);
	ASSERT_EQ(3, write(self->fd, "abc", 3));
	EXPECT_RANGE(&self->r, 5, 3);
}

TEST_F(fan, pwrite_writev_pwritev2_report_their_ranges)
{
	struct iovec iov[3] = {
		{ "aa", 2 }, { "bbbb", 4 }, { "c", 1 },
	};

	ASSERT_EQ(100, pwrite(self->fd, fill, 100, 12345));
	EXPECT_RANGE(&self->r, 12345, 100);
	ASSERT_EQ(0, lseek(self->fd, 0, SEEK_SET));
	ASSERT_EQ(7, writev(self->fd, iov, 3));
	EXPECT_RANGE(&self->r, 0, 7);
	ASSERT_EQ(7, pwritev(self->fd, iov, 3, 1000));
	EXPECT_RANGE(&self->r, 1000, 7);
	ASSERT_EQ(7, pwritev2(self->fd, iov, 3, 4096, RWF_DSYNC));
	EXPECT_RANGE(&self->r, 4096, 7);
}

TEST_F(fan, append_reports_where_the_data_landed)
{
	int afd;

	ASSERT_EQ(100, pwrite(self->fd, fill, 100, 0));
	drain(&self->r);
	afd = open(self->file, O_WRONLY | O_APPEND);
	ASSERT_LE(0, afd);
	ASSERT_EQ(4, write(afd, "tail", 4));
	close(afd);
	EXPECT_RANGE(&self->r, 100, 4);
}

TEST_F(fan, io_uring_write_reports_its_range)
{
	ASSERT_EQ(5, uring_pwrite(self->fd, "uring", 5, 777));
	EXPECT_RANGE(&self->r, 777, 5);
}

/* An append through io_uring or AIO: the file system picks the position. */
TEST_F(fan, async_append_has_no_range)
{
	int afd;

	ASSERT_EQ(100, pwrite(self->fd, fill, 100, 0));
	drain(&self->r);
	afd = open(self->file, O_WRONLY | O_APPEND);
	ASSERT_LE(0, afd);
	ASSERT_EQ(4, uring_pwrite(afd, "more", 4, 0));
	EXPECT_NO_RANGE(&self->r);
	ASSERT_EQ(4, aio_pwrite(afd, "tail", 4, 0));
	EXPECT_NO_RANGE(&self->r);
	close(afd);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

/* An io_uring write that fails or writes nothing sends no event. */
TEST_F(fan, io_uring_failed_or_empty_write_sends_no_event)
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
TEST_F(fan, io_uring_short_write_reports_what_it_wrote)
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
	EXPECT_RANGE(&self->r, 4096, 4096);
	EXPECT_NO_MORE_MODIFY(&self->r);

	ASSERT_EQ(0, reissue_swap_table());
	ASSERT_EQ(4096, uring_pwrite_punted(self->fd, self->buf, 4096, 65536,
					    &punted));
	ASSERT_TRUE(punted) TH_LOG("the write was not reissued from io-wq");
	EXPECT_RANGE(&self->r, 65536, 4096);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

/* Collapse and insert range: the end of file they move to is not known. */
TEST_F(fan, collapse_and_insert_report_no_range)
{
	if (!variant->fs)
		SKIP(return, "tmpfs cannot collapse or insert ranges");
	ASSERT_EQ(65536, pwrite(self->fd, fill, 65536, 0));
	ASSERT_EQ(0, fsync(self->fd));
	drain(&self->r);
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_COLLAPSE_RANGE, 8192,
			       4096));
	EXPECT_NO_RANGE(&self->r);
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_INSERT_RANGE, 4096, 4096));
	EXPECT_NO_RANGE(&self->r);
}

/*
 * An AIO direct write completes in interrupt context and is reported only
 * if someone watches the file: here through a mount mark and a file system
 * mark, not the inode.
 */
TEST_F(fan, aio_direct_write_reaches_mount_and_filesystem_marks)
{
	static const unsigned int how[] = { FAN_MARK_MOUNT,
					    FAN_MARK_FILESYSTEM };
	struct reader *r = calloc(1, sizeof(*r));
	unsigned int i;
	void *buf;
	int dfd;

	if (!variant->fs)
		SKIP(return, "direct I/O is tested on a disk file system");
	ASSERT_NE(NULL, r);
	ASSERT_EQ(0, posix_memalign(&buf, 4096, 4096));
	memset(buf, 'm', 4096);
	ASSERT_EQ(65536, pwrite(self->fd, fill, 65536, 0));
	ASSERT_EQ(0, fsync(self->fd));
	close(self->r.fd);
	self->r.fd = -1;
	dfd = open(self->file, O_WRONLY | O_DIRECT);
	ASSERT_LE(0, dfd);
	for (i = 0; i < 2; i++) {
		r->pos = r->end = 0;
		r->fd = fanotify_init(FD_RANGE, O_RDONLY);
		ASSERT_LE(0, r->fd);
		ASSERT_EQ(0, fanotify_mark(r->fd, FAN_MARK_ADD | how[i],
					   FAN_MODIFY, AT_FDCWD, self->dir));
		ASSERT_EQ(4096, aio_pwrite(dfd, buf, 4096, 8192 * (i + 1)));
		EXPECT_RANGE(r, 8192 * (i + 1), 4096);
		close(r->fd);
	}
	close(dfd);
	free(buf);
	free(r);
}

TEST_F(fan, aio_write_reports_its_range)
{
	void *buf;
	int dfd;

	ASSERT_EQ(6, aio_pwrite(self->fd, "kernel", 6, 300));
	EXPECT_RANGE(&self->r, 300, 6);
	if (!variant->fs)
		return;
	/* direct I/O completes in interrupt context: the deferred report */
	ASSERT_EQ(0, posix_memalign(&buf, 4096, 8192));
	memset(buf, 'd', 8192);
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

TEST_F(fan, splice_sendfile_copy_file_range_report_their_ranges)
{
	loff_t off = 2000, in_off = 2, out_off = 200;
	off_t sf_off = 0;
	int p[2], in;

	ASSERT_EQ(0, pipe(p));
	ASSERT_EQ(6, write(p[1], "splice", 6));
	ASSERT_EQ(6, splice(p[0], NULL, self->fd, &off, 6, 0));
	close(p[0]);
	close(p[1]);
	EXPECT_RANGE(&self->r, 2000, 6);

	in = make_source(self->dir, "sendfile-and-copy", 17);
	ASSERT_LE(0, in);
	ASSERT_EQ(50, lseek(self->fd, 50, SEEK_SET));
	ASSERT_EQ(8, sendfile(self->fd, in, &sf_off, 8));
	EXPECT_RANGE(&self->r, 50, 8);
	ASSERT_EQ(10, copy_file_range(in, &in_off, self->fd, &out_off, 10, 0));
	EXPECT_RANGE(&self->r, 200, 10);
	close(in);
}

TEST_F(fan, clone_range_reports_the_destination_range)
{
	struct file_clone_range fcr = { .src_length = 4096,
					.dest_offset = 8192 };
	int in;

	if (!variant->fs)
		SKIP(return, "no reflink on tmpfs");
	in = make_source(self->dir, fill, 4096);
	ASSERT_LE(0, in);
	drain(&self->r);
	fcr.src_fd = in;
	ASSERT_EQ(0, ioctl(self->fd, FICLONERANGE, &fcr));
	close(in);
	EXPECT_RANGE(&self->r, 8192, 4096);
}

TEST_F(fan, fallocate_and_truncate_report_their_ranges)
{
	ASSERT_EQ(0, fallocate(self->fd, 0, 0, 8192));
	EXPECT_RANGE(&self->r, 0, 8192);
	ASSERT_EQ(0, fallocate(self->fd, FALLOC_FL_PUNCH_HOLE |
			       FALLOC_FL_KEEP_SIZE, 4096, 4096));
	EXPECT_RANGE(&self->r, 4096, 4096);
	ASSERT_EQ(0, ftruncate(self->fd, 100));
	EXPECT_RANGE(&self->r, 100, 8092);
	/* by name: no file whose path the range could carry, no range */
	ASSERT_EQ(0, truncate(self->file, 1000));
	EXPECT_NO_RANGE(&self->r);
}

/* Not covered: stores through a shared mapping send no event at all. */
TEST_F(fan, mmap_stores_are_not_reported)
{
	char *p;

	ASSERT_EQ(0, ftruncate(self->fd, 4096));
	drain(&self->r);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	memcpy(p, "mmap", 4);
	ASSERT_EQ(0, msync(p, 4096, MS_SYNC));
	munmap(p, 4096);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

TEST_F(fan, overlapping_writes_merge_into_their_union)
{
	ASSERT_EQ(10, pwrite(self->fd, "0123456789", 10, 20));
	ASSERT_EQ(10, pwrite(self->fd, "0123456789", 10, 15));
	ASSERT_EQ(5, pwrite(self->fd, "01234", 5, 30));
	EXPECT_RANGE(&self->r, 15, 20);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

/* Four disjoint ranges stay exact; more widen the newest event. */
TEST_F(fan, disjoint_writes_beyond_four_widen_one_event)
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

/* A change without a range (an mtime update) makes the range unknown. */
TEST_F(fan, modify_without_range_drops_the_record)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { 12345, 0 } };

	ASSERT_EQ(10, pwrite(self->fd, "0123456789", 10, 0));
	ASSERT_EQ(0, futimens(self->fd, ts));
	EXPECT_NO_RANGE(&self->r);
	EXPECT_NO_MORE_MODIFY(&self->r);
}

/* The record has upstream's layout: header, pad, offset, count. */
TEST_F(fan, range_record_has_the_upstream_layout)
{
	struct fanotify_event_metadata *md;
	struct fanotify_event_info_range rg;
	char buf[4096] __attribute__((aligned(8)));
	ssize_t n;

	ASSERT_EQ(24U, sizeof(struct fanotify_event_info_range));
	ASSERT_EQ(6, FAN_EVENT_INFO_TYPE_RANGE);
	ASSERT_EQ(3, pwrite(self->fd, "abc", 3, 9));
	usleep(100000);
	n = read(self->r.fd, buf, sizeof(buf));
	ASSERT_LT(0, n);
	md = (void *)buf;
	ASSERT_EQ((uint32_t)n, md->event_len);
	/* the range comes last */
	memcpy(&rg, buf + md->event_len - sizeof(rg), sizeof(rg));
	EXPECT_EQ(FAN_EVENT_INFO_TYPE_RANGE, rg.hdr.info_type);
	EXPECT_EQ(0, rg.hdr.pad);
	EXPECT_EQ(24, rg.hdr.len);
	EXPECT_EQ(0U, rg.pad);
	EXPECT_EQ(9ULL, rg.offset);
	EXPECT_EQ(3ULL, rg.count);
}

/*
 * A group in file descriptor mode (privileged) gets path events with ranges.
 * (Character devices, whose ->write may ignore the position, get no range:
 * the inotify tests check that, the rule is fsnotify_modify_range()'s.)
 */
TEST_F(fan, fd_mode_group_gets_ranges)
{
	struct reader *r = calloc(1, sizeof(*r));

	r->fd = watch_file(FD_RANGE, self->file);
	ASSERT_LE(0, r->fd);
	ASSERT_EQ(4, pwrite(self->fd, "path", 4, 64));
	EXPECT_RANGE(r, 64, 4);
	close(r->fd);
	free(r);
}

/*
 * A file of a kernel interface file system (procfs, sysfs) takes commands
 * and values; its ->write may ignore the position: no range record.
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
		SKIP(return, "this kernel has no FAN_REPORT_RANGE");
	for (i = 0; i < ARRAY_SIZE(files); i++) {
		struct reader *r = calloc(1, sizeof(*r));
		struct ev e;
		ssize_t n;
		int fd;

		ASSERT_NE(NULL, r);
		fd = open(files[i], O_RDWR);
		ASSERT_LE(0, fd) TH_LOG("%s: %s", files[i], strerror(errno));
		/* write back what is there: nothing changes but the event */
		n = read(fd, val, sizeof(val));
		ASSERT_LT(0, n);
		if (val[n - 1] == '\n')
			n--;	/* comm would keep it */
		r->fd = watch_file(FD_RANGE, files[i]);
		ASSERT_LE(0, r->fd);
		/* not pwrite(): comm is a seq_file, which refuses it */
		ASSERT_EQ(0, lseek(fd, 0, SEEK_SET));
		ASSERT_EQ(n, write(fd, val, n));
		close(fd);
		ASSERT_EQ(1, next_modify(r, &e));
		EXPECT_FALSE(e.range)
			TH_LOG("a range %llu+%llu for %s",
			       (unsigned long long)e.off,
			       (unsigned long long)e.count, files[i]);
		close(r->fd);
		free(r);
	}
}

/* With the directory's fid and the name: a variable size event */
TEST_F(fan, dfid_name_group_gets_ranges)
{
	struct reader *r = calloc(1, sizeof(*r));

	r->fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME |
			      FAN_REPORT_FID | FAN_REPORT_RANGE | FAN_NONBLOCK,
			      O_RDONLY);
	ASSERT_LE(0, r->fd);
	ASSERT_EQ(0, fanotify_mark(r->fd, FAN_MARK_ADD,
				   FAN_MODIFY | FAN_EVENT_ON_CHILD, AT_FDCWD,
				   self->dir));
	ASSERT_EQ(4, pwrite(self->fd, "name", 4, 128));
	ASSERT_EQ(4, pwrite(self->fd, "name", 4, 132));
	EXPECT_RANGE(r, 128, 8);
	close(r->fd);
	free(r);
}

/* Without FAN_REPORT_RANGE, the event is what it always was. */
TEST(group_without_the_flag_gets_no_record)
{
	char dir[] = "/tmp/fanotify-plain.XXXXXX", path[64];
	struct reader *r = calloc(1, sizeof(*r));
	struct ev e;
	int fd;

	ASSERT_NE(NULL, mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_RDWR | O_CREAT, 0644);
	ASSERT_LE(0, fd);
	r->fd = watch_file(FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_NONBLOCK,
			   path);
	ASSERT_LE(0, r->fd);
	ASSERT_EQ(3, pwrite(fd, "abc", 3, 0));
	ASSERT_EQ(3, pwrite(fd, "abc", 3, 4096));
	ASSERT_EQ(1, next_modify(r, &e));
	EXPECT_FALSE(e.range);
	EXPECT_EQ(FAN_MODIFY, e.mask);
	EXPECT_EQ(0, next_event(r, &e, 300));
	close(fd);
	close(r->fd);
	free(r);
	vm_run("rm -rf %s", dir);
}

/* fdinfo shows the flag among the group's flags. */
TEST(fdinfo_shows_the_flag)
{
	char path[64], line[256];
	unsigned int flags = 0;
	bool found = false;
	FILE *f;
	int fd;

	if (!has_report_range())
		SKIP(return, "this kernel has no FAN_REPORT_RANGE");
	fd = fanotify_init(FID_RANGE, O_RDONLY);
	ASSERT_LE(0, fd);
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "r");
	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "fanotify flags:%x", &flags) == 1)
			found = true;
	fclose(f);
	close(fd);
	ASSERT_TRUE(found);
	EXPECT_EQ(FAN_REPORT_RANGE, flags & FAN_REPORT_RANGE);
}

/* A user without CAP_SYS_ADMIN: file handles, an inode mark, ranges. */
TEST(unprivileged_group_gets_ranges)
{
	char dir[] = "/tmp/fanotify-user.XXXXXX", path[64];
	int st, fd;
	pid_t pid;

	if (!has_report_range())
		SKIP(return, "this kernel has no FAN_REPORT_RANGE");
	ASSERT_NE(NULL, mkdtemp(dir));
	ASSERT_EQ(0, chmod(dir, 0777));
	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_RDWR | O_CREAT, 0666);
	ASSERT_LE(0, fd);
	close(fd);
	ASSERT_EQ(0, chown(path, 65534, 65534));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct reader *r = calloc(1, sizeof(*r));
		struct ev e;

		if (setgid(65534) || setuid(65534))
			_exit(10);
		/* the privileged-only modes are refused */
		if (fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_RANGE,
				  O_RDONLY) >= 0 || errno != EPERM)
			_exit(11);
		r->fd = watch_file(FID_RANGE, path);
		if (r->fd < 0)
			_exit(12);
		fd = open(path, O_WRONLY);
		if (fd < 0 || pwrite(fd, "user", 4, 40) != 4)
			_exit(13);
		close(fd);
		if (next_modify(r, &e) != 1 || !e.range)
			_exit(14);
		if (e.off != 40 || e.count != 4)
			_exit(15);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	EXPECT_EQ(0, WEXITSTATUS(st));
	vm_run("rm -rf %s", dir);
}

/*
 * The merge rule at the default queue size (16384 events): a burst of
 * writes at scattered offsets must not overflow a queue that fanotify
 * without ranges would not overflow.
 */
/* Two files f0 and f1, each with its own inode mark */
static struct burst *burst_new(void)
{
	struct burst *b = burst_alloc("/tmp/fanotify-burst.XXXXXX");
	char path[96];
	int i;

	if (!b)
		return NULL;
	b->r.fd = fanotify_init(FID_RANGE, O_RDONLY);
	if (b->r.fd < 0)
		goto fail;
	/* learn each file's handle from its first event */
	for (i = 0; i < 2; i++) {
		struct ev e;

		snprintf(path, sizeof(path), "%s/f%d", b->dir, i);
		b->fd[i] = open(path, O_RDWR | O_CREAT, 0644);
		if (b->fd[i] < 0 ||
		    fanotify_mark(b->r.fd, FAN_MARK_ADD, FAN_MODIFY, AT_FDCWD,
				  path) ||
		    pwrite(b->fd[i], "x", 1, 0) != 1 ||
		    next_event(&b->r, &e, 2000) != 1 || !e.fh_len ||
		    e.fh_len > sizeof(b->fh[i]))
			goto fail;
		b->fh_len[i] = e.fh_len;
		memcpy(b->fh[i], e.fh, e.fh_len);
	}
	return b;
fail:
	burst_free(b);
	return NULL;
}

/* Read every queued event; the file is the one whose handle it carries */
static void burst_read(struct burst *b)
{
	struct ev e;
	int f;

	while (next_event(&b->r, &e, 300) == 1) {
		if (e.mask & FAN_Q_OVERFLOW) {
			b->overflow = true;
			continue;
		}
		for (f = 0; f < 2; f++)
			if (e.fh_len == b->fh_len[f] &&
			    !memcmp(e.fh, b->fh[f], e.fh_len))
				break;
		if (f < 2 && (e.mask & FAN_MODIFY))
			burst_cover(b, f, &e);
	}
}

TEST_F_TIMEOUT(burst, random_writes_to_one_file_do_not_overflow_the_default_queue, 900)
{
	struct burst *b = self->b;

	ASSERT_TRUE(burst_write(b, 0, 100000));
	burst_read(b);
	EXPECT_FALSE(b->overflow) TH_LOG("100,000 random writes overflowed");
	EXPECT_GE(4, b->events[0]);
	EXPECT_EQ(0, burst_missed(b, 0));
}

TEST_F_TIMEOUT(burst, interleaved_bursts_do_not_overflow_the_default_queue, 900)
{
	struct burst *b = self->b;
	int round;

	for (round = 0; round < 20; round++)
		ASSERT_TRUE(burst_write(b, round & 1, 1000));
	burst_read(b);
	EXPECT_FALSE(b->overflow);
	/* fanotify merges across the queue: four events a file at most */
	EXPECT_GE(4, b->events[0]);
	EXPECT_GE(4, b->events[1]);
	EXPECT_EQ(0, burst_missed(b, 0));
	EXPECT_EQ(0, burst_missed(b, 1));
}

TEST_F_TIMEOUT(burst, plain_event_before_a_ranged_burst_absorbs_it, 900)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { 12345, 0 } };
	struct burst *b = self->b;

	ASSERT_EQ(0, futimens(b->fd[0], ts));
	ASSERT_TRUE(burst_write(b, 0, 20000));
	burst_read(b);
	EXPECT_FALSE(b->overflow);
	EXPECT_EQ(1, b->events[0]);
	EXPECT_EQ(0, burst_missed(b, 0));
}

TEST_HARNESS_MAIN
