// SPDX-License-Identifier: GPL-2.0
/*
 * libtrack's watcher on the patched kernel: track_watch_* reports the exact
 * byte range of each write, for files in a watched tree (including a
 * directory created after the watch), with disjoint writes apart and
 * touching ones merged; TRACK_WATCH_NO_RANGES still says "whole file".
 * Runs with fanotify's range record, and again with
 * LIBTRACK_WATCH_BACKEND=inotify on the inotify extension (tests.list).
 * Skips on a kernel without either.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>

#include "kselftest_harness.h"
#include "vmtest.h"

#include <libtrack.h>

FIXTURE(tree) {
	char dir[64];
	struct track_watch *w;
};

FIXTURE_SETUP(tree)
{
	strcpy(self->dir, "/tmp/watch-ranges.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	ASSERT_EQ(0, track_watch_new(0, &self->w));
	if (track_watch_get_mode(self->w) == TRACK_WATCH_PLAIN)
		SKIP(return, "this kernel reports no write ranges");
	ASSERT_EQ(0, track_watch_add(self->w, self->dir));
}

FIXTURE_TEARDOWN(tree)
{
	track_watch_free(self->w);
	vm_run("rm -rf %s", self->dir);
}

/* The next MODIFY event, skipping creates and attribute changes. */
static int next_modify(struct track_watch *w, struct track_event *ev)
{
	int n;

	while ((n = track_watch_next(w, ev, 2000)) == 1)
		if (ev->kind == TRACK_EVENT_MODIFY)
			return 1;
	return n;
}

static int open_in(const char *dir, const char *name, int flags)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return open(path, flags | O_CREAT, 0644);
}

TEST_F(tree, write_reports_its_exact_range)
{
	struct track_event ev;
	char hundred[100] = { 1 };
	int fd = open_in(self->dir, "file", O_WRONLY);

	ASSERT_LE(0, fd);
	ASSERT_EQ(5, write(fd, "hello", 5));
	ASSERT_EQ(100, pwrite(fd, hundred, 100, 4096));
	close(fd);
	ASSERT_EQ(1, next_modify(self->w, &ev));
	EXPECT_STREQ("file", ev.path);
	ASSERT_NE(0U, ev.flags & TRACK_EVENT_RANGE);
	EXPECT_EQ(0ULL, ev.offset);
	EXPECT_EQ(5ULL, ev.length);
	ASSERT_EQ(1, next_modify(self->w, &ev));
	ASSERT_NE(0U, ev.flags & TRACK_EVENT_RANGE);
	EXPECT_EQ(4096ULL, ev.offset);
	EXPECT_EQ(100ULL, ev.length);
}

TEST_F(tree, append_reports_where_the_data_landed)
{
	struct track_event ev;
	int fd = open_in(self->dir, "log", O_WRONLY | O_APPEND);

	ASSERT_LE(0, fd);
	ASSERT_EQ(6, write(fd, "first\n", 6));
	ASSERT_EQ(1, next_modify(self->w, &ev));
	ASSERT_EQ(7, write(fd, "second\n", 7));
	ASSERT_EQ(1, next_modify(self->w, &ev));
	close(fd);
	ASSERT_NE(0U, ev.flags & TRACK_EVENT_RANGE);
	EXPECT_EQ(6ULL, ev.offset);
	EXPECT_EQ(7ULL, ev.length);
}

TEST_F(tree, truncate_reports_the_bytes_between_the_sizes)
{
	static const char buf[8192];
	struct track_event ev;
	int fd = open_in(self->dir, "t", O_WRONLY);

	ASSERT_LE(0, fd);
	ASSERT_EQ(8192, write(fd, buf, sizeof(buf)));
	ASSERT_EQ(1, next_modify(self->w, &ev));
	ASSERT_EQ(0, ftruncate(fd, 1000));
	close(fd);
	ASSERT_EQ(1, next_modify(self->w, &ev));
	ASSERT_NE(0U, ev.flags & TRACK_EVENT_RANGE);
	EXPECT_EQ(1000ULL, ev.offset);
	EXPECT_EQ(7192ULL, ev.length);
}

