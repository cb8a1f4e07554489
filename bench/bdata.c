// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Benchmark data: images of seeded random blocks and the seeded dirty
 * patterns the dsync benchmark rewrites in them.
 *
 *   bdata fill FILE MIB [GEN]         FILE := MIB MiB of generation GEN
 *                                     (default 0), fsynced
 *   bdata list PATTERN NBLOCKS SEED [COUNT]
 *                                     print a dirty list (runs "A-B" or
 *                                     "A", sorted, merged) on stdout and
 *                                     "blocks runs" on stderr
 *   bdata apply FILE LIST GEN         rewrite LIST's blocks of FILE with
 *                                     generation GEN, fsynced
 *   bdata verify FILE LIST GEN        check FILE byte for byte: LIST's
 *                                     blocks of generation GEN, all others
 *                                     of generation 0 (exit 1 and the first
 *                                     differing block if not)
 *
 * Block b of generation g is 4 KiB from a PRNG seeded with (g, b): any
 * block of any generation can be rewritten without keeping a copy, so a
 * replica is reset by "apply DST LIST 0" and the source by
 * "apply SRC LIST 0" (two images on disk, not three).
 *
 * Patterns, 4 KiB blocks, SEED picks the instance:
 *   random:F     F % of the blocks, uniformly at random (COUNT overrides)
 *   realistic    about 1.5 % of the blocks in runs with spatial locality,
 *                like the RUBiS and MSR print-server traces of the dsync
 *                paper: run lengths 1 (20 %), 2 to 8 (70 %), and a long
 *                tail 9 to 512 (10 %, log-uniform); 60 % of the runs
 *                fall in 64 hot zones of 1/512 of the device each, the
 *                rest anywhere (COUNT overrides the 1.5 %)
 *
 * Exit status: 0 ok, 1 failure, 2 usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BS 4096u
#define CHUNK (4u << 20)

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void gen_block(uint64_t *w, uint64_t gen, uint64_t block)
{
	uint64_t s = gen * 0xd6e8feb86659fd93ull ^ block;
	unsigned int i;

	s = splitmix(&s);
	for (i = 0; i < BS / 8; i++)
		w[i] = splitmix(&s);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: bdata fill FILE MIB [GEN]\n"
		"       bdata list random:PCT|realistic NBLOCKS SEED [COUNT]\n"
		"       bdata apply FILE LIST GEN\n"
		"       bdata verify FILE LIST GEN\n");
	return 2;
}

