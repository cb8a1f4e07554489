// SPDX-License-Identifier: GPL-2.0
/*
 * A power loss at any moment loses no block: the blocks the target reports
 * dirty after the crash, copied again, make the replica equal to what the
 * origin kept.
 *
 * The origin and the metadata device each sit on dm-log-writes, which logs
 * a write only once a flush made it durable. The test runs sync cycles
 * (write, freeze, copy, commit; a full copy and clear; a checkpoint) and
 * sends a mark to both logs between every two steps. Then, for each mark,
 * it replays both logs up to that mark onto blank devices, which gives the
 * two disks as a power cut at that moment leaves them (writes not yet
 * flushed are gone), loads the target from the replayed metadata, and
 * checks every block: where the replayed origin and the replica (as the
 * receiver had it at that moment) differ, the block must be dirty.
 */
#include "kselftest_harness.h"
#include "track_test.h"
#include "log_writes.h"

#define BS		4096ULL
#define NBLK		1024ULL			/* a 4 MiB origin */
#define DEV_SECT	(NBLK * 8)
#define META_SECT	4096ULL			/* 2 MiB */
#define LOG_SECT	131072ULL		/* 64 MiB per log */
#define MAX_MARKS	16

#define DATA_BASE	"/dev/mapper/lt-pl-data"
#define DATA_REPLAY	"/dev/mapper/lt-pl-datar"
#define DATA_LOG	"/dev/mapper/lt-pl-datal"
#define META_BASE	"/dev/mapper/lt-pl-meta"
#define META_REPLAY	"/dev/mapper/lt-pl-metar"
#define META_LOG	"/dev/mapper/lt-pl-metal"
#define LW_DATA		"lt-pl-lwd"
#define LW_META		"lt-pl-lwm"
#define CHECK_NAME	"lt-pl-check"
#define TRACK_TABLE(data, meta, extra)					\
	"0 8192 track " data " 0 8 " extra " metadata " meta " region_size 128"

struct mark {
	char name[32];
	int replica;		/* index of the replica as it was then */
};

FIXTURE(powerloss)
{
	unsigned char *replica[MAX_MARKS];	/* snapshots of the replica */
	int nr_replicas;
	struct mark marks[MAX_MARKS];
	int nr_marks;
	unsigned int seed;
};

static int slice(const char *name, const char *disk, uint64_t start,
		 uint64_t len)
{
	return vm_run("echo '0 %llu linear %s %llu' | dmsetup create --noudevsync %s",
		      (unsigned long long)len, disk, (unsigned long long)start,
		      name);
}

static int zero(const char *path, uint64_t sectors)
{
	return vm_run("dd if=/dev/zero of=%s bs=512 count=%llu oflag=direct status=none",
		      path, (unsigned long long)sectors);
}

static void teardown_all(void)
{
	static const char * const names[] = {
		CHECK_NAME, TT_NAME, LW_DATA, LW_META, "lt-pl-data",
		"lt-pl-datar", "lt-pl-datal", "lt-pl-meta", "lt-pl-metar",
		"lt-pl-metal",
	};
	unsigned int i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		tt_remove(names[i]);
}

FIXTURE_SETUP(powerloss)
{
	TT_REQUIRE_TARGET();
	if (!vm_dm_target_present("log-writes"))
		SKIP(return, "no dm-log-writes in this kernel (CONFIG_DM_LOG_WRITES)");
	teardown_all();
	self->seed = 1;

	ASSERT_EQ(0, slice("lt-pl-data", VM_DISK_C, 0, DEV_SECT));
	ASSERT_EQ(0, slice("lt-pl-datar", VM_DISK_C, DEV_SECT, DEV_SECT));
	ASSERT_EQ(0, slice("lt-pl-datal", VM_DISK_C, 2 * DEV_SECT, LOG_SECT));
	ASSERT_EQ(0, slice("lt-pl-meta", VM_DISK_D, 0, META_SECT));
	ASSERT_EQ(0, slice("lt-pl-metar", VM_DISK_D, META_SECT, META_SECT));
	ASSERT_EQ(0, slice("lt-pl-metal", VM_DISK_D, 2 * META_SECT, LOG_SECT));
	ASSERT_EQ(0, zero(DATA_BASE, DEV_SECT));
	ASSERT_EQ(0, zero(META_BASE, META_SECT));
	ASSERT_EQ(0, zero(DATA_LOG, 128));
	ASSERT_EQ(0, zero(META_LOG, 128));
	ASSERT_EQ(0, vm_run("echo '0 %llu log-writes %s %s' | dmsetup create --noudevsync %s",
			    DEV_SECT, DATA_BASE, DATA_LOG, LW_DATA));
	ASSERT_EQ(0, vm_run("echo '0 %llu log-writes %s %s' | dmsetup create --noudevsync %s",
			    META_SECT, META_BASE, META_LOG, LW_META));
	/* The replica starts equal to the blank origin: "clean". */
	ASSERT_EQ(0, vm_run("echo '" TRACK_TABLE("/dev/mapper/" LW_DATA,
						 "/dev/mapper/" LW_META, "5")
			    " clean' | dmsetup create --noudevsync " TT_NAME));
	self->replica[0] = calloc(NBLK, BS);
	ASSERT_NE(NULL, self->replica[0]);
	self->nr_replicas = 1;
}

