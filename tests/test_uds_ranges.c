// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * uds-plus in ranges mode, on any host: the kernel's side of the UDS+
 * interface is simulated at link time. inotify_init1() accepts
 * IN_REPORT_RANGE, and read() turns each plain IN_MODIFY of the watched
 * SAVINGBOX into the range format of the patched kernel, with the ranges
 * the test itself wrote (as the kernel would: one event per disjoint
 * write). The engine runs in this process, step by step.
 *
 * What it proves: with ranges, a push reads and writes only the changed
 * bytes of a large file, truncation and growth come through, and a
 * modification without a range (a write path that does not know) falls
 * back to the block delta; a write whose event was lost in a queue
 * overflow, or that went through another name of the file, is pushed all
 * the same; SYNCFOLDER ends equal to SAVINGBOX every time.
 */
/* wrap: -Wl,--wrap=inotify_init1 -Wl,--wrap=read */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "uds.h"

/* --- the simulated kernel -------------------------------------------- */

int __real_inotify_init1(int flags);
ssize_t __real_read(int fd, void *buf, size_t n);
int __wrap_inotify_init1(int flags);
ssize_t __wrap_read(int fd, void *buf, size_t n);

#define MAX_FDS 8
static int ranged[MAX_FDS];
static int nr_ranged;

struct pending_range {
	char name[256];
	uint64_t off, len;
};
static struct pending_range queue[4096];
static size_t queued;
/* The next plain IN_MODIFY of this name is lost: an overflow instead. */
static char lose_name[256];

int __wrap_inotify_init1(int flags)
{
	int fd;

	if (!(flags & IN_REPORT_RANGE))
		return __real_inotify_init1(flags);
	fd = __real_inotify_init1(flags & ~IN_REPORT_RANGE);
	if (fd >= 0 && nr_ranged < MAX_FDS)
		ranged[nr_ranged++] = fd;
	return fd;
}

static bool is_ranged(int fd)
{
	for (int i = 0; i < nr_ranged; i++)
		if (ranged[i] == fd)
			return true;
	return false;
}

static size_t put_event(unsigned char *out, const struct track_inotify_event *e,
			bool range, uint64_t off, uint64_t len)
{
	struct inotify_event hdr = { .wd = e->wd, .mask = e->mask,
				     .cookie = e->cookie };
	size_t area = e->name_len ? (e->name_len + 1 + 15) / 16 * 16 : 0;

	if (range) {
		if (!area)
			area = 16;
		hdr.mask |= IN_RANGE;
	}
	hdr.len = (uint32_t)(area + (range ? 16 : 0));
	memcpy(out, &hdr, sizeof(hdr));
	memset(out + sizeof(hdr), 0, hdr.len);
	memcpy(out + sizeof(hdr), e->name, e->name_len);
	if (range) {
		memcpy(out + sizeof(hdr) + area, &off, 8);
		memcpy(out + sizeof(hdr) + area + 8, &len, 8);
	}
	return sizeof(hdr) + hdr.len;
}

ssize_t __wrap_read(int fd, void *buf, size_t n)
{
	static unsigned char raw[8192];
	unsigned char *out = buf;
	size_t o = 0, off = 0;
	ssize_t got;

	if (!is_ranged(fd))
		return __real_read(fd, buf, n);
	assert_true(n >= 4 * sizeof(raw));
	got = __real_read(fd, raw, sizeof(raw));
	if (got <= 0)
		return got;
	while (off < (size_t)got) {
		struct track_inotify_event e;
		int len = track_watch_parse(raw + off, (size_t)got - off, &e);
		bool done = false;

		assert_true(len > 0);
		off += (size_t)len;
		if ((e.mask & IN_MODIFY) && e.name_len) {
			/* One ranged event per write the test made. */
			for (size_t i = 0; i < queued; i++) {
				if (strcmp(queue[i].name, e.name))
					continue;
				assert_true(o + 64 + e.name_len < n);
				o += put_event(out + o, &e, true, queue[i].off,
					       queue[i].len);
				memmove(&queue[i], &queue[i + 1],
					(queued - i - 1) * sizeof(queue[0]));
				queued--;
				i--;
				done = true;
			}
		}
		if (!done && lose_name[0] && (e.mask & IN_MODIFY) &&
		    !strcmp(lose_name, e.name)) {
			struct track_inotify_event ov = {
				.wd = -1, .mask = IN_Q_OVERFLOW, .name = "" };

			lose_name[0] = 0;
			o += put_event(out + o, &ov, false, 0, 0);
			done = true;
		}
		if (!done)
			o += put_event(out + o, &e, false, 0, 0);
	}
	return (ssize_t)o;
}

