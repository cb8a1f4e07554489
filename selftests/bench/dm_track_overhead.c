// SPDX-License-Identifier: GPL-2.0
/*
 * Write-path cost of dm-track: the same O_DIRECT 4 KiB writes (sequential
 * and random) through dm-linear, through dm-track with and without its
 * metadata device, and through dm-era (the upstream target that also
 * records written blocks) on the same disks, alternating, best of several
 * rounds. Prints the ratios; absolute numbers under QEMU TCG mean little,
 * ratios measured side by side do.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmtest.h"

#define BS		4096
#define NR_WRITES	6000
#define SPAN_BLOCKS	262144		/* 1 GiB */
#define ROUNDS		3

#define NR_TABLES	4

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

/* Seconds for NR_WRITES writes through table T, sequential or random. */
static double run(int t, int random)
{
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
	if (posix_memalign(&buf, BS, BS))
		exit(1);
	memset(buf, 0x5a, BS);
	fd = open("/dev/mapper/lt-bench", O_WRONLY | O_DIRECT);
	if (fd < 0)
		exit(1);
	start = now();
	for (i = 0; i < NR_WRITES; i++) {
		off_t b = random ? rand_r(&seed) % SPAN_BLOCKS : i;

		if (pwrite(fd, buf, BS, b * BS) != BS)
			exit(1);
	}
	fsync(fd);
	secs = now() - start;
	close(fd);
	free(buf);
	vm_run("dmsetup remove --noudevsync lt-bench");
	return secs;
}

int main(void)
{
	double best[NR_TABLES][2];
	int t, r, random, nr = NR_TABLES;

	if (!vm_dm_target_present("track")) {
		printf("no dm-track target: nothing to measure\n");
		return 4;
	}
	if (!vm_dm_target_present("era")) {
		printf("no dm-era in this kernel: measuring without it\n");
		nr--;
	}
	for (t = 0; t < nr; t++)
		best[t][0] = best[t][1] = 1e9;
	for (r = 0; r < ROUNDS; r++)
		for (random = 0; random < 2; random++)
			for (t = 0; t < nr; t++) {
				double s = run(t, random);

				if (s < best[t][random])
					best[t][random] = s;
			}

	printf("dm-track write path, %d O_DIRECT 4 KiB writes, best of %d (QEMU TCG)\n",
	       NR_WRITES, ROUNDS);
	printf("%-16s %12s %9s %13s %9s\n", "target", "seq writes/s",
	       "time/lin", "rand writes/s", "time/lin");
	for (t = 0; t < nr; t++)
		printf("%-16s %12.0f %9.3f %13.0f %9.3f\n", names[t],
		       NR_WRITES / best[t][0], best[t][0] / best[0][0],
		       NR_WRITES / best[t][1], best[t][1] / best[0][1]);
	return 0;
}
