// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The strongest sync that tracks nothing: a 128-bit digest of every 4 KiB
 * block on both ends, only the blocks whose digests differ are sent. It is
 * the dsync paper's "blockmd5sync" done as fast as this machine allows, so
 * that dsync is compared with the best a checksum sync can be, not with a
 * straw man:
 *
 *   - three processes, as over a network: the receiver's reader hashes DST
 *     and streams the digests over a pipe to the sender, which hashes SRC
 *     at the same time, compares, and streams the differing runs over a
 *     second pipe to the receiver's writer, which writes them into DST and
 *     fsyncs it. Both ends read in parallel, sequentially, 4 MiB at a
 *     time, with readahead hinted.
 *   - the digest is a 4-lane multiply-rotate hash (xxHash64's round, two
 *     64-bit results), not md5: ~10 GB/s a core, so the reads are the
 *     bottleneck, as for any checksum sync done well.
 *
 *   blocksync SRC DST        (same size; prints "moved-bytes sent-blocks")
 *
 * "moved" counts what would cross a network: 16 bytes of digest per block
 * of DST, plus 16 bytes of header and the data for each differing run.
 * Exit status: 0 ok, 1 failure, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BS 4096u
#define CHUNK (4u << 20)
#define PER_CHUNK (CHUNK / BS)
#define P1 0x9e3779b185ebca87ull
#define P2 0xc2b2ae3d27d4eb4full
#define P3 0x165667b19e3779f9ull

struct digest {
	uint64_t h[2];
};

struct run_hdr {
	uint64_t first, count;
};

static inline uint64_t rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static void digest(const void *block, struct digest *d)
{
	const uint64_t *w = block;
	uint64_t a = P1 + P2, b = P2, c = 0, e = -P1, x, y;
	unsigned int i;

	for (i = 0; i < BS / 8; i += 4) {
		a = rotl(a + w[i] * P2, 31) * P1;
		b = rotl(b + w[i + 1] * P2, 31) * P1;
		c = rotl(c + w[i + 2] * P2, 31) * P1;
		e = rotl(e + w[i + 3] * P2, 31) * P1;
	}
	x = rotl(a, 1) + rotl(b, 7) + rotl(c, 12) + rotl(e, 18);
	y = (a ^ rotl(c, 29)) * P3 + (b ^ rotl(e, 33)) * P1;
	x ^= x >> 33;
	x *= P2;
	x ^= x >> 29;
	y ^= y >> 32;
	y *= P3;
	y ^= y >> 31;
	d->h[0] = x;
	d->h[1] = y;
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "blocksync: %s %s: %s\n", what, path,
		errno ? strerror(errno) : "unexpected end");
	exit(1);
}

static void full_write(int fd, const void *buf, size_t len, const char *what)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("cannot write", what);
		p += n;
		len -= n;
	}
}

/* Read len bytes; return 0 at a clean end of file before any byte. */
static size_t full_read(int fd, void *buf, size_t len, const char *what)
{
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("cannot read", what);
		if (n == 0)
			break;
		got += n;
	}
	return got;
}

/* The receiver's reader: digests of DST, in block order, into fd. */
static void hash_dst(const char *path, uint64_t size, int fd)
{
	static struct digest d[PER_CHUNK];
	char *buf = aligned_alloc(BS, CHUNK);
	int in = open(path, O_RDONLY);
	uint64_t off;

	if (!buf || in < 0)
		die("cannot open", path);
	posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (off = 0; off < size; off += CHUNK) {
		size_t len = size - off < CHUNK ? size - off : CHUNK, i;

		errno = 0;
		if (full_read(in, buf, len, path) != len)
			die("cannot read", path);
		for (i = 0; i < len / BS; i++)
			digest(buf + i * BS, &d[i]);
		full_write(fd, d, len / BS * sizeof(d[0]), "the digest pipe");
	}
	exit(0);
}

