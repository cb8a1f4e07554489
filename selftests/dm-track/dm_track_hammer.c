// SPDX-License-Identifier: GPL-2.0
/*
 * No write is ever lost: writers hammer a dm-track device while a syncer
 * loops freeze, read the frozen blocks, copy them to a replica, and commit
 * (or now and then abort). After the writers stop and one last sync, the
 * replica equals the source byte for byte, and every block each writer
 * wrote is in the union of the committed sets, checked against the writers'
 * own logs. Run without and with a metadata device (the write-intent path
 * defers writes while the syncer runs), and with a metadata device, 512-byte
 * blocks (several metadata slots) and suspends and table reloads between
 * syncs, while the writers write.
 */
#include <pthread.h>
#include <time.h>

#include "kselftest_harness.h"
#include "track_test.h"

#define BS		4096U
#define NR_BLOCKS	16384U		/* 64 MiB: writers often hit the same blocks */
#define NR_WRITERS	4
#define RUN_SECONDS	12
#define MIN_SYNCS	3		/* that race the writers */
#define MAX_SECONDS	120		/* to get them on a slow machine */
#define MAX_LOG		200000
#define COPY_BLOCKS	256		/* the syncer copies up to 1 MiB at once */

struct writer {
	pthread_t thread;
	unsigned int id;
	unsigned int seed;
	size_t n;
	struct { uint32_t first, count; } *log;
};

static volatile int stop;
static time_t deadline;		/* writers stop then at the latest */
static const char *src_path = TT_PATH;
static const char *replica_path = VM_DISK_C;
static unsigned int track_bs = BS;	/* the target's block size */

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	unsigned int seq = 0;
	void *buf;
	int fd;

	fd = open(src_path, O_WRONLY | O_DIRECT);
	if (fd < 0 || posix_memalign(&buf, BS, 8 * BS))
		return (void *)1;

	while (!stop && time(NULL) < deadline && w->n < MAX_LOG) {
		uint32_t first = rand_r(&w->seed) % NR_BLOCKS;
		uint32_t count = 1 + rand_r(&w->seed) % 8;
		uint64_t off = (uint64_t)first * BS;
		size_t len;

		if (first + count > NR_BLOCKS)
			count = NR_BLOCKS - first;
		len = (size_t)count * BS;
		/* One write in four is a 512-byte write inside a block. */
		if (rand_r(&w->seed) % 4 == 0) {
			count = 1;
			off += 512 * (rand_r(&w->seed) % 8);
			len = 512;
		}
		vm_fill(buf, len, w->id * 100000 + ++seq, off);
		if (pwrite(fd, buf, len, off) != (ssize_t)len)
			return (void *)2;
		w->log[w->n].first = first;
		w->log[w->n].count = count;
		w->n++;
	}
	close(fd);
	free(buf);
	return NULL;
}

struct syncer {
	uint8_t *committed;	/* per block: in some committed epoch */
	unsigned int syncs, aborts;
	unsigned int during;	/* syncs that began while writers ran */
	int error;
};

struct copy_ctx {
	int src, dst;
	void *buf;
	uint8_t *seen;
	int error;
};

/* Copy a frozen extent in large pieces, as dmextract reads it. */
static int copy_extent(uint64_t first, uint64_t count, void *arg)
{
	struct copy_ctx *c = arg;
	uint64_t off = first * track_bs, end = (first + count) * track_bs, b;
	ssize_t len;

	for (; off < end; off += len) {
		len = end - off;
		if (len > COPY_BLOCKS * BS)
			len = COPY_BLOCKS * BS;
		if (pread(c->src, c->buf, len, off) != len ||
		    pwrite(c->dst, c->buf, len, off) != len) {
			c->error = errno ? errno : EIO;
			return -EIO;
		}
		for (b = off / BS; b <= (off + len - 1) / BS; b++)
			c->seen[b] = 1;
	}
	return 0;
}

/* One sync: freeze, copy the frozen blocks, then commit or abort. */
static int sync_once(struct syncer *s, int may_abort, unsigned int *seed)
{
	struct copy_ctx c = { 0 };
	struct track_dm *dm;
	uint64_t epoch, b;
	int r;

	c.seen = calloc(NR_BLOCKS, 1);
	if (!c.seen || posix_memalign(&c.buf, BS, COPY_BLOCKS * BS))
		return -ENOMEM;
	c.src = open(src_path, O_RDONLY | O_DIRECT);
	c.dst = open(replica_path, O_WRONLY | O_DIRECT);
	r = track_dm_open(TT_NAME, &dm);
	if (r || c.src < 0 || c.dst < 0)
		return r ? r : -errno;

	r = track_dm_freeze(dm, &epoch);
	if (!r)
		r = track_dm_for_each_extent(dm, TRACK_DM_FROZEN, copy_extent,
					     &c);
	if (!r && fsync(c.dst))
		r = -errno;
	if (!r && may_abort && rand_r(seed) % 5 == 0) {
		r = track_dm_abort(dm, epoch);
		s->aborts++;
	} else if (!r) {
		r = track_dm_commit(dm, epoch);
		for (b = 0; !r && b < NR_BLOCKS; b++)
			if (c.seen[b])
				s->committed[b] = 1;
		s->syncs++;
	}
	track_dm_free(dm);
	close(c.src);
	close(c.dst);
	free(c.buf);
	free(c.seen);
	return r;
}

FIXTURE(hammer) {
	struct writer w[NR_WRITERS];
	struct syncer s;
};

