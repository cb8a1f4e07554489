// SPDX-License-Identifier: GPL-2.0
/*
 * uds_workload: the UDS paper's short-update workloads (sections 3 and 4),
 * written into FILE at SPEEDUP times their real pace, from a seed, by one
 * process paced against a monotonic clock (the schedule is absolute, so
 * the writer never drifts; how late it ever was is reported).
 *
 *   uds_workload appends  FILE SPEEDUP SEED [BYTES]   1 random byte every
 *                           1 s until FILE holds BYTES (1024: the paper's
 *                           Fig. 4 and 5)
 *   uds_workload download FILE SPEEDUP SEED [BYTES]   a compressed file
 *                           fetched at 80 kbit/s: 1000 random bytes every
 *                           0.1 s until BYTES (5000000: Fig. 16 and 21)
 *   uds_workload collab   FILE SPEEDUP SEED [SECONDS] one user of the
 *                           collaborative edit: every 0-10 s, 1-10
 *                           random ASCII bytes written at a random place
 *                           or appended (even odds), in place, for
 *                           SECONDS (3600); FILE must exist
 *   uds_workload log      FILE SPEEDUP SEED [SECONDS] an active user's
 *                           log (Fig. 15 and 22; the trace is not
 *                           public, so a seeded one of its shape): lines
 *                           of 40-200 bytes, bursts 0.2-1.5 s apart and
 *                           pauses of 9.6 s on average between them (a
 *                           fifth of the gaps), mean 2.6 s, for SECONDS
 *                           (14400: four hours)
 *   uds_workload ascii    FILE BYTES SEED         make FILE: random ASCII
 *
 * Prints "updates N bytes_written N size N late_max_ms N". Each update
 * is one write() on a descriptor kept open, as a browser, an editor
 * saving in place, or a logger would.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t rng;

/* splitmix64: seeded, the same sequence on every machine */
static uint64_t next_u64(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static double uniform(void)
{
	return (double)(next_u64() >> 11) / 9007199254740992.0;
}

/* uniform integer in [lo, hi] */
static uint64_t between(uint64_t lo, uint64_t hi)
{
	return lo + next_u64() % (hi - lo + 1);
}

static void fill_random(unsigned char *p, size_t n)
{
	while (n--)
		*p++ = (unsigned char)next_u64();
}

static void fill_ascii(unsigned char *p, size_t n)
{
	while (n--)
		*p++ = (unsigned char)(' ' + next_u64() % 95);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double start, late_max;

/* Sleep until AT seconds (of the workload's real time) after the start. */
static void wait_until(double at, double speedup)
{
	double t = start + at / speedup, late = now() - t;
	struct timespec ts;

	if (late > late_max)
		late_max = late;
	if (late >= 0)
		return;
	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR)
		;
}

static void die(const char *what)
{
	fprintf(stderr, "uds_workload: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void put(int fd, const unsigned char *buf, size_t n, off_t at)
{
	ssize_t w = at < 0 ? write(fd, buf, n) : pwrite(fd, buf, n, at);

	if (w != (ssize_t)n)
		die("write");
}

static int usage(void)
{
	fprintf(stderr,
		"usage: uds_workload appends|download FILE SPEEDUP SEED [BYTES]\n"
		"       uds_workload collab|log FILE SPEEDUP SEED [SECONDS]\n"
		"       uds_workload ascii FILE BYTES SEED\n");
	return 2;
}

int main(int argc, char **argv)
{
	unsigned long long updates = 0, written = 0;
	unsigned char buf[1000];
	double speedup, t = 0, limit;
	const char *w;
	struct stat st;
	int fd;

	if (argc < 5 || argc > 6)
		return usage();
	w = argv[1];
	rng = strtoull(argv[4], NULL, 10);
	if (!strcmp(w, "ascii")) {
		unsigned long long n = strtoull(argv[3], NULL, 10);

		fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die(argv[2]);
		while (n) {
			size_t k = n < sizeof(buf) ? n : sizeof(buf);

			fill_ascii(buf, k);
			put(fd, buf, k, -1);
			n -= k;
		}
		return close(fd) ? 1 : 0;
	}
	speedup = strtod(argv[3], NULL);
	if (!(speedup > 0))
		return usage();
	if (!strcmp(w, "appends") || !strcmp(w, "download")) {
		int dl = !strcmp(w, "download");
		unsigned long long total = argc > 5 ?
			strtoull(argv[5], NULL, 10) : dl ? 5000000 : 1024;
		size_t chunk = dl ? 1000 : 1;
		double step = dl ? 0.1 : 1.0;

		fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd < 0)
			die(argv[2]);
		start = now();
		while (written < total) {
			size_t n = total - written < chunk ?
				   total - written : chunk;

			wait_until(t, speedup);
			fill_random(buf, n);
			put(fd, buf, n, -1);
			written += n;
			updates++;
			t += step;
		}
	} else if (!strcmp(w, "collab") || !strcmp(w, "log")) {
		int log = !strcmp(w, "log");

		limit = argc > 5 ? strtod(argv[5], NULL) : log ? 14400 : 3600;
		fd = open(argv[2], log ? O_WRONLY | O_CREAT | O_APPEND : O_WRONLY,
			  0644);
		if (fd < 0 || fstat(fd, &st))
			die(argv[2]);
		if (!log && st.st_size < 10) {
			fprintf(stderr, "uds_workload: %s: make it first "
				"(uds_workload ascii)\n", argv[2]);
			return 1;
		}
		start = now();
		for (;;) {
			size_t n;
			off_t at = -1;

			if (log) {
				/* 4/5 of the gaps in a burst, 1/5 a pause */
				t += uniform() < 0.8 ? 0.2 + 1.3 * uniform() :
				     -9.6 * log1p(-uniform());
			} else {
				t += 10.0 * uniform();
			}
			if (t > limit)
				break;
			wait_until(t, speedup);
			if (log) {
				n = between(40, 200);
				fill_ascii(buf, n - 1);
				buf[n - 1] = '\n';
			} else {
				n = between(1, 10);
				fill_ascii(buf, n);
				if (uniform() < 0.5)
					at = (off_t)between(0, st.st_size - n);
				else
					at = st.st_size;
				if (at + (off_t)n > st.st_size)
					st.st_size = at + n;
			}
			put(fd, buf, n, at);
			written += n;
			updates++;
		}
	} else {
		return usage();
	}
	if (fstat(fd, &st) || close(fd))
		die(argv[2]);
	printf("updates %llu bytes_written %llu size %llu late_max_ms %.0f\n",
	       updates, written, (unsigned long long)st.st_size,
	       late_max * 1000);
	return 0;
}
