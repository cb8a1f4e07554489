// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The raw floor of a sync that knows its dirty blocks: read exactly those
 * blocks of SRC and write them at the same offsets of DST, runs coalesced
 * (a run is one read and one write, in pieces of at most 1 MiB), in block
 * order, then fsync DST. No stream, no checksums, no second process: what
 * is left of any tracked sync once everything but the I/O is taken away.
 *
 *   floor LIST SRC DST       (LIST: "A-B" or "A" block numbers, 4 KiB
 *                             blocks, one run a line, as dmextract --dirty)
 *
 * Prints the bytes copied. Exit status: 0 ok, 1 failure, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BS 4096u
#define PIECE (1u << 20)

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "floor: %s %s: %s\n", what, path,
		errno ? strerror(errno) : "short read");
	return 1;
}

int main(int argc, char **argv)
{
	uint64_t a, b, off, end, copied = 0;
	char line[128], *buf;
	FILE *list;
	int in, out;

	if (argc != 4) {
		fprintf(stderr, "usage: floor LIST SRC DST\n");
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
	buf = aligned_alloc(BS, PIECE);
	if (!buf)
		return 1;
	while (fgets(line, sizeof(line), list)) {
		int n = sscanf(line, "%" SCNu64 "-%" SCNu64, &a, &b);

		if (n < 1) {
			fprintf(stderr, "floor: %s: bad line '%s'\n", argv[1],
				line);
			return 1;
		}
		if (n == 1)
			b = a;
		for (off = a * BS, end = (b + 1) * BS; off < end;) {
			size_t len = end - off < PIECE ? end - off : PIECE;
			ssize_t r;

			errno = 0;
			r = pread(in, buf, len, off);
			if (r != (ssize_t)len)
				return fail("cannot read", argv[2]);
			r = pwrite(out, buf, len, off);
			if (r != (ssize_t)len)
				return fail("cannot write", argv[3]);
			off += len;
			copied += len;
		}
	}
	if (fsync(out))
		return fail("cannot sync", argv[3]);
	printf("%" PRIu64 "\n", copied);
	return 0;
}