FIXTURE_VARIANT(hammer) {
	const char *metadata;
	unsigned int block_size;
	int reload;		/* suspend or reload between syncs */
};

FIXTURE_VARIANT_ADD(hammer, memory_only) {
	.metadata = NULL,
};

FIXTURE_VARIANT_ADD(hammer, with_metadata) {
	.metadata = VM_DISK_D,
};

/* 131072 blocks of 512 bytes: four metadata slots. */
FIXTURE_VARIANT_ADD(hammer, with_metadata_reloads) {
	.metadata = VM_DISK_D,
	.block_size = 512,
	.reload = 1,
};

FIXTURE_SETUP(hammer)
{
	struct track_dm_params p = {
		.data_dev = VM_DISK_B,
		.length = (uint64_t)NR_BLOCKS * BS / 512,
		.clean = 1,
		.metadata_dev = variant->metadata,
		.block_size = variant->block_size,
	};
	unsigned int i;

	track_bs = variant->block_size ? variant->block_size : BS;
	TT_REQUIRE_TARGET();
	tt_remove(TT_NAME);
	/* Source and replica start identical: both zeroed. */
	ASSERT_EQ(0, vm_run("/sbin/blkdiscard -z -l %u " VM_DISK_B, NR_BLOCKS * BS));
	ASSERT_EQ(0, vm_run("/sbin/blkdiscard -z -l %u " VM_DISK_C, NR_BLOCKS * BS));
	if (variant->metadata)
		ASSERT_EQ(0, vm_run("/sbin/blkdiscard -z " VM_DISK_D));
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));

	memset(&self->s, 0, sizeof(self->s));
	self->s.committed = calloc(NR_BLOCKS, 1);
	ASSERT_NE(NULL, self->s.committed);
	for (i = 0; i < NR_WRITERS; i++) {
		self->w[i].id = i + 1;
		self->w[i].seed = 1234 + i;
		self->w[i].n = 0;
		self->w[i].log = calloc(MAX_LOG, sizeof(*self->w[i].log));
		ASSERT_NE(NULL, self->w[i].log);
	}
}

FIXTURE_TEARDOWN(hammer)
{
	unsigned int i;

	tt_remove(TT_NAME);
	for (i = 0; i < NR_WRITERS; i++)
		free(self->w[i].log);
	free(self->s.committed);
}

TEST_F_TIMEOUT(hammer, replica_equals_source_after_syncs_under_writes, 300)
{
	unsigned int seed = 42, i;
	time_t end;
	void *ret;
	size_t k, writes = 0, missing = 0;
	uint32_t b;

	/*
	 * Writers run for RUN_SECONDS and until MIN_SYNCS syncs have raced
	 * them, however slow the machine, but never past MAX_SECONDS: a
	 * writer checks the deadline itself, in case a sync is still going.
	 */
	stop = 0;
	end = time(NULL) + RUN_SECONDS;
	deadline = time(NULL) + MAX_SECONDS;
	for (i = 0; i < NR_WRITERS; i++)
		ASSERT_EQ(0, pthread_create(&self->w[i].thread, NULL,
					    writer_main, &self->w[i]));

	while ((time(NULL) < end || self->s.during < MIN_SYNCS) &&
	       time(NULL) < deadline) {
		self->s.during++;
		ASSERT_EQ(0, sync_once(&self->s, 1, &seed));
		/* Suspend, or reload the same table, while writers write. */
		if (variant->reload && self->s.during % 2) {
			ASSERT_EQ(0, vm_run("dmsetup suspend --noudevsync " TT_NAME
					    " && dmsetup resume --noudevsync " TT_NAME));
		} else if (variant->reload) {
			ASSERT_EQ(0, vm_run("dmsetup table " TT_NAME " | dmsetup reload "
					    TT_NAME " && dmsetup resume --noudevsync "
					    TT_NAME));
		}
		usleep(rand_r(&seed) % 50000);
	}
	stop = 1;
	for (i = 0; i < NR_WRITERS; i++) {
		ASSERT_EQ(0, pthread_join(self->w[i].thread, &ret));
		ASSERT_EQ(NULL, ret) TH_LOG("writer %u failed", i);
	}

	/* The last sync, after the writers have stopped. */
	ASSERT_EQ(0, sync_once(&self->s, 0, &seed));
	TH_LOG("%u syncs, %u aborts, %u while writing", self->s.syncs,
	       self->s.aborts, self->s.during);
	ASSERT_LT(2, self->s.syncs);
	/* The point is syncs racing writes: several must have. */
	ASSERT_LE(MIN_SYNCS, self->s.during);

	/* Every block each writer wrote is in some committed epoch. */
	for (i = 0; i < NR_WRITERS; i++) {
		writes += self->w[i].n;
		for (k = 0; k < self->w[i].n; k++)
			for (b = self->w[i].log[k].first;
			     b < self->w[i].log[k].first +
				 self->w[i].log[k].count; b++)
				missing += !self->s.committed[b];
	}
	TH_LOG("%zu writes", writes);
	ASSERT_LT(1000, writes);
	ASSERT_EQ(0, missing) TH_LOG("written blocks never committed");

	/* And the replica has the source's bytes. */
	ASSERT_EQ(0, vm_run("/usr/bin/cmp -n %u " TT_PATH " " VM_DISK_C,
			    NR_BLOCKS * BS));
}

TEST_HARNESS_MAIN