static int fail(const char *what, const char *path)
{
	fprintf(stderr, "bdata: %s %s: %s\n", what, path, strerror(errno));
	return 1;
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

/* Write blocks [first, first + n) of generation gen. */
static int put_run(int fd, uint64_t *buf, uint64_t gen, uint64_t first,
		   uint64_t n)
{
	while (n) {
		uint64_t k = n < CHUNK / BS ? n : CHUNK / BS, i;

		for (i = 0; i < k; i++)
			gen_block(buf + i * (BS / 8), gen, first + i);
		if (write_all(fd, buf, k * BS, first * BS))
			return -1;
		first += k;
		n -= k;
	}
	return 0;
}

static int cmd_fill(const char *path, uint64_t mib, uint64_t gen)
{
	uint64_t *buf = malloc(CHUNK);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (!buf)
		return 1;
	if (fd < 0)
		return fail("cannot create", path);
	if (put_run(fd, buf, gen, 0, (mib << 20) / BS) || fsync(fd))
		return fail("cannot write", path);
	close(fd);
	free(buf);
	return 0;
}

static int cmd_apply(const char *path, const char *list, uint64_t gen)
{
	uint64_t *buf = malloc(CHUNK), a, b;
	FILE *f = fopen(list, "r");
	char line[128];
	int fd;

	if (!buf)
		return 1;
	if (!f)
		return fail("cannot open", list);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return fail("cannot open", path);
	while (fgets(line, sizeof(line), f)) {
		int n = sscanf(line, "%" SCNu64 "-%" SCNu64, &a, &b);

		if (n < 1) {
			fprintf(stderr, "bdata: %s: bad line '%s'\n", list,
				line);
			return 1;
		}
		if (n == 1)
			b = a;
		if (put_run(fd, buf, gen, a, b - a + 1))
			return fail("cannot write", path);
	}
	if (fsync(fd))
		return fail("cannot sync", path);
	close(fd);
	fclose(f);
	free(buf);
	return 0;
}

/* FILE against what fill 0 then apply LIST GEN would have written. */
static int cmd_verify(const char *path, const char *list, uint64_t gen)
{
	uint64_t *buf = malloc(CHUNK), *want = malloc(BS), a = 0, b = 0;
	uint64_t off, size, blk;
	FILE *f = fopen(list, "r");
	char line[128];
	int fd, have = 0;

	if (!buf || !want)
		return 1;
	if (!f)
		return fail("cannot open", list);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return fail("cannot open", path);
	size = lseek(fd, 0, SEEK_END);
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (off = 0; off < size; off += CHUNK) {
		size_t len = size - off < CHUNK ? size - off : CHUNK, i;

		if (pread(fd, buf, len, off) != (ssize_t)len)
			return fail("cannot read", path);
		for (i = 0; i < len / BS; i++) {
			blk = off / BS + i;
			while (!have || blk > b) {
				int n;

				if (!fgets(line, sizeof(line), f)) {
					a = b = UINT64_MAX;
					have = 1;
					break;
				}
				n = sscanf(line, "%" SCNu64 "-%" SCNu64, &a, &b);
				if (n < 1)
					return 1;
				if (n == 1)
					b = a;
				have = 1;
			}
			gen_block(want, blk >= a && blk <= b ? gen : 0, blk);
			if (memcmp(want, buf + i * (BS / 8), BS)) {
				fprintf(stderr, "bdata: %s differs at block %"
					PRIu64 "\n", path, blk);
				return 1;
			}
		}
	}
	close(fd);
	fclose(f);
	free(buf);
	free(want);
	return 0;
}

static uint64_t rnd_below(uint64_t *s, uint64_t n)
{
	return splitmix(s) % n;
}

/* Run length of the realistic pattern. */
static uint64_t run_len(uint64_t *s)
{
	uint64_t p = rnd_below(s, 100);

	if (p < 20)
		return 1;
	if (p < 90)
		return 2 + rnd_below(s, 7);
	/* log-uniform 9..512: the long tail */
	return (uint64_t)(9.0 * pow(512.0 / 9.0,
				    (double)(splitmix(s) >> 11) / 0x1p53));
}

static int cmd_list(const char *pattern, uint64_t nblocks, uint64_t seed,
		    uint64_t count)
{
	unsigned char *map = calloc(nblocks / 8 + 1, 1);
	uint64_t s = seed, dirty = 0, runs = 0, b, first;
	uint64_t zones[64], zone_len = nblocks / 512 ? nblocks / 512 : 1;
	double pct;
	int realistic = !strcmp(pattern, "realistic"), i;

	if (!map)
		return 1;
	if (realistic) {
		pct = 1.5;
	} else if (!strncmp(pattern, "random:", 7)) {
		char *end;

		pct = strtod(pattern + 7, &end);
		if (*end || pct <= 0 || pct > 100)
			return usage();
	} else {
		return usage();
	}
	if (!count)
		count = (uint64_t)(nblocks * pct / 100 + 0.5);
	if (!count)
		count = 1;
	if (count > nblocks) {
		fprintf(stderr, "bdata: %" PRIu64 " dirty blocks do not fit in "
			"%" PRIu64 "\n", count, nblocks);
		return 2;
	}
	for (i = 0; i < 64; i++)
		zones[i] = rnd_below(&s, nblocks - zone_len + 1);
#define SET(x) (map[(x) / 8] |= 1 << ((x) % 8))
#define ISSET(x) (map[(x) / 8] & (1 << ((x) % 8)))
	while (dirty < count) {
		uint64_t len = 1, start;

		if (realistic) {
			len = run_len(&s);
			if (rnd_below(&s, 100) < 60)
				start = zones[rnd_below(&s, 64)] +
					rnd_below(&s, zone_len);
			else
				start = rnd_below(&s, nblocks);
		} else {
			start = rnd_below(&s, nblocks);
		}
		for (b = start; b < nblocks && b < start + len &&
		     dirty < count; b++) {
			if (!ISSET(b)) {
				SET(b);
				dirty++;
			}
		}
	}
	for (b = 0; b < nblocks; b++) {
		if (!ISSET(b))
			continue;
		first = b;
		while (b + 1 < nblocks && ISSET(b + 1))
			b++;
		if (b == first)
			printf("%" PRIu64 "\n", first);
		else
			printf("%" PRIu64 "-%" PRIu64 "\n", first, b);
		runs++;
	}
	fprintf(stderr, "%" PRIu64 " %" PRIu64 "\n", dirty, runs);
	free(map);
	return fflush(stdout) ? 1 : 0;
}

static int num(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || !*s || *end ? -1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t a, b = 0, c = 0;

	if (argc >= 4 && argc <= 5 && !strcmp(argv[1], "fill")) {
		if (num(argv[3], &a) || !a ||
		    (argc == 5 && num(argv[4], &b)))
			return usage();
		return cmd_fill(argv[2], a, b);
	}
	if (argc >= 5 && argc <= 6 && !strcmp(argv[1], "list")) {
		if (num(argv[3], &a) || !a || num(argv[4], &b) ||
		    (argc == 6 && num(argv[5], &c)))
			return usage();
		return cmd_list(argv[2], a, b, c);
	}
	if (argc == 5 && !strcmp(argv[1], "verify")) {
		if (num(argv[4], &a))
			return usage();
		return cmd_verify(argv[2], argv[3], a);
	}
	if (argc == 5 && !strcmp(argv[1], "apply")) {
		if (num(argv[4], &a))
			return usage();
		return cmd_apply(argv[2], argv[3], a);
	}
	return usage();
}