TEST_F(tree, disjoint_writes_apart_touching_writes_merged)
{
	struct track_event ev;
	int fd = open_in(self->dir, "db", O_WRONLY);

	ASSERT_LE(0, fd);
	ASSERT_EQ(10, pwrite(fd, "0123456789", 10, 0));
	ASSERT_EQ(10, pwrite(fd, "0123456789", 10, 10));	/* touches */
	ASSERT_EQ(10, pwrite(fd, "0123456789", 10, 1000));	/* apart */
	close(fd);
	ASSERT_EQ(1, next_modify(self->w, &ev));
	EXPECT_EQ(0ULL, ev.offset);
	EXPECT_EQ(20ULL, ev.length);
	ASSERT_EQ(1, next_modify(self->w, &ev));
	EXPECT_EQ(1000ULL, ev.offset);
	EXPECT_EQ(10ULL, ev.length);
}

TEST_F(tree, new_directory_is_watched_with_ranges)
{
	struct track_event ev;
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/sub", self->dir);
	ASSERT_EQ(0, mkdir(path, 0755));
	/* Let the watcher see the directory and add its watch. */
	ASSERT_EQ(1, track_watch_next(self->w, &ev, 2000));
	EXPECT_EQ(TRACK_EVENT_CREATE, (int)ev.kind);
	fd = open_in(path, "inner", O_WRONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(3, pwrite(fd, "abc", 3, 77));
	close(fd);
	ASSERT_EQ(1, next_modify(self->w, &ev));
	EXPECT_STREQ("sub/inner", ev.path);
	EXPECT_EQ(77ULL, ev.offset);
	EXPECT_EQ(3ULL, ev.length);
}

#ifndef FAN_REPORT_RANGE
#define FAN_REPORT_RANGE 0x00800000
#endif

/*
 * A kernel with both range channels gives fanotify's, unless the
 * environment asks for inotify: otherwise the runs of this file under
 * either backend could silently test the same one twice.
 */
TEST(the_watcher_uses_the_backend_asked_for)
{
	const char *env = getenv("LIBTRACK_WATCH_BACKEND");
	bool inotify = env && !strcmp(env, "inotify");
	struct track_watch *w;
	int fd;

	fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME |
			   FAN_REPORT_FID | FAN_REPORT_RANGE, O_RDONLY);
	if (fd < 0)
		SKIP(return, "this kernel has no FAN_REPORT_RANGE");
	close(fd);
	ASSERT_EQ(0, track_watch_new(0, &w));
	EXPECT_EQ(inotify ? TRACK_WATCH_RANGES : TRACK_WATCH_FANOTIFY,
		  (int)track_watch_get_mode(w));
	track_watch_free(w);
	ASSERT_EQ(0, track_watch_new(TRACK_WATCH_INOTIFY, &w));
	EXPECT_EQ(TRACK_WATCH_RANGES, (int)track_watch_get_mode(w));
	track_watch_free(w);
}

TEST(plain_mode_still_says_whole_file)
{
	char dir[] = "/tmp/watch-plain.XXXXXX", path[64];
	struct track_watch *w;
	struct track_event ev;
	int fd;

	ASSERT_NE(NULL, mkdtemp(dir));
	ASSERT_EQ(0, track_watch_new(TRACK_WATCH_NO_RANGES, &w));
	EXPECT_EQ(TRACK_WATCH_PLAIN, (int)track_watch_get_mode(w));
	ASSERT_EQ(0, track_watch_add(w, dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	ASSERT_LE(0, fd);
	ASSERT_EQ(1, write(fd, "x", 1));
	close(fd);
	ASSERT_EQ(1, next_modify(w, &ev));
	EXPECT_EQ(0U, ev.flags & TRACK_EVENT_RANGE);
	EXPECT_EQ((uint64_t)TRACK_WHOLE_FILE, ev.length);
	track_watch_free(w);
	vm_run("rm -rf %s", dir);
}

TEST_HARNESS_MAIN
