// SPDX-License-Identifier: GPL-2.0
/*
 * Write-path cost of dm-track: the same O_DIRECT writes (4 KiB sequential,
 * 4 KiB random, 1 MiB sequential) through dm-linear, through dm-track with
 * and without its metadata device, and through dm-era (the upstream target
 * that also records written blocks) on the same disks, alternating, best of
 * several rounds; then, with a metadata device, the latency of the first
 * write to a region after a checkpoint against a write that needs no
 * intent update. Prints the ratios; absolute numbers under QEMU TCG mean
 * little, ratios measured side by side do.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmtest.h"
#include "bench_smoke.h"

#define BS		4096
#define NR_WRITES	BENCH_SIZE(2000, 16)
#define SPAN_BLOCKS	262144		/* 1 GiB */
#define ROUNDS		BENCH_SIZE(3, 1)

#define NR_TABLES	4
#define NR_MODES	3
#define BIG		(1024 * 1024)
#define NR_BIG		BENCH_SIZE(64, 2)	/* 1 MiB writes */
#define REGIONS		BENCH_SIZE(128, 4)	/* first-write latency */
#define REGION_BLOCKS	1024		/* the default 4 MiB region */

static const char *const tables[NR_TABLES] = {
	"0 2097152 linear " VM_DISK_B " 0",
	"0 2097152 track " VM_DISK_B " 0 8 1 clean",
	"0 2097152 track " VM_DISK_B " 0 8 3 metadata " VM_DISK_D " clean",
	"0 2097152 era " VM_DISK_D " " VM_DISK_B " 8",
};
static const char *const names[NR_TABLES] = {
	"linear", "track", "track+metadata", "era",
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Seconds for the writes of MODE through table T: NR_WRITES 4 KiB writes,
 * sequential (0) or random (1), or NR_BIG sequential 1 MiB writes (2).
 */
static double run(int t, int mode)
{
	size_t len = mode == 2 ? BIG : BS;
	int n = mode == 2 ? NR_BIG : NR_WRITES;
	unsigned int seed = 1;
	double start, secs;
	void *buf;
	int fd, i;

	vm_run("dmsetup remove --noudevsync lt-bench 2>/dev/null");
	/* A table that keeps metadata on VM_DISK_D starts it zeroed. */
	if (strstr(tables[t], VM_DISK_D))
		vm_run("/sbin/blkdiscard -z " VM_DISK_D);
	if (vm_run("echo '%s' | dmsetup create --noudevsync lt-bench", tables[t]))
		exit(1);
	if (posix_memalign(&buf, BS, len))
		exit(1);
	memset(buf, 0x5a, len);
	fd = open("/dev/mapper/lt-bench", O_WRONLY | O_DIRECT);
	if (fd < 0)
		exit(1);
	start = now();
	for (i = 0; i < n; i++) {
		off_t off = mode == 1 ? (off_t)(rand_r(&seed) % SPAN_BLOCKS) * BS :
					(off_t)i * len;

		if (pwrite(fd, buf, len, off) != (ssize_t)len)
			exit(1);
	}
	fsync(fd);
	secs = now() - start;
	close(fd);
	free(buf);
	vm_run("dmsetup remove --noudevsync lt-bench");
	return secs;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median seconds of one 4 KiB write to the first block of each region. */
static double region_writes(int fd, void *buf, int offset)
{
	double t[REGIONS], start;
	int i;

	for (i = 0; i < REGIONS; i++) {
		start = now();
		if (pwrite(fd, buf, BS, ((off_t)i * 2 * REGION_BLOCKS + offset) *
			   BS) != BS)
			exit(1);
		t[i] = now() - start;
	}
	qsort(t, REGIONS, sizeof(t[0]), cmp_double);
	return t[REGIONS / 2];
}

/*
 * With a metadata device: a sync cycle checkpoints (commit does), and the
 * next write to a region in use must not wait for an intent write. The
 * median first write to REGIONS regions written in the last interval,
 * right after a checkpoint, against a second write to the same regions.
 */
static void first_write_after_checkpoint(void)
{
	double first, steady;
	void *buf;
	int fd;

	vm_run("dmsetup remove --noudevsync lt-bench 2>/dev/null");
	vm_run("/sbin/blkdiscard -z " VM_DISK_D);
	if (vm_run("echo '%s' | dmsetup create --noudevsync lt-bench", tables[2]))
		exit(1);
	if (posix_memalign(&buf, BS, BS))
		exit(1);
	memset(buf, 0x5a, BS);
	fd = open("/dev/mapper/lt-bench", O_WRONLY | O_DIRECT);
	if (fd < 0)
		exit(1);
	region_writes(fd, buf, 0);		/* the regions in use */
	vm_run("dmsetup message lt-bench 0 checkpoint");
	first = region_writes(fd, buf, 1);
	steady = region_writes(fd, buf, 2);
	close(fd);
	free(buf);
	vm_run("dmsetup remove --noudevsync lt-bench");
	printf("\nfirst write to a region in use after a checkpoint, median of %d:\n",
	       REGIONS);
	printf("  %.0f us, %.2f x a write that needs no intent update (%.0f us)\n",
	       first * 1e6, first / steady, steady * 1e6);
}

int main(void)
{
	double best[NR_TABLES][NR_MODES];
	int t, r, mode, nr = NR_TABLES;

	if (!vm_dm_target_present("track")) {
		printf("no dm-track target: nothing to measure\n");
		return 4;
	}
	if (!vm_dm_target_present("era")) {
		printf("no dm-era in this kernel: measuring without it\n");
		nr--;
	}
	for (t = 0; t < nr; t++)
		for (mode = 0; mode < NR_MODES; mode++)
			best[t][mode] = 1e9;
	for (r = 0; r < ROUNDS; r++)
		for (mode = 0; mode < NR_MODES; mode++)
			for (t = 0; t < nr; t++) {
				double s = run(t, mode);

				if (s < best[t][mode])
					best[t][mode] = s;
				/* So that a run cut short still shows something. */
				fprintf(stderr, "round %d mode %d %s: %.3f s\n",
					r + 1, mode, names[t], s);
			}

	printf("dm-track write path, O_DIRECT, best of %d (QEMU TCG): %d 4 KiB writes\n",
	       ROUNDS, NR_WRITES);
	printf("sequential and random, %d 1 MiB writes sequential; time as a ratio to linear\n",
	       NR_BIG);
	printf("%-16s %10s %9s %10s %9s %10s %9s\n", "target", "4K seq/s",
	       "time/lin", "4K rand/s", "time/lin", "1M seq/s", "time/lin");
	for (t = 0; t < nr; t++)
		printf("%-16s %10.0f %9.3f %10.0f %9.3f %10.1f %9.3f\n", names[t],
		       NR_WRITES / best[t][0], best[t][0] / best[0][0],
		       NR_WRITES / best[t][1], best[t][1] / best[0][1],
		       NR_BIG / best[t][2], best[t][2] / best[0][2]);
	first_write_after_checkpoint();
	return 0;
}