/* A write whose range the "kernel" will report. */
static void expect_range(const char *name, uint64_t off, uint64_t len)
{
	assert_true(queued < sizeof(queue) / sizeof(queue[0]));
	snprintf(queue[queued].name, sizeof(queue[0].name), "%s", name);
	queue[queued].off = off;
	queue[queued].len = len;
	queued++;
}

/* --- fixture ----------------------------------------------------------- */

struct fx {
	char dir[64], s[96], d[96], st[96];
	struct config cfg;
	struct uds u;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/test-uds-ranges.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->s, sizeof(f->s), "%s/savingbox", f->dir);
	snprintf(f->d, sizeof(f->d), "%s/syncfolder", f->dir);
	snprintf(f->st, sizeof(f->st), "%s/state", f->dir);
	if (mkdir(f->s, 0755) || mkdir(f->d, 0755))
		return -1;
	nr_ranged = 0;
	queued = 0;
	lose_name[0] = 0;
	config_defaults(&f->cfg);
	f->cfg.savingbox = strdup(f->s);
	f->cfg.syncfolder = strdup(f->d);
	f->cfg.state_dir = strdup(f->st);
	f->cfg.hostname = strdup("testbox");
	f->cfg.timer_ms = 50;
	f->cfg.failsafe_ms = 400;
	f->cfg.pull_delay_ms = 50;
	f->cfg.fsync = false;
	f->cfg.default_ignores = false;
	if (uds_start(&f->u, &f->cfg))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	uds_finish(&f->u);
	config_free(&f->cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd))
		return -1;
	free(f);
	return 0;
}

static bool same_file(const char *a, const char *b)
{
	int fa = open(a, O_RDONLY), fb = open(b, O_RDONLY);
	struct copy_stats cs = { 0 };
	struct stat sa, sb;
	bool same = false;

	if (fa >= 0 && fb >= 0 && !fstat(fa, &sa) && !fstat(fb, &sb))
		same = fsx_same_content(fa, fb, &cs) == 1 &&
		       sa.st_mtim.tv_sec == sb.st_mtim.tv_sec &&
		       sa.st_mtim.tv_nsec == sb.st_mtim.tv_nsec;
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return same;
}

/* Run the engine until NAME is the same on both sides and nothing waits. */
static void run_until_synced(struct fx *f, const char *name)
{
	char a[256], b[256];

	snprintf(a, sizeof(a), "%s/%s", f->s, name);
	snprintf(b, sizeof(b), "%s/%s", f->d, name);
	for (int i = 0; i < 400; i++) {
		struct track_batch_state st;

		uds_step(&f->u, -1, 20);
		track_batch_pending(f->u.batch, &st);
		if (!f->u.ldirty.len && !f->u.rdirty.len && !st.updates &&
		    same_file(a, b))
			return;
	}
	fail_msg("'%s' did not get synced", name);
}

static void write_file(struct fx *f, const char *name, uint64_t size)
{
	char path[256];
	unsigned char *buf = malloc(size);
	int fd;

	for (uint64_t i = 0; i < size; i++)
		buf[i] = (unsigned char)random();
	snprintf(path, sizeof(path), "%s/%s", f->s, name);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	assert_true(fd >= 0);
	expect_range(name, 0, size);
	assert_int_equal(write(fd, buf, size), (ssize_t)size);
	close(fd);
	free(buf);
}

/* A new file NAME of SIZE random bytes, synced. */
static void write_synced(struct fx *f, const char *name, uint64_t size)
{
	write_file(f, name, size);
	run_until_synced(f, name);
}

static void pwrite_at(struct fx *f, const char *name, uint64_t off,
		      size_t len, bool tell)
{
	char path[256], buf[4096];
	int fd;

	for (size_t i = 0; i < len; i++)
		buf[i] = (char)random();
	snprintf(path, sizeof(path), "%s/%s", f->s, name);
	fd = open(path, O_WRONLY);
	assert_true(fd >= 0);
	if (tell)
		expect_range(name, off, len);
	assert_int_equal(pwrite(fd, buf, len, (off_t)off), (ssize_t)len);
	close(fd);
}

/* --- tests ------------------------------------------------------------- */

static void the_simulated_kernel_gives_ranges_mode(void **state)
{
	struct fx *f = *state;

	assert_int_equal(f->u.mode, TRACK_WATCH_RANGES);
}

