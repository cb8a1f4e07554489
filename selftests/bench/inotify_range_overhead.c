// SPDX-License-Identifier: GPL-2.0
/*
 * Cost of IN_REPORT_RANGE on the write path: a tight loop of 4 KiB
 * write(2)s to a file on tmpfs (so the notification is a large share of
 * each write), unwatched, watched by plain inotify, and watched with
 * IN_REPORT_RANGE, with a reader draining the events as a sync client
 * would. Rounds alternate the three; best of each is kept. Prints the
 * ratios; absolute numbers under QEMU TCG mean little.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "bench_smoke.h"

#include <libtrack/watch.h>	/* IN_REPORT_RANGE, for headers without it */

#define BS		4096
#define NR_WRITES	BENCH_SIZE(40000, 64)
#define SPAN		BENCH_SIZE(4096, 16)	/* blocks: 16 MiB, then wrap */
#define ROUNDS		BENCH_SIZE(5, 1)

static const char *const names[] = { "unwatched", "inotify", "inotify+ranges" };

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static atomic_int stop;

/* The reader a sync client would be: drain until told to stop. */
static void *drain(void *arg)
{
	char buf[65536] __attribute__((aligned(8)));
	struct pollfd pfd = { .fd = *(int *)arg, .events = POLLIN };

	while (!atomic_load(&stop))
		if (poll(&pfd, 1, 50) == 1 &&
		    read(pfd.fd, buf, sizeof(buf)) < 0 && errno != EAGAIN)
			break;
	return NULL;
}

/* Seconds for NR_WRITES sequential 4 KiB writes in MODE. */
static double run(const char *dir, int mode)
{
	static char buf[BS];
	char path[256];
	pthread_t th;
	int fd, ifd = -1, i;
	double t;

	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	if (mode) {
		ifd = inotify_init1(IN_NONBLOCK |
				    (mode == 2 ? IN_REPORT_RANGE : 0));
		if (ifd < 0 || inotify_add_watch(ifd, dir, IN_MODIFY) < 0)
			return -1;
		atomic_store(&stop, 0);
		pthread_create(&th, NULL, drain, &ifd);
	}
	t = now();
	for (i = 0; i < NR_WRITES; i++) {
		if (i % SPAN == 0)
			lseek(fd, 0, SEEK_SET);
		if (write(fd, buf, BS) != BS)
			return -1;
	}
	t = now() - t;
	close(fd);
	if (mode) {
		atomic_store(&stop, 1);
		pthread_join(th, NULL);
		close(ifd);
	}
	return t;
}

int main(void)
{
	char dir[] = "/tmp/inotify-bench.XXXXXX", path[64];
	double best[3] = { 1e9, 1e9, 1e9 };
	int r, m, fd;

	fd = inotify_init1(IN_REPORT_RANGE);
	if (fd < 0) {
		printf("no IN_REPORT_RANGE: nothing to measure\n");
		return 0;
	}
	close(fd);
	if (!mkdtemp(dir))
		return 1;
	for (r = 0; r < ROUNDS; r++)
		for (m = 0; m < 3; m++) {
			double t = run(dir, m);

			if (t < 0) {
				fprintf(stderr, "%s: %s\n", names[m],
					strerror(errno));
				return 1;
			}
			if (t < best[m])
				best[m] = t;
		}
	printf("inotify write path, %d write(2)s of 4 KiB to a watched file on tmpfs, best of %d (QEMU TCG)\n",
	       NR_WRITES, ROUNDS);
	printf("%-16s %12s %14s\n", "watcher", "writes/s", "vs unwatched");
	for (m = 0; m < 3; m++)
		printf("%-16s %12.0f %14.3f\n", names[m], NR_WRITES / best[m],
		       best[m] / best[0]);
	printf("ranges on vs off (inotify+ranges / inotify): %.3f\n",
	       best[2] / best[1]);
	snprintf(path, sizeof(path), "%s/file", dir);
	unlink(path);
	rmdir(dir);
	return 0;
}
