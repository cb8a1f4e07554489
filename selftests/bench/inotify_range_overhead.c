// SPDX-License-Identifier: GPL-2.0
/*
 * Cost of the range channel on the write path: a tight loop of 4 KiB
 * write(2)s to a file on tmpfs (so the notification is a large share of
 * each write), unwatched, watched by plain inotify, with IN_REPORT_RANGE,
 * by plain fanotify (file handles, an inode mark) and with
 * FAN_REPORT_RANGE, with a reader draining the events as a sync client
 * would. Rounds alternate the cases; best of each is kept.
 *
 * With a reader, how many events a write costs depends on when the reader
 * runs, which is up to the scheduler: each case also prints the events
 * and read(2)s per 1000 writes of its best round, and the plain groups run
 * once more without a reader ("unread": the group's queue holds one event
 * and every write merges into it), which isolates the write path's own
 * cost from the scheduler's.
 *
 * The same program runs on the patched kernel (boot "benchcount") and on the
 * same configuration without the series (boot "benchunpatched"), where
 * the ranged cases are skipped; bench/async-cost.sh puts the two side by
 * side from the lines
 *
 *   write-loop KERNEL CASE WRITES_PER_SECOND
 *
 * Absolute numbers under QEMU TCG mean little; ratios from one run do.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "bench_smoke.h"

#include <libtrack/watch.h>	/* IN_REPORT_RANGE, for headers without it */

#define BS		4096
#define NR_WRITES	BENCH_SIZE(40000, 64)
#define SPAN		BENCH_SIZE(4096, 16)	/* blocks: 16 MiB, then wrap */
#define ROUNDS		BENCH_SIZE(5, 1)

#ifndef FAN_REPORT_RANGE
#define FAN_REPORT_RANGE 0x00800000
#endif

enum {
	UNWATCHED, INOTIFY, INOTIFY_RANGES, FANOTIFY, FANOTIFY_RANGES,
	INOTIFY_UNREAD, FANOTIFY_UNREAD, NR_CASES
};

static const char *const names[NR_CASES] = {
	"unwatched", "inotify", "inotify+ranges", "fanotify", "fanotify+ranges",
	"inotify/unread", "fanotify/unread",
};

/* Events and read(2)s the reader of the current round got */
static atomic_long nr_events, nr_reads;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static atomic_int stop;

struct watcher {
	int fd;
	bool fanotify;
};

/* The reader a sync client would be: drain until told to stop. */
static void *drain(void *arg)
{
	char buf[65536] __attribute__((aligned(8)));
	const struct watcher *w = arg;
	struct pollfd pfd = { .fd = w->fd, .events = POLLIN };
	ssize_t n, off;

	while (!atomic_load(&stop)) {
		if (poll(&pfd, 1, 50) != 1)
			continue;
		n = read(pfd.fd, buf, sizeof(buf));
		if (n < 0 && errno != EAGAIN)
			break;
		atomic_fetch_add(&nr_reads, 1);
		/* count the events: both formats start with their length */
		for (off = 0; off < n; atomic_fetch_add(&nr_events, 1))
			if (w->fanotify)
				off += ((struct fanotify_event_metadata *)
					(buf + off))->event_len;
			else
				off += sizeof(struct inotify_event) +
				       ((struct inotify_event *)(buf + off))->len;
	}
	return NULL;
}

/* A notification group of case C watching PATH for modifications */
static int watch(int c, const char *dir, const char *path)
{
	unsigned int fan = FAN_CLASS_NOTIF | FAN_REPORT_FID | FAN_NONBLOCK;
	int fd;

	switch (c) {
	case INOTIFY:
	case INOTIFY_RANGES:
	case INOTIFY_UNREAD:
		fd = inotify_init1(IN_NONBLOCK |
				   (c == INOTIFY_RANGES ? IN_REPORT_RANGE : 0));
		if (fd >= 0 && inotify_add_watch(fd, dir, IN_MODIFY) < 0) {
			close(fd);
			return -1;
		}
		return fd;
	default:
		fd = fanotify_init(fan | (c == FANOTIFY_RANGES ?
					  FAN_REPORT_RANGE : 0), O_RDONLY);
		if (fd >= 0 && fanotify_mark(fd, FAN_MARK_ADD, FAN_MODIFY,
					     AT_FDCWD, path)) {
			close(fd);
			return -1;
		}
		return fd;
	}
}

