// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The raw floor of a sync that knows its dirty blocks: read exactly those
 * blocks of SRC and write them at the same offsets of DST, runs coalesced
 * (a run is one read and one write, in pieces of at most 1 MiB), in block
 * order, then fsync DST. Readahead is off (POSIX_FADV_RANDOM), so only
 * the dirty blocks are read, each run by one request. No stream, no checksums, no second process: what
 * is left of any tracked sync once everything but the I/O is taken away.
 *
 *   floor [-p | -q] LIST SRC DST  (LIST: "A-B" or "A" block numbers, 4 KiB
 *                             blocks, one run a line, as dmextract --dirty)
 *
 * -p: pipelined, the reads in one thread and the writes in another, four
 * 1 MiB buffers between them, so reading the next run overlaps writing
 * the last (as dmextract and dmmerge overlap, being two processes), and
 * the kernel's readahead is left on: on dense scattered patterns it reads
 * more than the dirty blocks, but in fewer, larger requests, which is
 * faster on most disks (dmextract bridges small gaps for the same reason).
 * The plain floor does one thing at a time and reads only the dirty blocks.
 *
 * -q: the plain floor with the disk's queue kept full: the whole list is
 * read first, and the next runs (up to 256 of them, 16 MiB) are always
 * announced with POSIX_FADV_WILLNEED, so the kernel has them in flight
 * while this reads and writes the current one; readahead is off, so only
 * the dirty blocks are read. dmextract keeps a window's extents in flight
 * at once (an io_uring), which neither -p nor the plain floor does: this is
 * the floor to compare it with.
 *
 * Prints the bytes copied. Exit status: 0 ok, 1 failure, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BS 4096u
#define PIECE (1u << 20)
#define NBUF 4
#define QRUNS 256		/* -q: runs announced ahead */
#define QBYTES (16u << 20)	/* -q: bytes announced ahead */

struct piece {
	char *buf;
	uint64_t off;
	size_t len;
};

static struct piece ring[NBUF];
static unsigned long head, tail;	/* filled, written */
static int done, werr;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int out;

static void *writer(void *arg)
{
	(void)arg;
	for (;;) {
		struct piece *p;

		pthread_mutex_lock(&lock);
		while (tail == head && !done)
			pthread_cond_wait(&cond, &lock);
		if (tail == head) {
			pthread_mutex_unlock(&lock);
			return NULL;
		}
		p = &ring[tail % NBUF];
		pthread_mutex_unlock(&lock);
		if (pwrite(out, p->buf, p->len, p->off) != (ssize_t)p->len)
			werr = errno ? errno : EIO;
		pthread_mutex_lock(&lock);
		tail++;
		pthread_cond_broadcast(&cond);
		pthread_mutex_unlock(&lock);
	}
}

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "floor: %s %s: %s\n", what, path,
		errno ? strerror(errno) : "short read");
	return 1;
}

/* The next run of LIST in *A..*B: 1, 0 at its end, -1 on a bad line. */
static int next_run(FILE *list, const char *lpath, uint64_t *a, uint64_t *b)
{
	char line[128];
	int n;

	if (!fgets(line, sizeof(line), list))
		return 0;
	n = sscanf(line, "%" SCNu64 "-%" SCNu64, a, b);
	if (n < 1) {
		fprintf(stderr, "floor: %s: bad line '%s'\n", lpath, line);
		return -1;
	}
	if (n == 1)
		*b = *a;
	return 1;
}

