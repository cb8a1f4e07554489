// SPDX-License-Identifier: GPL-2.0
/*
 * appender: append CHUNK random bytes to FILE every INTERVAL_US
 * microseconds until it holds TOTAL bytes (the UDS paper's CPU benchmark
 * writer: 2 KB every 200 ms up to 10 MB). One process, paced against a
 * monotonic clock, so the writer costs little and drifts not at all.
 *
 *   appender FILE CHUNK INTERVAL_US TOTAL
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned long chunk, interval, total, done = 0;
	struct timespec next;
	unsigned char *buf;
	int fd, rnd;

	if (argc != 5) {
		fprintf(stderr, "usage: appender FILE CHUNK INTERVAL_US TOTAL\n");
		return 2;
	}
	chunk = strtoul(argv[2], NULL, 10);
	interval = strtoul(argv[3], NULL, 10);
	total = strtoul(argv[4], NULL, 10);
	buf = malloc(chunk);
	fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND, 0644);
	rnd = open("/dev/urandom", O_RDONLY);
	if (!buf || fd < 0 || rnd < 0) {
		perror("appender");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (done < total) {
		unsigned long n = total - done < chunk ? total - done : chunk;

		if (read(rnd, buf, n) != (ssize_t)n ||
		    write(fd, buf, n) != (ssize_t)n) {
			perror("appender");
			return 1;
		}
		done += n;
		next.tv_nsec += (long)(interval % 1000000) * 1000;
		next.tv_sec += (time_t)(interval / 1000000 +
					(unsigned long)next.tv_nsec / 1000000000);
		next.tv_nsec %= 1000000000;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	close(fd);
	return 0;
}
