// SPDX-License-Identifier: GPL-2.0
/*
 * What dm-track's dirty sets cost in kernel memory, against the device
 * size and the number of dirty blocks, next to dm-era's. Each target sits
 * on a dm-zero device (no data, any size), with 4 KiB blocks, memory only
 * for dm-track; dm-era gets its metadata on a scratch disk, which limits
 * its size here. For every size, random 4 KiB O_DIRECT writes dirty 0,
 * 1,000, 10,000 and (up to 64 GiB: above, it takes too long under TCG)
 * 100,000 blocks, or every block when the device has fewer; then every
 * block is marked (mark_all). The memory is read twice: what dm-track's
 * status line reports (its groups and leaves are slab objects), and the
 * growth of
 * VmallocUsed (/proc/meminfo) since before the table was loaded, which is
 * where dm-era keeps its writesets and dm-track its top level. Slab
 * growth is not a measure here: under KASAN the quarantine holds every
 * freed bio for a while, so it grows with the number of writes, whoever
 * made them.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmtest.h"
#include "bench_smoke.h"

#define BS		4096ULL
#define GIB		(1ULL << 30)

static const unsigned long long track_gib[] = { 1, 64, 4096, 65536 };
static const unsigned long long era_full[] = { 1, 16, 64 };
static const unsigned long long era_smoke[] = { 1, 2, 4 };
#define ERA_GIB(i)	BENCH_SIZE(era_full, era_smoke)[i]
static const unsigned long long dirty_full[] = { 1000, 10000, 100000 };
static const unsigned long long dirty_smoke[] = { 4, 8, 16 };
#define NR_STEPS	3
#define DIRTY_STEP(j)	BENCH_SIZE(dirty_full, dirty_smoke)[j]
/* the most blocks dirtied above 64 GiB (more takes too long under TCG) */
#define BIG_DEV_STEPS	BENCH_SIZE(10000ULL, 8ULL)
#define ERA_DIRTY	BENCH_SIZE(1000ULL, 8ULL)
#define N(a)		(sizeof(a) / sizeof((a)[0]))

/* VmallocUsed, in bytes */
static long long kmem(void)
{
	char line[256];
	long long kb, sum = 0;
	FILE *f;

	f = fopen("/proc/meminfo", "r");
	if (!f)
		exit(1);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmallocUsed: %lld kB", &kb) == 1)
			sum += kb * 1024;
	fclose(f);
	return sum;
}

static long long status_memory(void)
{
	long long mem = -1;
	FILE *f;

	f = popen("dmsetup status lt-mem | awk '{ print $11 }'", "r");
	if (!f || fscanf(f, "%lld", &mem) != 1)
		exit(1);
	pclose(f);
	return mem;
}

/* Dirty N more random blocks of the device (some may repeat). */
static void dirty(int fd, unsigned long long nr_blocks, unsigned long long n,
		  unsigned int *seed, void *buf)
{
	unsigned long long i, b;

	for (i = 0; i < n; i++) {
		b = (((unsigned long long)rand_r(seed) << 31) ^
		     (unsigned long long)rand_r(seed)) % nr_blocks;
		if (pwrite(fd, buf, BS, b * BS) != (ssize_t)BS)
			exit(1);
	}
}

static void human(char *out, size_t len, long long b)
{
	if (b < 0)
		snprintf(out, len, "-");
	else if (b < 10 * 1024)
		snprintf(out, len, "%lld B", b);
	else if (b < 10 * 1024 * 1024)
		snprintf(out, len, "%.1f KiB", b / 1024.0);
	else
		snprintf(out, len, "%.1f MiB", b / 1048576.0);
}

static void row(const char *target, unsigned long long gib,
		unsigned long long dirtied, long long status, long long delta)
{
	char s[32], d[32];

	human(s, sizeof(s), status);
	human(d, sizeof(d), delta < 0 ? 0 : delta);
	printf("%-8s %9llu GiB %10llu %14s %14s\n", target, gib, dirtied, s,
	       d);
	fflush(stdout);
}

int main(void)
{
	unsigned long long sectors, nr_blocks, done;
	unsigned int seed = 7, i, j;
	long long base;
	void *buf;
	int fd;

	if (!vm_dm_target_present("track")) {
		printf("no dm-track target: nothing to measure\n");
		return 4;
	}
	if (posix_memalign(&buf, BS, BS))
		return 1;
	memset(buf, 0x5a, BS);
	vm_run("dmsetup remove --noudevsync lt-mem 2>/dev/null; "
	       "dmsetup remove --noudevsync lt-zero 2>/dev/null");
	if (vm_run("echo '0 %llu zero' | dmsetup create --noudevsync lt-zero",
		   track_gib[N(track_gib) - 1] * GIB / 512))
		return 1;

	printf("kernel memory of the dirty sets, 4 KiB blocks, random writes\n");
	printf("(status: the target's own count; vmalloc: VmallocUsed "
	       "growth since before the table was loaded)\n");
	printf("%-8s %13s %10s %14s %14s\n", "target", "size", "dirty",
	       "status", "vmalloc");
	for (i = 0; i < N(track_gib); i++) {
		sectors = track_gib[i] * GIB / 512;
		nr_blocks = sectors * 512 / BS;
		base = kmem();
		if (vm_run("echo '0 %llu track /dev/mapper/lt-zero 0 - 1 clean' | "
			   "dmsetup create --noudevsync lt-mem", sectors))
			return 1;
		row("track", track_gib[i], 0, status_memory(), kmem() - base);
		fd = open("/dev/mapper/lt-mem", O_WRONLY | O_DIRECT);
		if (fd < 0)
			return 1;
		for (done = 0, j = 0; j < NR_STEPS; j++) {
			unsigned long long n = DIRTY_STEP(j);

			if (n > nr_blocks)
				n = nr_blocks;
			if (n > BIG_DEV_STEPS && track_gib[i] > 64)
				break;
			dirty(fd, nr_blocks, n - done, &seed, buf);
			done = n;
			row("track", track_gib[i], done, status_memory(),
			    kmem() - base);
			if (n == nr_blocks)
				break;
		}
		close(fd);
		vm_run("dmsetup message lt-mem 0 mark_all");
		row("track", track_gib[i], nr_blocks, status_memory(),
		    kmem() - base);
		vm_run("dmsetup remove --noudevsync lt-mem");
	}

	if (!vm_dm_target_present("era")) {
		printf("no dm-era in this kernel: dm-track only\n");
		goto out;
	}
	for (i = 0; i < N(era_full); i++) {
		sectors = ERA_GIB(i) * GIB / 512;
		vm_run("/sbin/blkdiscard -z " VM_DISK_D);
		base = kmem();
		if (vm_run("echo '0 %llu era " VM_DISK_D " /dev/mapper/lt-zero 8' | "
			   "dmsetup create --noudevsync lt-mem", sectors)) {
			printf("era      %9llu GiB: its metadata does not fit on "
			       "the scratch disk\n", ERA_GIB(i));
			break;
		}
		row("era", ERA_GIB(i), 0, -1, kmem() - base);
		fd = open("/dev/mapper/lt-mem", O_WRONLY | O_DIRECT);
		if (fd < 0)
			return 1;
		dirty(fd, sectors * 512 / BS, ERA_DIRTY, &seed, buf);
		close(fd);
		row("era", ERA_GIB(i), ERA_DIRTY, -1, kmem() - base);
		vm_run("dmsetup remove --noudevsync lt-mem");
	}
out:
	vm_run("dmsetup remove --noudevsync lt-zero");
	free(buf);
	return 0;
}