/* The receiver's writer: runs from fd into DST, then fsync. */
static void write_dst(const char *path, int fd)
{
	char *buf = aligned_alloc(BS, CHUNK);
	int out = open(path, O_WRONLY);
	struct run_hdr h;

	if (!buf || out < 0)
		die("cannot open", path);
	while (full_read(fd, &h, sizeof(h), "the block pipe") == sizeof(h)) {
		size_t len = h.count * BS;

		errno = 0;
		if (len > CHUNK || full_read(fd, buf, len, "the block pipe") !=
		    len)
			die("cannot read", "the block pipe");
		if (pwrite(out, buf, len, h.first * BS) != (ssize_t)len)
			die("cannot write", path);
	}
	if (fsync(out))
		die("cannot sync", path);
	exit(0);
}

int main(int argc, char **argv)
{
	static struct digest mine[PER_CHUNK], theirs[PER_CHUNK];
	uint64_t size, off, moved = 0, sent = 0;
	int dpipe[2], bpipe[2], in, status, bad = 0;
	struct stat a, b;
	pid_t reader, writer;
	char *buf;

	if (argc != 3) {
		fprintf(stderr, "usage: blocksync SRC DST\n");
		return 2;
	}
	if (stat(argv[1], &a))
		die("cannot stat", argv[1]);
	if (stat(argv[2], &b))
		die("cannot stat", argv[2]);
	if (a.st_size != b.st_size || a.st_size % BS) {
		fprintf(stderr, "blocksync: %s and %s must have the same size, "
			"a multiple of 4096\n", argv[1], argv[2]);
		return 2;
	}
	size = a.st_size;
	if (pipe(dpipe) || pipe(bpipe))
		die("cannot make", "pipes");
	fcntl(dpipe[1], F_SETPIPE_SZ, 1 << 20);
	fcntl(bpipe[1], F_SETPIPE_SZ, 1 << 20);
	reader = fork();
	if (reader == 0) {
		close(dpipe[0]);
		close(bpipe[0]);
		close(bpipe[1]);
		hash_dst(argv[2], size, dpipe[1]);
	}
	close(dpipe[1]);
	writer = fork();
	if (writer == 0) {
		close(dpipe[0]);
		close(bpipe[1]);
		write_dst(argv[2], bpipe[0]);
	}
	close(bpipe[0]);
	if (reader < 0 || writer < 0)
		die("cannot fork", "");

	buf = aligned_alloc(BS, CHUNK);
	in = open(argv[1], O_RDONLY);
	if (!buf || in < 0)
		die("cannot open", argv[1]);
	posix_fadvise(in, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (off = 0; off < size; off += CHUNK) {
		size_t len = size - off < CHUNK ? size - off : CHUNK;
		size_t n = len / BS, i, j;

		errno = 0;
		if (full_read(in, buf, len, argv[1]) != len)
			die("cannot read", argv[1]);
		for (i = 0; i < n; i++)
			digest(buf + i * BS, &mine[i]);
		if (full_read(dpipe[0], theirs, n * sizeof(theirs[0]),
			      "the digest pipe") != n * sizeof(theirs[0]))
			die("cannot read", "the digest pipe");
		moved += n * sizeof(theirs[0]);
		for (i = 0; i < n; i = j) {
			struct run_hdr h;

			if (!memcmp(&mine[i], &theirs[i], sizeof(mine[i]))) {
				j = i + 1;
				continue;
			}
			for (j = i + 1; j < n && memcmp(&mine[j], &theirs[j],
							sizeof(mine[j])); j++)
				;
			h.first = off / BS + i;
			h.count = j - i;
			full_write(bpipe[1], &h, sizeof(h), "the block pipe");
			full_write(bpipe[1], buf + i * BS, h.count * BS,
				   "the block pipe");
			moved += sizeof(h) + h.count * BS;
			sent += h.count;
		}
	}
	close(bpipe[1]);
	if (waitpid(reader, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		bad = 1;
	if (waitpid(writer, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		bad = 1;
	if (bad) {
		fprintf(stderr, "blocksync: the receiver failed\n");
		return 1;
	}
	printf("%" PRIu64 " %" PRIu64 "\n", moved, sent);
	return 0;
}