static void small_writes_read_and_write_only_what_changed(void **state)
{
	struct fx *f = *state;
	const uint64_t size = 8 << 20;
	uint64_t read0, pushed0;

	write_synced(f, "disk.img", size);
	read0 = f->u.st.bytes_read;
	pushed0 = f->u.st.bytes_pushed;
	for (int i = 0; i < 20; i++)
		pwrite_at(f, "disk.img", (uint64_t)i * 400000 + 12345, 64, true);
	run_until_synced(f, "disk.img");
	/* 64 bytes each: read for the estimate, and S and D at the push. */
	assert_true(f->u.st.bytes_read - read0 <= 20 * 64 * 3);
	assert_int_equal(f->u.st.bytes_pushed - pushed0, 20 * 64);
}

static void truncation_and_growth_come_through(void **state)
{
	struct fx *f = *state;
	char path[256];
	uint64_t read0;

	write_synced(f, "log", 1 << 20);
	snprintf(path, sizeof(path), "%s/log", f->s);
	/* The kernel reports [new size, old size) for a shrink. */
	expect_range("log", 4096, (1 << 20) - 4096);
	assert_int_equal(truncate(path, 4096), 0);
	run_until_synced(f, "log");
	read0 = f->u.st.bytes_read;
	for (int i = 0; i < 10; i++)
		pwrite_at(f, "log", 4096 + (uint64_t)i * 100, 100, true);
	run_until_synced(f, "log");
	assert_true(f->u.st.bytes_read - read0 <= 1000 * 3);
}

static void a_write_without_a_range_falls_back_to_the_delta(void **state)
{
	struct fx *f = *state;
	const uint64_t size = 1 << 20;
	uint64_t read0, pushed0;

	write_synced(f, "doc", size);
	read0 = f->u.st.bytes_read;
	pushed0 = f->u.st.bytes_pushed;
	pwrite_at(f, "doc", 777777, 10, false);
	run_until_synced(f, "doc");
	/* The whole file was compared, and still only the change written. */
	assert_true(f->u.st.bytes_read - read0 >= 2 * size);
	assert_int_equal(f->u.st.bytes_pushed - pushed0, 10);
}

static void overlapping_writes_merge_into_one_range(void **state)
{
	struct fx *f = *state;
	uint64_t pushed0;

	write_synced(f, "db", 256 * 1024);
	pushed0 = f->u.st.bytes_pushed;
	pwrite_at(f, "db", 1000, 100, true);
	pwrite_at(f, "db", 1050, 100, true);	/* overlaps */
	pwrite_at(f, "db", 1150, 50, true);	/* touches */
	run_until_synced(f, "db");
	assert_true(f->u.st.bytes_pushed - pushed0 <= 200);
}

/*
 * A write whose range is pending, then one whose event the queue lost:
 * the rescan after the overflow must not take the pending range for all
 * that changed.
 */
static void a_write_lost_in_an_overflow_is_pushed_too(void **state)
{
	struct fx *f = *state;
	uint64_t rescans0;

	write_synced(f, "db", 256 * 1024);
	rescans0 = f->u.st.rescans;
	pwrite_at(f, "db", 1000, 100, true);
	uds_step(&f->u, -1, 0);		/* its range is read: pending */
	assert_non_null(hmap_get(&f->u.ldirty, "db"));
	strcpy(lose_name, "db");
	pwrite_at(f, "db", 100000, 100, false);
	run_until_synced(f, "db");
	assert_true(f->u.st.rescans > rescans0);
}

/*
 * Two names of one file: a write through "b" is reported for "b" only,
 * so a later range of "a" is not all that changed in "a".
 */
static void a_write_through_another_name_is_pushed_too(void **state)
{
	struct fx *f = *state;
	char a[256], b[256];

	write_synced(f, "a", 64 * 1024);
	snprintf(a, sizeof(a), "%s/a", f->s);
	snprintf(b, sizeof(b), "%s/b", f->s);
	assert_int_equal(link(a, b), 0);
	run_until_synced(f, "b");
	pwrite_at(f, "b", 5000, 100, true);
	run_until_synced(f, "b");
	pwrite_at(f, "a", 40000, 100, true);
	run_until_synced(f, "a");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(t) cmocka_unit_test_setup_teardown(t, setup, teardown)
		T(the_simulated_kernel_gives_ranges_mode),
		T(small_writes_read_and_write_only_what_changed),
		T(truncation_and_growth_come_through),
		T(a_write_without_a_range_falls_back_to_the_delta),
		T(overlapping_writes_merge_into_one_range),
		T(a_write_lost_in_an_overflow_is_pushed_too),
		T(a_write_through_another_name_is_pushed_too),
#undef T
	};

	log_setup("test", false, LOG_ERR_);
	srandom(6);
	return cmocka_run_group_tests_name("uds_ranges", tests, NULL, NULL);
}