FIXTURE_TEARDOWN(powerloss)
{
	int i;

	teardown_all();
	for (i = 0; i < self->nr_replicas; i++)
		free(self->replica[i]);
}

/* A mark in both logs: "a power cut here" for the check. */
static int mark(FIXTURE_DATA(powerloss) *self, const char *name)
{
	struct mark *m = &self->marks[self->nr_marks];

	if (self->nr_marks == MAX_MARKS)
		return -ENOSPC;
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->replica = self->nr_replicas - 1;
	self->nr_marks++;
	if (vm_run("dmsetup message " LW_DATA " 0 mark %s", name) ||
	    vm_run("dmsetup message " LW_META " 0 mark %s", name))
		return -EIO;
	return 0;
}

/* Write blocks FIRST..FIRST+N-1 with O_DIRECT; flushed only with SYNC. */
static int write_blocks(FIXTURE_DATA(powerloss) *self, uint64_t first,
			uint64_t n, int sync)
{
	size_t len = n * BS;
	void *buf;
	int fd, r = 0;

	if (posix_memalign(&buf, 4096, len))
		return -ENOMEM;
	vm_fill(buf, len, ++self->seed, first * BS);
	fd = open(TT_PATH, O_WRONLY | O_DIRECT);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	if (pwrite(fd, buf, len, first * BS) != (ssize_t)len)
		r = -EIO;
	if (!r && sync && fsync(fd))
		r = -errno;
	close(fd);
	free(buf);
	return r;
}

/*
 * The receiver's side of a sync: a new replica with the EXTENTS (or every
 * block) read from the origin as the copier reads them (O_DIRECT).
 */
static int copy_to_replica(FIXTURE_DATA(powerloss) *self,
			   const struct tt_extents *x)
{
	unsigned char *next, *buf;
	size_t i;
	int fd, r = 0;

	if (self->nr_replicas == MAX_MARKS)
		return -ENOSPC;
	next = malloc(NBLK * BS);
	if (!next || posix_memalign((void **)&buf, 4096, NBLK * BS)) {
		free(next);
		return -ENOMEM;
	}
	memcpy(next, self->replica[self->nr_replicas - 1], NBLK * BS);
	fd = open(TT_PATH, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	if (pread(fd, buf, NBLK * BS, 0) != (ssize_t)(NBLK * BS)) {
		r = -EIO;
		goto out;
	}
	if (!x) {
		memcpy(next, buf, NBLK * BS);
	} else {
		for (i = 0; i < x->n; i++)
			memcpy(next + x->e[i].first * BS,
			       buf + x->e[i].first * BS, x->e[i].count * BS);
	}
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	if (r) {
		free(next);
		return r;
	}
	self->replica[self->nr_replicas++] = next;
	return 0;
}

/* freeze, copy the frozen set, commit, with marks in between. */
static int sync_cycle(struct __test_metadata *_metadata,
		      FIXTURE_DATA(powerloss) *self, const char *tag)
{
	struct tt_extents x = { 0 };
	char name[32];
	int r;

	if (tt_message(TT_NAME, "freeze"))
		return -EIO;
	snprintf(name, sizeof(name), "%s-frozen", tag);
	if (mark(self, name))
		return -EIO;
	r = tt_extents(TT_NAME, TRACK_DM_FROZEN, &x);
	if (!r)
		r = copy_to_replica(self, &x);
	free(x.e);
	if (r)
		return r;
	snprintf(name, sizeof(name), "%s-copied", tag);
	if (mark(self, name))
		return -EIO;
	if (tt_message(TT_NAME, "commit"))
		return -EIO;
	snprintf(name, sizeof(name), "%s-committed", tag);
	return mark(self, name);
}

static int read_dev(const char *path, unsigned char *buf)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (pread(fd, buf, NBLK * BS, 0) != (ssize_t)(NBLK * BS))
		r = -EIO;
	close(fd);
	return r;
}

/*
 * The crash at mark M: replay both logs, load the target from the result,
 * and return how many blocks differ from the replica without being dirty
 * (0 is the promise). *LOST_BLOCK is set to one of them.
 */
