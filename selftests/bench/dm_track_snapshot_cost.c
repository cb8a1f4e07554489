// SPDX-License-Identifier: GPL-2.0
/*
 * What snapshot mode costs the application: 4 KiB random O_DIRECT writes
 * to the frozen blocks while a deliberately slow copier reads them (one
 * block at a time, a pause after each), once with a plain freeze and the
 * copy read from the track device, once with "freeze snapshot" and the
 * copy read through a track-view device; alternating, several rounds.
 * Reported per mode: the writes' throughput and their p50/p99 latency
 * during the copy, the copy's duration; in snapshot mode, the bytes the
 * target preserved, against the frozen set and against the frozen blocks
 * the application wrote during the copy (the bound the issue sets:
 * preserved bytes never exceed those). A third row, "idle", is the same
 * writer with nothing frozen and no copy running, for scale.
 *
 * The writer runs twice per mode: at queue depth 1 (pwrite, one write at a
 * time: every wait for a preservation read is the writer's own) and at
 * queue depth QD with Linux AIO, as a database or a file system under load
 * writes (the preservation reads of writes in flight together can then
 * overlap).
 *
 * Absolute numbers under QEMU TCG + KASAN mean little; the ratios measured
 * side by side do. The machine is shared and its load moves between runs,
 * so the ratio is taken per round, between a plain freeze and snapshot
 * mode run back to back, and the goal is checked on the median of those.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <linux/aio_abi.h>

#include <libtrack/dm.h>

#include "vmtest.h"
#include "bench_smoke.h"

#define BS		4096ULL
#define SECTORS		65536ULL		/* 32 MiB: 8192 blocks */
#define NBLOCKS		(SECTORS * 512 / BS)
#define FROZEN		BENCH_SIZE(1024ULL, 256ULL)	/* blocks 0..1023: 4 MiB */
#define FROZEN_MAX	1024ULL
#define COPY_PAUSE_US	2000			/* after each block read */
#define LIMIT		(64ULL << 20)
#define ROUNDS		BENCH_SIZE(5, 1)
#define MAX_LAT		(1 << 18)
#define QD		16			/* the AIO writer's queue depth */
#define NAME		"lt-snapcost"
#define PATH		"/dev/mapper/" NAME
#define VIEW		"lt-snapcost-view"
#define VIEW_PATH	"/dev/mapper/" VIEW

enum mode { IDLE, PLAIN, SNAPSHOT, PLAIN_QD, SNAPSHOT_QD, NR_MODES };
static const char *const mode_names[NR_MODES] = {
	"idle (no copy)", "copy, plain freeze", "copy, snapshot mode",
	"QD16 copy, plain", "QD16 copy, snapshot",
};

static bool mode_snapshot(enum mode mode)
{
	return mode == SNAPSHOT || mode == SNAPSHOT_QD;
}

/* The mode a row is compared with. */
static enum mode mode_base(enum mode mode)
{
	return mode >= PLAIN_QD ? PLAIN_QD : PLAIN;
}

/* Shared between the copier (parent) and the writer (child). */
struct shared {
	volatile int stop;		/* the copy is over */
	volatile uint64_t copied;	/* blocks 0..copied-1 have been read */
	uint64_t writes;
	uint64_t ahead;			/* writes to a frozen block not read yet */
	double secs;
	unsigned char written[FROZEN_MAX];	/* frozen block written during copy */
	unsigned char written_ahead[FROZEN_MAX];
	double lat[MAX_LAT];
};

