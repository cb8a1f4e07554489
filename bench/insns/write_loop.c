// SPDX-License-Identifier: GPL-2.0
/*
 * The whole userspace of a guest boot for bench/write-path-insns.sh: as
 * /init, mount a tmpfs, write n= 4 KiB blocks to a file there (the first
 * 16 MiB, again and again) as watched by mode=, then power off. The kernel
 * passes n= and mode= from its command line in the environment.
 *
 *   none             nobody watches
 *   inotify          plain inotify on the file's directory, never read
 *   inotify-ranges   the same with IN_REPORT_RANGE
 *   fanotify         plain fanotify, file handles, an inode mark on the file
 *   fanotify-ranges  the same with FAN_REPORT_RANGE
 *
 * Nobody reads the events: every write merges into the one queued event,
 * so the count is the write path's, not the scheduler's. sync() before
 * and after the writes marks what the plugin counts (bench/insns/tbcount.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef IN_REPORT_RANGE
#define IN_REPORT_RANGE 0x08000000
#endif
#ifndef FAN_REPORT_RANGE
#define FAN_REPORT_RANGE 0x00800000
#endif

static int watch(const char *mode)
{
	unsigned int fan = FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_NONBLOCK;
	int fd;

	if (!strcmp(mode, "none"))
		return 0;
	if (!strncmp(mode, "inotify", 7)) {
		fd = inotify_init1(IN_NONBLOCK | (strstr(mode, "ranges") ?
						  IN_REPORT_RANGE : 0));
		if (fd < 0 || inotify_add_watch(fd, "/tmp/d", IN_MODIFY) < 0)
			return -1;
		return 0;
	}
	if (!strncmp(mode, "fanotify", 8)) {
		fd = fanotify_init(fan | (strstr(mode, "ranges") ?
					  FAN_REPORT_RANGE : 0), O_RDONLY);
		if (fd < 0 || fanotify_mark(fd, FAN_MARK_ADD, FAN_MODIFY,
					    AT_FDCWD, "/tmp/d/file"))
			return -1;
		return 0;
	}
	return -1;
}

int main(void)
{
	static char buf[4096];
	const char *mode = getenv("mode") ? getenv("mode") : "none";
	long n = getenv("n") ? atol(getenv("n")) : 0, i;
	int fd;

	mkdir("/tmp", 0755);
	mount("tmpfs", "/tmp", "tmpfs", 0, NULL);
	mkdir("/tmp/d", 0755);
	fd = open("/tmp/d/file", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || watch(mode)) {
		printf("write-loop: mode %s: %m\n", mode);
		goto out;
	}
	sync();
	for (i = 0; i < n; i++) {
		if (i % 4096 == 0)
			lseek(fd, 0, SEEK_SET);
		if (write(fd, buf, sizeof(buf)) != sizeof(buf)) {
			printf("write-loop: write: %m\n");
			goto out;
		}
	}
	sync();
	printf("write-loop: mode %s, %ld writes: ok\n", mode, n);
out:
	fflush(stdout);
	reboot(RB_POWER_OFF);
	return 0;
}
