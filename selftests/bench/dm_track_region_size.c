// SPDX-License-Identifier: GPL-2.0
/*
 * The write-intent region size trades what a crash resends for what the
 * write path pays: after a crash every region written since the last
 * checkpoint (two intervals, with the hysteresis) comes back dirty, so
 * larger regions resend more unchanged blocks; smaller ones need an intent
 * write for more first writes. For each region size this writes the same
 * clustered workload (runs of 1 to 16 blocks around a few hot spots, like
 * the dsync paper's traces), checkpoints, writes more, then loads a copy of
 * the metadata as a crash would and counts the blocks it reports against
 * the blocks really written; and it times the workload's writes.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmtest.h"
#include "bench_smoke.h"

#define BS		4096ULL
#define SECTORS		BENCH_SIZE(2097152ULL, 131072ULL)	/* 1 GiB */
#define NR_BLOCKS	(SECTORS * 512 / BS)
#define WRITES		BENCH_SIZE(3000, 16)
#define HOT_SPOTS	24

static const unsigned int region_kib[] = { 64, 256, 1024, 4096, 16384 };
#define NR_SIZES	(sizeof(region_kib) / sizeof(region_kib[0]))

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Clustered writes; WRITTEN counts each block once. Returns seconds. */
static double workload(int fd, unsigned int *seed, unsigned char *written,
		       unsigned int n)
{
	static unsigned long long spot[HOT_SPOTS];
	double start = now();
	void *buf;
	unsigned int i, k;

	if (!spot[0])
		for (i = 0; i < HOT_SPOTS; i++)
			spot[i] = (unsigned long long)rand_r(seed) % NR_BLOCKS;
	if (posix_memalign(&buf, BS, 16 * BS))
		exit(1);
	memset(buf, 0x3c, 16 * BS);
	for (i = 0; i < n; i++) {
		unsigned long long b = (spot[rand_r(seed) % HOT_SPOTS] +
					rand_r(seed) % 8192) % (NR_BLOCKS - 16);
		unsigned int len = 1 + rand_r(seed) % 16;

		if (pwrite(fd, buf, len * BS, b * BS) != (ssize_t)(len * BS))
			exit(1);
		for (k = 0; k < len; k++)
			written[b + k] = 1;
	}
	free(buf);
	return now() - start;
}

/* Dirty blocks a crash now would report: load a copy of the metadata. */
static unsigned long long crash_dirty(void)
{
	unsigned long long dirty = 0;
	FILE *f;

	vm_run("dmsetup remove --noudevsync lt-rcheck 2>/dev/null; "
	       "dmsetup remove --noudevsync lt-rcopy 2>/dev/null");
	vm_run("echo '0 65536 linear " VM_DISK_C " 0' | dmsetup create --noudevsync lt-rcopy && "
	       "dd if=" VM_DISK_D " of=/dev/mapper/lt-rcopy bs=1M count=32 "
	       "iflag=direct oflag=direct status=none");
	if (vm_run("echo '0 %llu track " VM_DISK_B " 0 8 2 metadata /dev/mapper/lt-rcopy' | "
		   "dmsetup create --noudevsync lt-rcheck", SECTORS))
		exit(1);
	f = popen("dmsetup status lt-rcheck | awk '{ print $6 }'", "r");
	if (!f || fscanf(f, "%llu", &dirty) != 1)
		exit(1);
	pclose(f);
	vm_run("dmsetup remove --noudevsync lt-rcheck; dmsetup remove --noudevsync lt-rcopy");
	return dirty;
}

int main(void)
{
	unsigned char *written = malloc(NR_BLOCKS);
	double secs[NR_SIZES];
	unsigned long long reported[NR_SIZES], real[NR_SIZES];
	unsigned int i;

	if (!vm_dm_target_present("track")) {
		printf("no dm-track target: nothing to measure\n");
		return 4;
	}
	for (i = 0; i < NR_SIZES; i++) {
		unsigned int seed = 5;
		unsigned long long b;
		int fd;

		memset(written, 0, NR_BLOCKS);
		vm_run("dmsetup remove --noudevsync lt-bench 2>/dev/null");
		vm_run("/sbin/blkdiscard -z " VM_DISK_D);
		if (vm_run("echo '0 %llu track " VM_DISK_B " 0 8 5 metadata " VM_DISK_D
			   " region_size %u clean' | dmsetup create --noudevsync lt-bench",
			   SECTORS, region_kib[i] * 2))
			return 1;
		fd = open("/dev/mapper/lt-bench", O_WRONLY | O_DIRECT);
		if (fd < 0)
			return 1;
		/* A synced interval, then the one a crash interrupts. */
		secs[i] = workload(fd, &seed, written, WRITES);
		vm_run("dmsetup message lt-bench 0 freeze && "
		       "dmsetup message lt-bench 0 commit");
		memset(written, 0, NR_BLOCKS);
		secs[i] += workload(fd, &seed, written, WRITES);
		vm_run("dmsetup message lt-bench 0 checkpoint");
		secs[i] += workload(fd, &seed, written, WRITES);
		close(fd);
		reported[i] = crash_dirty();
		for (real[i] = 0, b = 0; b < NR_BLOCKS; b++)
			real[i] += written[b];
		vm_run("dmsetup remove --noudevsync lt-bench");
	}

	printf("write-intent region size: what a crash resends, what writes cost\n");
	printf("(%d clustered writes of 1-16 blocks, x3; 1 GiB; QEMU TCG)\n",
	       WRITES);
	printf("%-10s %12s %12s %10s %12s\n", "region", "written", "reported",
	       "unchanged", "time/64K");
	for (i = 0; i < NR_SIZES; i++)
		printf("%7u KiB %12llu %12llu %9.0f%% %12.2f\n", region_kib[i],
		       real[i], reported[i],
		       100.0 * (reported[i] - real[i]) / reported[i],
		       secs[i] / secs[0]);
	free(written);
	return 0;
}