/* -q: every run of LIST, then copy them with QRUNS announced ahead. */
static int queued(FILE *list, const char *lpath, int in, const char *src,
		  const char *dst, uint64_t *copied)
{
	struct run { uint64_t off, len; } *r = NULL;
	size_t nr = 0, cap = 0, i, ahead = 0;
	uint64_t a, b, inflight = 0;
	char *buf;
	int got;

	while ((got = next_run(list, lpath, &a, &b)) > 0) {
		if (nr == cap) {
			cap = cap ? 2 * cap : 4096;
			r = realloc(r, cap * sizeof(*r));
			if (!r)
				return 1;
		}
		r[nr].off = a * BS;
		r[nr++].len = (b - a + 1) * BS;
	}
	if (got < 0)
		return 1;
	buf = ring[0].buf;
	posix_fadvise(in, 0, 0, POSIX_FADV_RANDOM);
	for (i = 0; i < nr; i++) {
		uint64_t off = r[i].off, end = off + r[i].len;

		while (ahead < nr && ahead < i + QRUNS &&
		       (inflight < QBYTES || ahead == i)) {
			posix_fadvise(in, r[ahead].off, r[ahead].len,
				      POSIX_FADV_WILLNEED);
			inflight += r[ahead++].len;
		}
		for (; off < end;) {
			size_t len = end - off < PIECE ? end - off : PIECE;

			errno = 0;
			if (pread(in, buf, len, off) != (ssize_t)len)
				return fail("cannot read", src);
			if (pwrite(out, buf, len, off) != (ssize_t)len)
				return fail("cannot write", dst);
			off += len;
			*copied += len;
		}
		inflight -= r[i].len;
		posix_fadvise(in, r[i].off, r[i].len, POSIX_FADV_DONTNEED);
	}
	free(r);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t a, b, off, end, copied = 0;
	char *buf = NULL;
	int in, i, got, pipelined = 0, queue = 0;
	pthread_t thr;
	FILE *list;

	if (argc == 5 && !strcmp(argv[1], "-p")) {
		pipelined = 1;
		argc--;
		argv++;
	} else if (argc == 5 && !strcmp(argv[1], "-q")) {
		queue = 1;
		argc--;
		argv++;
	}
	if (argc != 4) {
		fprintf(stderr, "usage: floor [-p | -q] LIST SRC DST\n");
		return 2;
	}
	list = fopen(argv[1], "r");
	if (!list)
		return fail("cannot open", argv[1]);
	in = open(argv[2], O_RDONLY);
	if (in < 0)
		return fail("cannot open", argv[2]);
	out = open(argv[3], O_WRONLY);
	if (out < 0)
		return fail("cannot open", argv[3]);
	for (i = 0; i < NBUF; i++) {
		ring[i].buf = aligned_alloc(BS, PIECE);
		if (!ring[i].buf)
			return 1;
	}
	if (queue) {
		if (queued(list, argv[1], in, argv[2], argv[3], &copied))
			return 1;
		goto sync;
	}
	/* plain: exactly the dirty blocks, no readahead around them */
	if (!pipelined)
		posix_fadvise(in, 0, 0, POSIX_FADV_RANDOM);
	if (pipelined && pthread_create(&thr, NULL, writer, NULL))
		return 1;
	while ((got = next_run(list, argv[1], &a, &b)) > 0) {
		for (off = a * BS, end = (b + 1) * BS; off < end;) {
			size_t len = end - off < PIECE ? end - off : PIECE;
			ssize_t r;

			pthread_mutex_lock(&lock);
			while (head - tail == NBUF)
				pthread_cond_wait(&cond, &lock);
			pthread_mutex_unlock(&lock);
			buf = ring[head % NBUF].buf;
			errno = 0;
			r = pread(in, buf, len, off);
			if (r != (ssize_t)len)
				return fail("cannot read", argv[2]);
			if (pipelined) {
				ring[head % NBUF].off = off;
				ring[head % NBUF].len = len;
				pthread_mutex_lock(&lock);
				head++;
				pthread_cond_broadcast(&cond);
				pthread_mutex_unlock(&lock);
			} else {
				r = pwrite(out, buf, len, off);
				if (r != (ssize_t)len)
					return fail("cannot write", argv[3]);
			}
			off += len;
			copied += len;
		}
	}
	if (got < 0)
		return 1;
	if (pipelined) {
		pthread_mutex_lock(&lock);
		done = 1;
		pthread_cond_broadcast(&cond);
		pthread_mutex_unlock(&lock);
		pthread_join(thr, NULL);
		errno = werr;
		if (werr)
			return fail("cannot write", argv[3]);
	}
sync:
	if (fsync(out))
		return fail("cannot sync", argv[3]);
	printf("%" PRIu64 "\n", copied);
	return 0;
}