struct result {
	double wps, p50, p99, copy_secs;
	uint64_t preserved, written, written_ahead;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void fail(const char *what)
{
	fprintf(stderr, "snapshot cost: %s: %s\n", what, strerror(errno));
	vm_run("dmsetup remove --noudevsync " VIEW " 2>/dev/null");
	vm_run("dmsetup remove --noudevsync " NAME " 2>/dev/null");
	exit(1);
}

/* The next block to write: a random frozen one. */
static uint64_t pick(struct shared *sh, unsigned int *seed)
{
	uint64_t b = rand_r(seed) % FROZEN;

	if (b >= sh->copied) {
		sh->written_ahead[b] = 1;
		sh->ahead++;
	}
	return b;
}

static void done(struct shared *sh, uint64_t b, double t)
{
	if (sh->writes < MAX_LAT)
		sh->lat[sh->writes] = now() - t;
	sh->written[b] = 1;
	sh->writes++;
}

/* QD writes in flight with Linux AIO until told; each finished is redone. */
static void writer_aio(struct shared *sh, int fd, void *buf, unsigned int seed)
{
	struct iocb cbs[QD], *cbp;
	struct io_event ev[QD];
	double t[QD];
	aio_context_t ctx = 0;
	int i, n, inflight = 0;

	if (syscall(__NR_io_setup, QD, &ctx))
		_exit(1);
	for (i = 0; i < QD; i++) {
		memset(&cbs[i], 0, sizeof(cbs[i]));
		cbs[i].aio_data = i;
		cbs[i].aio_lio_opcode = IOCB_CMD_PWRITE;
		cbs[i].aio_fildes = fd;
		cbs[i].aio_buf = (uintptr_t)buf;
		cbs[i].aio_nbytes = BS;
	}
	for (i = 0; i < QD; i++) {
		cbs[i].aio_offset = pick(sh, &seed) * BS;
		t[i] = now();
		cbp = &cbs[i];
		if (syscall(__NR_io_submit, ctx, 1, &cbp) != 1)
			_exit(1);
		inflight++;
	}
	while (inflight) {
		n = syscall(__NR_io_getevents, ctx, 1, QD, ev, NULL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (i = 0; i < n; i++) {
			struct iocb *cb = &cbs[ev[i].data];

			if (ev[i].res != (__s64)BS)
				_exit(1);
			done(sh, cb->aio_offset / BS, t[ev[i].data]);
			inflight--;
			if (sh->stop)
				continue;
			cb->aio_offset = pick(sh, &seed) * BS;
			t[ev[i].data] = now();
			cbp = cb;
			if (syscall(__NR_io_submit, ctx, 1, &cbp) != 1)
				_exit(1);
			inflight++;
		}
	}
	syscall(__NR_io_destroy, ctx);
}

/*
 * The application: random 4 KiB writes to frozen blocks until told, one at
 * a time or QD at once.
 */
static void writer(struct shared *sh, unsigned int seed, int qd)
{
	void *buf;
	int fd;

	if (posix_memalign(&buf, BS, BS))
		_exit(1);
	memset(buf, 0xa5, BS);
	fd = open(PATH, O_WRONLY | O_DIRECT);
	if (fd < 0)
		_exit(1);
	sh->secs = now();
	if (qd > 1) {
		writer_aio(sh, fd, buf, seed);
	} else {
		while (!sh->stop) {
			uint64_t b = pick(sh, &seed);
			double t = now();

			if (pwrite(fd, buf, BS, b * BS) != (ssize_t)BS)
				_exit(1);
			done(sh, b, t);
		}
	}
	sh->secs = now() - sh->secs;
	close(fd);
	_exit(0);
}

/* The copier: every frozen block once, slowly, from PATH_; seconds. */
static double copy(struct shared *sh, const char *path_, double idle_secs)
{
	double start = now();
	uint64_t b;
	void *buf;
	int fd;

	if (idle_secs > 0) {
		usleep(idle_secs * 1e6);
		return now() - start;
	}
	if (posix_memalign(&buf, BS, BS))
		fail("memory");
	fd = open(path_, O_RDONLY | O_DIRECT);
	if (fd < 0)
		fail(path_);
	for (b = 0; b < FROZEN; b++) {
		if (pread(fd, buf, BS, b * BS) != (ssize_t)BS)
			fail("reading the frozen image");
		sh->copied = b + 1;
		usleep(COPY_PAUSE_US);
	}
	close(fd);
	free(buf);
	return now() - start;
}

static struct result run(enum mode mode, int round, double idle_secs)
{
	struct track_dm_params p = {
		.data_dev = VM_DISK_B, .length = SECTORS, .clean = 1,
	};
	struct track_dm_status st;
	struct result res = { 0 };
	struct track_dm *dm;
	struct shared *sh;
	uint64_t epoch = 0, b;
	pid_t pid;
	int status;

	vm_run("dmsetup remove --noudevsync " VIEW " 2>/dev/null");
	vm_run("dmsetup remove --noudevsync " NAME " 2>/dev/null");
	errno = -track_dm_create(NAME, &p);
	if (errno)
		fail("creating the track device");
	errno = -track_dm_open(NAME, &dm);
	if (errno)
		fail("opening the track device");
	/* The frozen set: blocks 0..FROZEN-1, written with data. */
	if (vm_run("dd if=/dev/urandom of=" PATH " bs=1M count=%llu oflag=direct status=none",
		   FROZEN * BS >> 20))
		fail("writing the frozen blocks");
	if (mode_snapshot(mode)) {
		/* Before the freeze, so that udev's probe marks nothing. */
		errno = -track_dm_view_create(dm, VIEW);
		if (errno)
			fail("creating the view");
		errno = -track_dm_freeze_snapshot(dm, LIMIT, &epoch);
	} else if (mode != IDLE) {
		errno = -track_dm_freeze(dm, &epoch);
	}
	if (errno)
		fail("freeze");

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		fail("mmap");
	pid = fork();
	if (pid < 0)
		fail("fork");
	if (!pid)
		writer(sh, round * 7 + 1, mode >= PLAIN_QD ? QD : 1);
	res.copy_secs = copy(sh, mode_snapshot(mode) ? VIEW_PATH : PATH,
			     mode == IDLE ? idle_secs : 0);
	sh->stop = 1;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		errno = EIO;
		fail("an application write failed");
	}

	if (mode_snapshot(mode)) {
		errno = -track_dm_get_status(dm, &st);
		if (errno)
			fail("status");
		if (st.snapshot != TRACK_DM_SNAP_ACTIVE) {
			errno = EIO;
			fail("the snapshot did not hold");
		}
		res.preserved = st.snap_bytes;
	}
	if (epoch) {
		errno = -track_dm_commit(dm, epoch);
		if (errno)
			fail("commit");
	}
	track_dm_free(dm);
	vm_run("dmsetup remove --noudevsync " VIEW " 2>/dev/null");
	vm_run("dmsetup remove --noudevsync " NAME);

	for (b = 0; b < FROZEN; b++) {
		res.written += sh->written[b];
		res.written_ahead += sh->written_ahead[b];
	}
	res.wps = sh->writes / sh->secs;
	if (sh->writes) {
		uint64_t n = sh->writes < MAX_LAT ? sh->writes : MAX_LAT;

		qsort(sh->lat, n, sizeof(double), cmp_double);
		res.p50 = sh->lat[n / 2];
		res.p99 = sh->lat[n * 99 / 100];
	}
	fprintf(stderr, "round %d %-20s: %6.0f writes/s p50 %6.0f us p99 %7.0f us, copy %.1f s, %llu writes, %llu frozen blocks written (%llu before the copy read them), preserved %llu KiB\n",
		round, mode_names[mode], res.wps, res.p50 * 1e6, res.p99 * 1e6,
		res.copy_secs, (unsigned long long)sh->writes,
		(unsigned long long)res.written,
		(unsigned long long)res.written_ahead,
		(unsigned long long)res.preserved >> 10);
	munmap(sh, sizeof(*sh));
	return res;
}

static int cmp_res(const void *a, const void *b)
{
	return cmp_double(&((const struct result *)a)->wps,
			  &((const struct result *)b)->wps);
}

int main(void)
{
	struct result r[NR_MODES][ROUNDS], med[NR_MODES];
	double med_ratio[NR_MODES] = { 0 };
	double copy_secs = 0;
	int round, m, over = 0, qd_over = 0;

	if (!vm_dm_target_present("track") ||
	    !vm_dm_target_present("track-view")) {
		printf("no dm-track snapshot mode (track-view): nothing to measure\n");
		return 4;
	}
	for (round = 0; round < ROUNDS; round++) {
		r[PLAIN][round] = run(PLAIN, round + 1, 0);
		r[SNAPSHOT][round] = run(SNAPSHOT, round + 1, 0);
		copy_secs = r[PLAIN][round].copy_secs;
		r[IDLE][round] = run(IDLE, round + 1, copy_secs);
		r[PLAIN_QD][round] = run(PLAIN_QD, round + 1, 0);
		r[SNAPSHOT_QD][round] = run(SNAPSHOT_QD, round + 1, 0);
		if (r[SNAPSHOT][round].preserved >
		    r[SNAPSHOT][round].written * BS)
			over++;
		if (r[SNAPSHOT_QD][round].preserved >
		    r[SNAPSHOT_QD][round].written * BS)
			qd_over++;
	}

	printf("snapshot mode's cost to the application, QEMU TCG + KASAN, %d rounds\n",
	       ROUNDS);
	printf("device %llu MiB, frozen set %llu blocks (%llu MiB) written before the freeze;\n",
	       SECTORS * 512 >> 20, FROZEN, FROZEN * BS >> 20);
	printf("the copier reads each frozen block once (4 KiB O_DIRECT) and pauses %d us;\n",
	       COPY_PAUSE_US);
	printf("meanwhile one writer does 4 KiB O_DIRECT random writes to frozen blocks,\n");
	printf("at queue depth 1 (pwrite) or %d (Linux AIO; rows QD%d, against QD%d plain).\n",
	       QD, QD, QD);
	printf("Per mode, the round with the median throughput:\n\n");
	printf("%-22s %9s %8s %8s %9s %8s %8s\n", "", "writes/s", "x plain",
	       "p50 us", "p99 us", "x plain", "copy s");
	for (m = 0; m < NR_MODES; m++) {
		struct result sorted[ROUNDS];

		memcpy(sorted, r[m], sizeof(sorted));
		qsort(sorted, ROUNDS, sizeof(sorted[0]), cmp_res);
		med[m] = sorted[ROUNDS / 2];
	}
	for (m = 0; m < NR_MODES; m++)
		printf("%-22s %9.0f %8.3f %8.0f %9.0f %8.3f %8.1f\n",
		       mode_names[m], med[m].wps,
		       med[m].wps / med[mode_base(m)].wps,
		       med[m].p50 * 1e6, med[m].p99 * 1e6,
		       med[m].p99 / med[mode_base(m)].p99, med[m].copy_secs);
	printf("\npreserved bytes per sync, snapshot mode (every round):\n");
	printf("%6s %4s %13s %10s %22s %22s\n", "round", "QD", "preserved KiB",
	       "x frozen", "frozen blocks written", "preserved / written");
	for (round = 0; round < 2 * ROUNDS; round++) {
		struct result *s = &r[round < ROUNDS ? SNAPSHOT :
				      SNAPSHOT_QD][round % ROUNDS];

		printf("%6d %4d %13llu %10.3f %14llu (%4llu KiB) %22.3f\n",
		       round % ROUNDS + 1, round < ROUNDS ? 1 : QD,
		       (unsigned long long)s->preserved >> 10,
		       (double)s->preserved / (FROZEN * BS),
		       (unsigned long long)s->written,
		       (unsigned long long)(s->written * BS) >> 10,
		       s->written ? (double)s->preserved / (s->written * BS) : 0);
	}
	printf("\nsnapshot mode against a plain freeze, the two run back to back in each round\n");
	printf("(the machine's load moves between rounds; within a round it moves less):\n");
	for (m = SNAPSHOT; m < NR_MODES; m += SNAPSHOT_QD - SNAPSHOT) {
		double ratio[ROUNDS];

		printf("%-22s", mode_names[m]);
		for (round = 0; round < ROUNDS; round++) {
			ratio[round] = r[m][round].wps /
				       r[mode_base(m)][round].wps;
			printf(" %6.3f", ratio[round]);
		}
		qsort(ratio, ROUNDS, sizeof(double), cmp_double);
		med_ratio[m] = ratio[ROUNDS / 2];
		printf("   median %.3f x\n", med_ratio[m]);
	}
	printf("\ngoal: preserved <= frozen blocks written during the copy: %s\n",
	       over || qd_over ? "MISSED" : "met in every round");
	printf("goal: write throughput during a copy >= 0.8 x without snapshot mode (median of the rounds): QD1 %.3f x (%s), QD%d %.3f x (%s)\n",
	       med_ratio[SNAPSHOT], med_ratio[SNAPSHOT] >= 0.8 ? "met" : "MISSED",
	       QD, med_ratio[SNAPSHOT_QD],
	       med_ratio[SNAPSHOT_QD] >= 0.8 ? "met" : "MISSED");
	return 0;
}
