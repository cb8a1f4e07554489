// SPDX-License-Identifier: GPL-2.0
/*
 * What one 4 KiB write costs a Syncthing-style block-list client
 * (examples/blocklist.c: SHA-256 per 128 KiB block) on the patched kernel,
 * fed by real events: with IN_REPORT_RANGE (track_watch ranges mode: only
 * the blocks the write overlaps are re-hashed) against plain inotify
 * (TRACK_WATCH_NO_RANGES: the whole file), for files of 16 MiB, 256 MiB
 * and 1 GiB on ext4, in one run. Measured per write: bytes the client read
 * and its CPU seconds (events, block list update, hashing).
 *
 * The host twin, bench/rehash.sh, gives the client synthetic events; this
 * one goes through the kernel. Sized for QEMU TCG: 5 ranged writes per
 * size, and 2 whole-file writes at 16 MiB, 1 above (one re-hash of 1 GiB
 * takes about a minute under TCG): the whole-file cost of a write does not
 * depend on where it lands. Absolute CPU numbers under TCG mean little; the
 * ratios and how each mode grows with the file size are the result.
 */
#define BLOCKLIST_NO_MAIN
#include "../../examples/blocklist.c"

#include <sys/inotify.h>
#include <sys/mount.h>

#include "bench_smoke.h"

#define DISK		"/dev/vdb"	/* 2 GiB */
#define RANGED_WRITES	BENCH_SIZE(5, 2)

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

/* Feed the watcher's events to the client until it is quiet for 200 ms;
 * how many MODIFY events carried a range. */
static int drain(struct track_watch *w, struct blocklist *bl, int *ranged)
{
	struct track_event ev;
	int n;

	while ((n = track_watch_next(w, &ev, 200)) == 1) {
		if (ev.kind == TRACK_EVENT_MODIFY &&
		    (ev.flags & TRACK_EVENT_RANGE))
			(*ranged)++;
		if (bl_event(bl, &ev))
			return -1;
	}
	return n;
}

struct result {
	uint64_t bytes;		/* read per write */
	double cpu;		/* seconds per write */
	double blocks;		/* hashed per write */
	int ranged;		/* events with a range */
};

/* WRITES random 4 KiB writes into FD of SIZE bytes, watched in ranges
 * mode or not, with the client's list BL; the client's cost per write. */
static int measure(struct blocklist *bl, const char *dir, int fd,
		   uint64_t size, bool ranges, int writes, struct result *res)
{
	static unsigned char buf[4096];
	struct track_watch *w;
	double cpu = 0, t0;
	int ranged = 0;

	/* inotify's ranges, not fanotify's, which the watcher prefers */
	if (track_watch_new(ranges ? TRACK_WATCH_INOTIFY : TRACK_WATCH_NO_RANGES,
			    &w) ||
	    track_watch_add(w, dir) < 0)
		return -1;
	if (ranges && track_watch_get_mode(w) != TRACK_WATCH_RANGES) {
		printf("no IN_REPORT_RANGE on this kernel: nothing to measure\n");
		exit(0);
	}
	bl->bytes_read = bl->blocks_hashed = 0;
	for (int i = 0; i < writes; i++) {
		uint64_t off = rnd() % (size / 4096) * 4096;

		for (size_t k = 0; k < sizeof(buf); k += 8)
			*(uint64_t *)(buf + k) = rnd();
		if (pwrite(fd, buf, sizeof(buf), (off_t)off) != sizeof(buf))
			return -1;
		t0 = cpu_now();
		if (drain(w, bl, &ranged) < 0 || bl_update(bl))
			return -1;
		cpu += cpu_now() - t0;
	}
	res->bytes = bl->bytes_read / writes;
	res->cpu = cpu / writes;
	res->blocks = (double)bl->blocks_hashed / writes;
	res->ranged = ranged;
	track_watch_free(w);
	return 0;
}

int main(void)
{
	static const uint64_t full[] = { 16ull << 20, 256ull << 20, 1ull << 30 };
	static const uint64_t smoke[] = { 1ull << 20, 2ull << 20, 4ull << 20 };
	const uint64_t *sizes = BENCH_SIZE(full, smoke);
	static unsigned char chunk[1 << 20];
	struct result r[3][2];
	struct blocklist *bl;
	char dir[] = "/tmp/rehash.XXXXXX", path[64];
	int fd;

	(void)bl_dump;		/* the example's, not needed here */
	fd = inotify_init1(IN_REPORT_RANGE);
	if (fd < 0) {
		printf("no IN_REPORT_RANGE: nothing to measure\n");
		return 0;
	}
	close(fd);
	if (!mkdtemp(dir))
		return 1;
	if (system("mkfs.ext4 -q -F " DISK " >/dev/null 2>&1") ||
	    mount(DISK, dir, "ext4", 0, NULL)) {
		fprintf(stderr, "rehash_ranges: cannot make ext4 on %s\n", DISK);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/file", dir);
	for (size_t i = 0; i < sizeof(chunk); i += 8)
		*(uint64_t *)(chunk + i) = rnd();
	for (int s = 0; s < 3; s++) {
		fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
		if (fd < 0)
			return 1;
		for (uint64_t off = 0; off < sizes[s]; off += sizeof(chunk))
			if (pwrite(fd, chunk, sizeof(chunk), (off_t)off) !=
			    (ssize_t)sizeof(chunk))
				return 1;
		fsync(fd);
		/* the list as the client has it before the writes (not
		 * measured), then the same list through both watchers */
		if (bl_new(dir, 128 * 1024, &bl) || bl_rescan(bl) ||
		    bl_update(bl) ||
		    measure(bl, dir, fd, sizes[s], true, RANGED_WRITES,
			    &r[s][0]) ||
		    measure(bl, dir, fd, sizes[s], false, s ? 1 : 2,
			    &r[s][1])) {
			fprintf(stderr, "rehash_ranges: %s\n", strerror(errno));
			return 1;
		}
		bl_free(bl);
		close(fd);
		unlink(path);
	}
	umount(dir);
	rmdir(dir);

	printf("block-list client (SHA-256 per 128 KiB block), real events, one 4 KiB write into a file on ext4 (QEMU TCG)\n");
	printf("%-9s %-7s %16s %14s %12s %8s\n", "file", "mode",
	       "bytes read/write", "CPU s/write", "blocks/write", "ranged");
	for (int s = 0; s < 3; s++)
		for (int m = 0; m < 2; m++)
			printf("%4llu MiB  %-7s %16llu %14.4f %12.1f %8d\n",
			       (unsigned long long)(sizes[s] >> 20),
			       m ? "whole" : "ranges",
			       (unsigned long long)r[s][m].bytes, r[s][m].cpu,
			       r[s][m].blocks, r[s][m].ranged);
	for (int s = 0; s < 3; s++)
		printf("%4llu MiB: whole / ranges: %.0fx bytes read, %.1fx CPU\n",
		       (unsigned long long)(sizes[s] >> 20),
		       (double)r[s][1].bytes / (r[s][0].bytes ? r[s][0].bytes : 1),
		       r[s][1].cpu / (r[s][0].cpu > 0 ? r[s][0].cpu : 1e-6));
	printf("ranges, 1 GiB / 16 MiB: %.2fx bytes read, %.2fx CPU (flat is 1)\n",
	       (double)r[2][0].bytes / (r[0][0].bytes ? r[0][0].bytes : 1),
	       r[2][0].cpu / (r[0][0].cpu > 0 ? r[0][0].cpu : 1e-6));
	return 0;
}
