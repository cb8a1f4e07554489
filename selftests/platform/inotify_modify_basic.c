// SPDX-License-Identifier: GPL-2.0
/*
 * The VM platform itself: plain inotify reports IN_MODIFY for a write to a
 * watched file, in the upstream event format.
 */
#include <poll.h>
#include <sys/inotify.h>

#include "kselftest_harness.h"
#include "vmtest.h"

FIXTURE(watch) {
	char dir[64];
	int ifd;
	int wd;
};

FIXTURE_SETUP(watch)
{
	strcpy(self->dir, "/tmp/inotify-basic.XXXXXX");
	ASSERT_NE(NULL, mkdtemp(self->dir));
	self->ifd = inotify_init1(IN_NONBLOCK);
	ASSERT_LE(0, self->ifd);
	self->wd = inotify_add_watch(self->ifd, self->dir, IN_MODIFY);
	ASSERT_LE(0, self->wd);
}

FIXTURE_TEARDOWN(watch)
{
	close(self->ifd);
	vm_run("rm -rf %s", self->dir);
}

TEST_F(watch, write_to_file_in_watched_dir_reports_in_modify)
{
	char path[128], buf[4096] __attribute__((aligned(8)));
	struct inotify_event *ev = (void *)buf;
	struct pollfd pfd = { .fd = self->ifd, .events = POLLIN };
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/file", self->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	ASSERT_LE(0, fd);
	ASSERT_EQ(5, write(fd, "hello", 5));
	close(fd);

	ASSERT_EQ(1, poll(&pfd, 1, 5000));
	n = read(self->ifd, buf, sizeof(buf));
	ASSERT_LE((ssize_t)sizeof(*ev), n);
	EXPECT_EQ(self->wd, ev->wd);
	EXPECT_EQ((uint32_t)IN_MODIFY, ev->mask);
	ASSERT_LT(0U, ev->len);
	EXPECT_STREQ("file", ev->name);
	EXPECT_EQ(sizeof(*ev) + ev->len, (size_t)n);
}

TEST_HARNESS_MAIN
