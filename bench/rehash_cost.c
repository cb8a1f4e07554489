// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * What one 4 KiB write costs a Syncthing-style block-list client
 * (examples/blocklist.c: SHA-256 per 128 KiB block), with the write's
 * range (track_extents_for_each_block: only overlapping blocks) against
 * without it (plain inotify: the whole file), for files of 16 MiB,
 * 256 MiB and 1 GiB, in one run. The events are given to the client as
 * the ranges kernel reports them (MODIFY, offset 4 KiB-aligned, length
 * 4096); what is measured is the client's re-hash: bytes read and CPU
 * seconds per write. The file is in the page cache, so reading costs CPU,
 * not disk time.
 *
 *   bench/rehash_cost DIR [WRITES [MIB...]]  (default 5 writes per size and
 *                                        mode; sizes 16 256 1024 MiB)
 */
#include <stdarg.h>
#include <sys/resource.h>
#include <time.h>

#define BLOCKLIST_NO_MAIN
#include "../examples/blocklist.c"

static double cpu_now(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static uint64_t x = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

int main(int argc, char **argv)
{
	uint64_t sizes[16] = { 16ull << 20, 256ull << 20, 1ull << 30 };
	static unsigned char buf[1 << 20];
	int writes = argc > 2 ? atoi(argv[2]) : 5;
	size_t nsizes = 3;
	char path[4096];

	if (argc < 2 || argc > 3 + 16 || writes < 1) {
		fprintf(stderr, "usage: rehash_cost DIR [WRITES [MIB...]]\n");
		return 2;
	}
	if (argc > 3) {
		nsizes = 0;
		for (int a = 3; a < argc; a++) {
			sizes[nsizes] = strtoull(argv[a], NULL, 10) << 20;
			if (!sizes[nsizes++]) {
				fprintf(stderr, "rehash_cost: %s: not a size in MiB\n",
					argv[a]);
				return 2;
			}
		}
	}
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)rnd();
	printf("%-9s %-7s %16s %14s %12s\n", "file", "mode", "bytes read/write",
	       "CPU s/write", "blocks/write");
	for (size_t s = 0; s < nsizes; s++) {
		struct blocklist *bl;
		int fd;

		snprintf(path, sizeof(path), "%s/file", argv[1]);
		fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
		if (fd < 0) {
			perror(path);
			return 1;
		}
		for (uint64_t off = 0; off < sizes[s]; off += sizeof(buf))
			if (pwrite(fd, buf, sizeof(buf), (off_t)off) !=
			    (ssize_t)sizeof(buf))
				return 1;
		if (bl_new(argv[1], 128 * 1024, &bl) || bl_rescan(bl) ||
		    bl_update(bl))
			return 1;
		for (int ranged = 1; ranged >= 0; ranged--) {
			double cpu = 0;

			bl->bytes_read = bl->blocks_hashed = 0;
			for (int w = 0; w < writes; w++) {
				uint64_t off = rnd() % (sizes[s] / 4096) * 4096;
				struct track_event ev = {
					.kind = TRACK_EVENT_MODIFY,
					.path = "file", .offset = ranged ? off : 0,
					.length = ranged ? 4096 : TRACK_WHOLE_FILE,
					.flags = ranged ? TRACK_EVENT_RANGE : 0,
				};
				double t0;

				if (pwrite(fd, buf + w, 4096, (off_t)off) != 4096)
					return 1;
				t0 = cpu_now();
				if (bl_event(bl, &ev) || bl_update(bl))
					return 1;
				cpu += cpu_now() - t0;
			}
			printf("%4" PRIu64 " MiB  %-7s %16" PRIu64 " %14.4f %12.1f\n",
			       sizes[s] >> 20, ranged ? "ranges" : "whole",
			       bl->bytes_read / writes, cpu / writes,
			       (double)bl->blocks_hashed / writes);
			fflush(stdout);
		}
		bl_free(bl);
		close(fd);
		unlink(path);
	}
	return 0;
}