static int check_mark(struct __test_metadata *_metadata,
		      FIXTURE_DATA(powerloss) *self, const struct mark *m,
		      unsigned char *origin, uint64_t *bad_block)
{
	const unsigned char *replica = self->replica[m->replica];
	struct tt_extents x = { 0 };
	struct lw_stats sd, sm;
	uint64_t b;
	int bad = 0;

	tt_remove(CHECK_NAME);
	EXPECT_EQ(0, zero(DATA_REPLAY, DEV_SECT));
	EXPECT_EQ(0, zero(META_REPLAY, META_SECT));
	EXPECT_EQ(0, lw_replay(DATA_LOG, DATA_REPLAY, m->name, &sd));
	EXPECT_EQ(0, lw_replay(META_LOG, META_REPLAY, m->name, &sm));
	EXPECT_TRUE(sd.found && sm.found)
		TH_LOG("mark %s is missing from a log", m->name);
	EXPECT_EQ(0, vm_run("echo '" TRACK_TABLE(DATA_REPLAY, META_REPLAY, "4")
			    "' | dmsetup create --noudevsync " CHECK_NAME));
	EXPECT_EQ(0, tt_extents(CHECK_NAME, TRACK_DM_ACTIVE, &x));
	EXPECT_EQ(0, read_dev(DATA_REPLAY, origin));
	for (b = 0; b < NBLK; b++) {
		if (!memcmp(origin + b * BS, replica + b * BS, BS) ||
		    tt_has(&x, b))
			continue;
		if (!bad++)
			*bad_block = b;
	}
	TH_LOG("crash at %-14s: origin kept %llu writes (%llu flushes), dirty after load: %s, %d blocks lost",
	       m->name, (unsigned long long)sd.writes,
	       (unsigned long long)sd.flushes, tt_str(&x), bad);
	tt_remove(CHECK_NAME);
	free(x.e);
	return bad;
}

TEST_F_TIMEOUT(powerloss, no_block_is_lost_at_any_mark, 600)
{
	unsigned char *origin;
	uint64_t lost_block = 0;
	int i, lost, total = 0, lost_unflushed = 0;

	ASSERT_EQ(0, mark(self, "start"));

	/* A first sync of durable writes. */
	ASSERT_EQ(0, write_blocks(self, 0, 16, 1));
	ASSERT_EQ(0, write_blocks(self, 100, 1, 1));
	ASSERT_EQ(0, mark(self, "written1"));
	ASSERT_EQ(0, sync_cycle(_metadata, self, "sync1"));

	/*
	 * Writes that complete into a volatile cache and are never flushed
	 * by anyone but the target: a commit must not report them clean
	 * before they are durable.
	 */
	ASSERT_EQ(0, write_blocks(self, 16, 16, 0));
	ASSERT_EQ(0, write_blocks(self, 300, 1, 0));
	ASSERT_EQ(0, mark(self, "written2"));
	ASSERT_EQ(0, sync_cycle(_metadata, self, "sync2"));

	/* A full copy, then clear: the same for clear. */
	ASSERT_EQ(0, write_blocks(self, 600, 16, 0));
	ASSERT_EQ(0, copy_to_replica(self, NULL));
	ASSERT_EQ(0, mark(self, "fullcopy"));
	ASSERT_EQ(0, tt_message(TT_NAME, "clear"));
	ASSERT_EQ(0, mark(self, "cleared"));

	/* A checkpoint with unflushed writes in the active set. */
	ASSERT_EQ(0, write_blocks(self, 700, 8, 0));
	ASSERT_EQ(0, tt_message(TT_NAME, "checkpoint"));
	ASSERT_EQ(0, mark(self, "checkpoint"));
	ASSERT_EQ(0, write_blocks(self, 800, 4, 0));
	ASSERT_EQ(0, mark(self, "end"));

	/* Everything logged: the logs are complete once the targets go. */
	tt_remove(TT_NAME);
	tt_remove(LW_DATA);
	tt_remove(LW_META);

	ASSERT_EQ(0, posix_memalign((void **)&origin, 4096, NBLK * BS));
	for (i = 0; i < self->nr_marks; i++) {
		lost = check_mark(_metadata, self, &self->marks[i], origin,
				  &lost_block);
		EXPECT_EQ(0, lost)
			TH_LOG("power loss at %s: block %llu differs from the replica and is not dirty",
			       self->marks[i].name,
			       (unsigned long long)lost_block);
		total += lost;
		/* The simulation must lose what a power cut loses. */
		if (!strcmp(self->marks[i].name, "written2")) {
			unsigned char *mine = malloc(BS);

			ASSERT_NE(NULL, mine);
			/* block 16 was written with seed 4, never flushed */
			vm_fill(mine, BS, 4, 16 * BS);
			lost_unflushed = memcmp(origin + 16 * BS, mine, BS);
			free(mine);
		}
	}
	free(origin);
	EXPECT_TRUE(lost_unflushed)
		TH_LOG("the replayed origin kept a write nobody flushed: the test cannot see a power loss");
	EXPECT_EQ(0, total);
}

TEST_HARNESS_MAIN