/*
 * Seconds for NR_WRITES sequential 4 KiB writes in case C; the reader's
 * events and reads in *EVENTS and *READS.
 */
static double run(const char *dir, int c, long *events, long *reads)
{
	static char buf[BS];
	struct watcher w = {
		.fd = -1,
		.fanotify = c == FANOTIFY || c == FANOTIFY_RANGES,
	};
	bool reader = c != UNWATCHED && c != INOTIFY_UNREAD &&
		      c != FANOTIFY_UNREAD;
	char path[256];
	pthread_t th;
	int fd, i;
	double t;

	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	if (c != UNWATCHED) {
		w.fd = watch(c, dir, path);
		if (w.fd < 0)
			return -1;
	}
	atomic_store(&nr_events, 0);
	atomic_store(&nr_reads, 0);
	if (reader) {
		atomic_store(&stop, 0);
		pthread_create(&th, NULL, drain, &w);
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
	if (reader) {
		atomic_store(&stop, 1);
		pthread_join(th, NULL);
	}
	if (w.fd >= 0)
		close(w.fd);
	*events = atomic_load(&nr_events);
	*reads = atomic_load(&nr_reads);
	return t;
}

/* Whether this kernel has the series: inotify_init1(IN_REPORT_RANGE) */
static bool has_ranges(void)
{
	int fd = inotify_init1(IN_REPORT_RANGE);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

int main(void)
{
	char dir[] = "/tmp/inotify-bench.XXXXXX", path[64];
	double best[NR_CASES];
	long events[NR_CASES] = { 0 }, reads[NR_CASES] = { 0 };
	bool ranges = has_ranges();
	const char *kernel = ranges ? "patched" : "unpatched";
	int r, c;

	if (!mkdtemp(dir))
		return 1;
	for (c = 0; c < NR_CASES; c++)
		best[c] = 1e9;
	for (r = 0; r < ROUNDS; r++)
		for (c = 0; c < NR_CASES; c++) {
			long ev, rd;
			double t;

			/* no ranged group without the series */
			if (!ranges &&
			    (c == INOTIFY_RANGES || c == FANOTIFY_RANGES))
				continue;
			t = run(dir, c, &ev, &rd);
			if (t < 0) {
				fprintf(stderr, "%s: %s\n", names[c],
					strerror(errno));
				return 1;
			}
			if (t < best[c]) {
				best[c] = t;
				events[c] = ev;
				reads[c] = rd;
			}
		}
	printf("write path, %d write(2)s of 4 KiB to a watched file on tmpfs, best of %d (QEMU TCG), %s kernel\n",
	       NR_WRITES, ROUNDS, kernel);
	printf("%-16s %12s %14s %20s %18s\n", "watcher", "writes/s",
	       "time/unwatched", "events/1000 writes", "reads/1000 writes");
	for (c = 0; c < NR_CASES; c++)
		if (best[c] < 1e9)
			printf("%-16s %12.0f %14.3f %20.1f %18.1f\n", names[c],
			       NR_WRITES / best[c], best[c] / best[UNWATCHED],
			       1000.0 * events[c] / NR_WRITES,
			       1000.0 * reads[c] / NR_WRITES);
	if (ranges) {
		printf("ranges on vs off (inotify+ranges / inotify): %.3f\n",
		       best[INOTIFY_RANGES] / best[INOTIFY]);
		printf("ranges on vs off (fanotify+ranges / fanotify): %.3f\n",
		       best[FANOTIFY_RANGES] / best[FANOTIFY]);
	}
	for (c = 0; c < NR_CASES; c++)
		if (best[c] < 1e9)
			printf("write-loop %s %s %.0f\n", kernel, names[c],
			       NR_WRITES / best[c]);
	snprintf(path, sizeof(path), "%s/file", dir);
	unlink(path);
	rmdir(dir);
	return 0;
}
