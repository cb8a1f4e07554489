// SPDX-License-Identifier: GPL-2.0
/*
 * The dirty set survives removing and recreating the device (with a
 * metadata device) and reloading its table (without one); corrupt metadata
 * errs towards dirty, and the kernel log says why.
 */
#include <time.h>

#include "kselftest_harness.h"
#include "track_test.h"

#define BS	4096ULL
#define LEN	2097152ULL		/* sectors: 1 GiB, 262144 blocks */
#define TABLE	"0 2097152 track " VM_DISK_B " 0 8 2 metadata " VM_DISK_D
#define TABLE_CLEAN "0 2097152 track " VM_DISK_B " 0 8 3 metadata " VM_DISK_D " clean"

static void create(struct __test_metadata *_metadata, const char *table)
{
	ASSERT_EQ(0, vm_run("echo '%s' | dmsetup create --noudevsync " TT_NAME,
			    table));
}

/*
 * Create the device with TABLE (the kernel log marked with TAG first):
 * every block must come back dirty, and the log say WHY.
 */
static void create_all_dirty(struct __test_metadata *_metadata,
			     const char *table, const char *tag,
			     const char *why)
{
	struct track_dm_status st;

	vm_kmsg_mark(tag);
	create(_metadata, table);
	ASSERT_EQ(0, tt_status(TT_NAME, &st));
	EXPECT_EQ(st.nr_blocks, st.dirty_active);
	EXPECT_TRUE(vm_kmsg_has(tag, why));
}

FIXTURE(persist) {
	struct tt_extents x;
	struct track_dm *dm;
};

FIXTURE_SETUP(persist)
{
	TT_REQUIRE_TARGET();
	tt_remove(TT_NAME);
	memset(&self->x, 0, sizeof(self->x));
	self->dm = NULL;
	ASSERT_EQ(0, vm_run("/sbin/blkdiscard -z " VM_DISK_D));
}

FIXTURE_TEARDOWN(persist)
{
	if (self->dm)
		track_dm_free(self->dm);
	tt_remove(TT_NAME);
	free(self->x.e);
}

TEST_F(persist, blank_metadata_starts_all_dirty_and_says_so)
{
	struct track_dm_status st;

	vm_kmsg_mark("blank");
	create(_metadata, TABLE);
	ASSERT_EQ(0, tt_status(TT_NAME, &st));
	EXPECT_EQ(st.nr_blocks, st.dirty_active);
	EXPECT_EQ(TRACK_DM_PERSIST_OK, st.persist);
	EXPECT_TRUE(vm_kmsg_has("blank", "new metadata device"));
}

TEST_F(persist, dirty_set_epochs_and_id_survive_remove_and_recreate)
{
	struct track_dm_status before, after;
	uint64_t e;

	create(_metadata, TABLE_CLEAN);
	ASSERT_EQ(0, track_dm_open(TT_NAME, &self->dm));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 5 * BS, BS));
	ASSERT_EQ(0, track_dm_freeze(self->dm, &e));
	ASSERT_EQ(0, track_dm_commit(self->dm, e));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 7 * BS, BS));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 100000 * BS, 3 * BS));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &before));
	track_dm_free(self->dm);
	self->dm = NULL;
	tt_remove(TT_NAME);

	vm_kmsg_mark("recreate");
	create(_metadata, TABLE_CLEAN);
	ASSERT_EQ(0, tt_status(TT_NAME, &after));
	EXPECT_STREQ(before.track_id, after.track_id);
	EXPECT_EQ(e, after.committed_epoch);
	EXPECT_LT(before.epoch, after.epoch);
	EXPECT_FALSE(vm_kmsg_has("recreate", "not shut down cleanly"));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(2, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(7, self->x.e[0].first);
	EXPECT_EQ(1, self->x.e[0].count);
	EXPECT_EQ(100000, self->x.e[1].first);
	EXPECT_EQ(3, self->x.e[1].count);
}

TEST_F(persist, uncommitted_frozen_blocks_survive_as_dirty)
{
	uint64_t e;

	create(_metadata, TABLE_CLEAN);
	ASSERT_EQ(0, track_dm_open(TT_NAME, &self->dm));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 40 * BS, BS));
	ASSERT_EQ(0, track_dm_freeze(self->dm, &e));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 50 * BS, BS));
	track_dm_free(self->dm);
	self->dm = NULL;
	tt_remove(TT_NAME);

	create(_metadata, TABLE_CLEAN);
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(2, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(40, self->x.e[0].first);
	EXPECT_EQ(50, self->x.e[1].first);
}

TEST_F(persist, corrupt_superblock_means_all_dirty_and_says_why)
{
	create(_metadata, TABLE_CLEAN);
	tt_remove(TT_NAME);
	ASSERT_EQ(0, vm_run("printf garbage | dd of=" VM_DISK_D
			    " bs=1 seek=100 conv=notrunc 2>/dev/null && sync"));
	create_all_dirty(_metadata, TABLE_CLEAN, "corrupt",
			 "superblock checksum is wrong");
}

TEST_F(persist, corrupt_slot_marks_only_its_blocks_dirty)
{
	create(_metadata, TABLE_CLEAN);
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 100 * BS, BS));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 200000 * BS, BS));
	tt_remove(TT_NAME);
	/*
	 * 1 GiB in 4 MiB regions: superblock, 1 intent block, 1 table block,
	 * then slot 0 (blocks 0-32767) at metadata block 3.
	 */
	ASSERT_EQ(0, vm_run("printf garbage | dd of=" VM_DISK_D
			    " bs=1 seek=%u conv=notrunc 2>/dev/null && sync",
			    3 * 4096 + 2000));
	vm_kmsg_mark("slot");
	create(_metadata, TABLE_CLEAN);
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(2, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(0, self->x.e[0].first);
	EXPECT_EQ(32768, self->x.e[0].count);
	EXPECT_EQ(200000, self->x.e[1].first);
	EXPECT_EQ(1, self->x.e[1].count);
	EXPECT_TRUE(vm_kmsg_has("slot", "1 stored slots failed their checksum"));
}

TEST_F(persist, other_block_size_means_all_dirty)
{
	create(_metadata, TABLE_CLEAN);
	tt_remove(TT_NAME);
	create_all_dirty(_metadata, "0 2097152 track " VM_DISK_B
			 " 0 16 3 metadata " VM_DISK_D " clean",
			 "geometry", "another block size");
}

TEST_F(persist, growing_the_device_keeps_the_set_and_dirties_new_blocks)
{
	create(_metadata, TABLE_CLEAN);
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 9 * BS, BS));
	tt_remove(TT_NAME);
	create(_metadata, "0 2105344 track " VM_DISK_B " 0 8 3 metadata "
			  VM_DISK_D " clean");
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(2, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(9, self->x.e[0].first);
	EXPECT_EQ(262144, self->x.e[1].first);
	EXPECT_EQ(1024, self->x.e[1].count);
}

/* Without a metadata device, a table reload hands the sets over. */
TEST_F(persist, table_reload_keeps_sets_and_epochs)
{
	struct track_dm_status st;
	uint64_t e;

	create(_metadata, "0 2097152 track " VM_DISK_B " 0 8 1 clean");
	ASSERT_EQ(0, track_dm_open(TT_NAME, &self->dm));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 11 * BS, BS));
	ASSERT_EQ(0, track_dm_freeze(self->dm, &e));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 12 * BS, BS));

	/* Grow by 8 MiB. */
	ASSERT_EQ(0, vm_run("echo '0 2113536 track " VM_DISK_B " 0 8 1 clean' | "
			    "dmsetup reload " TT_NAME " && dmsetup resume --noudevsync "
			    TT_NAME));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(264192, st.nr_blocks);
	EXPECT_EQ(e, st.frozen_epoch);
	EXPECT_EQ(1, st.dirty_frozen);
	EXPECT_EQ(1 + 2048, st.dirty_active);
	ASSERT_EQ(0, track_dm_commit(self->dm, e));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(2, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(12, self->x.e[0].first);
	EXPECT_EQ(262144, self->x.e[1].first);
}

/*
 * A write whose intent bit cannot be written waits until the stored state
 * is marked invalid: had it gone first, a crash before that mark would
 * load a set without it. The superblock write is slowed down (dm-delay)
 * so that the order shows in how long the write takes.
 */
TEST_F(persist, failed_intent_write_marks_the_metadata_invalid)
{
	struct track_dm_status st;
	struct timespec t0, t1;

	tt_remove("lt-flaky");
	ASSERT_EQ(0, vm_run("echo '0 524288 linear " VM_DISK_D " 0' | "
			    "dmsetup create --noudevsync lt-flaky"));
	create(_metadata, "0 2097152 track " VM_DISK_B
			  " 0 8 3 metadata /dev/mapper/lt-flaky clean");
	/*
	 * Now the superblock can be written, in 3 s; the rest of it not.
	 * Flushes are not delayed: dm sends them to the metadata device too,
	 * and an fsync must not wait for the superblock either way.
	 */
	ASSERT_EQ(0, vm_run("dmsetup suspend --noudevsync lt-flaky && "
			    "printf '0 8 delay " VM_DISK_D " 0 0 " VM_DISK_D
			    " 0 3000 " VM_DISK_D " 0 0\\n8 524280 error\\n' | "
			    "dmsetup load lt-flaky && "
			    "dmsetup resume --noudevsync lt-flaky"));
	vm_kmsg_mark("flaky");
	/*
	 * The first write to a region needs an intent write, which fails.
	 * The write may complete only after the invalid superblock, which
	 * takes 3 s: sooner means it went while a crash would lose it.
	 */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 150000 * BS, BS));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	EXPECT_LE(2500, (t1.tv_sec - t0.tv_sec) * 1000 +
			(t1.tv_nsec - t0.tv_nsec) / 1000000)
		TH_LOG("the write completed before the failure was recorded");
	EXPECT_TRUE(vm_kmsg_has("flaky", "metadata marked invalid"));
	ASSERT_EQ(0, tt_status(TT_NAME, &st));
	EXPECT_EQ(TRACK_DM_PERSIST_FAILED, st.persist);
	EXPECT_EQ(1, st.dirty_active);
	EXPECT_TRUE(vm_kmsg_has("flaky", "tracking in memory only"));

	/* A suspend and resume carries on in memory: nothing to protect. */
	ASSERT_EQ(0, vm_run("dmsetup suspend --noudevsync " TT_NAME " && "
			    "dmsetup resume --noudevsync " TT_NAME));
	EXPECT_TRUE(vm_kmsg_has("flaky", "resuming, tracking in memory only"));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 160000 * BS, BS));
	ASSERT_EQ(0, tt_status(TT_NAME, &st));
	EXPECT_EQ(TRACK_DM_PERSIST_FAILED, st.persist);
	EXPECT_EQ(2, st.dirty_active);
	tt_remove(TT_NAME);

	/* Repaired: the next load trusts nothing it stored. */
	ASSERT_EQ(0, vm_run("dmsetup suspend --noudevsync lt-flaky && "
			    "echo '0 524288 linear " VM_DISK_D " 0' | "
			    "dmsetup load lt-flaky && "
			    "dmsetup resume --noudevsync lt-flaky"));
	create_all_dirty(_metadata, "0 2097152 track " VM_DISK_B
			 " 0 8 3 metadata /dev/mapper/lt-flaky clean",
			 "repaired", "stored state marked invalid");
	tt_remove(TT_NAME);
	tt_remove("lt-flaky");
}

/* The raw metadata status word: "ok", "failed" or "unrecorded". */
static int md_status_is(const char *word)
{
	return vm_run("dmsetup status " TT_NAME " | awk '{ print $12 }' | grep -qx %s",
		      word) == 0;
}

/*
 * The stored state, loaded into a second device from a copy of the
 * metadata (a crash now would load exactly this): which blocks are dirty.
 */
static void load_copy(struct __test_metadata *_metadata, struct tt_extents *x)
{
	tt_remove("lt-check");
	tt_remove("lt-mdcopy");
	ASSERT_EQ(0, vm_run("echo '0 4096 linear " VM_DISK_C " 0' | "
			    "dmsetup create --noudevsync lt-mdcopy && "
			    "dd if=" VM_DISK_D " of=/dev/mapper/lt-mdcopy bs=1M count=2 "
			    "iflag=direct oflag=direct status=none"));
	ASSERT_EQ(0, vm_run("echo '0 2097152 track " VM_DISK_B
			    " 0 8 2 metadata /dev/mapper/lt-mdcopy' | "
			    "dmsetup create --noudevsync lt-check"));
	ASSERT_EQ(0, tt_extents("lt-check", TRACK_DM_ACTIVE, x));
	tt_remove("lt-check");
	tt_remove("lt-mdcopy");
}

/*
 * A flapping metadata path: an intent write fails, and so does the
 * superblock that would record the failure. Writes that need a new intent
 * bit must then fail (a crash would load a set without them), writes
 * covered by an intent bit on disk go on, and once the path is back the
 * failure is recorded and writes go on in memory.
 */
TEST_F(persist, unrecorded_failure_fails_writes_that_need_intent)
{
	struct tt_extents x = { 0 };
	int went;

	tt_remove("lt-flaky");
	ASSERT_EQ(0, vm_run("echo '0 524288 linear " VM_DISK_D " 0' | "
			    "dmsetup create --noudevsync lt-flaky"));
	create(_metadata, "0 2097152 track " VM_DISK_B
			  " 0 8 3 metadata /dev/mapper/lt-flaky clean");
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 0, BS));
	EXPECT_TRUE(md_status_is("ok"));

	/* The whole metadata device stops taking writes. */
	ASSERT_EQ(0, vm_run("dmsetup suspend --noudevsync lt-flaky && "
			    "echo '0 524288 error' | dmsetup load lt-flaky && "
			    "dmsetup resume --noudevsync lt-flaky"));
	vm_kmsg_mark("unrecorded");
	went = tt_pwrite(TT_PATH, O_DIRECT, 150000 * BS, BS) == 0;
	EXPECT_FALSE(went)
		TH_LOG("a write that needs a new intent bit went through unrecorded");
	EXPECT_TRUE(md_status_is("unrecorded"));
	EXPECT_TRUE(vm_kmsg_has("unrecorded", "cannot mark the metadata invalid"));
	/* Its region's intent bit is on disk: a crash finds this one. */
	EXPECT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 1 * BS, BS));

	/* A crash now: every block that was written comes back dirty. */
	load_copy(_metadata, &x);
	EXPECT_TRUE(tt_has(&x, 0) && tt_has(&x, 1)) TH_LOG("dirty: %s", tt_str(&x));
	if (went)
		EXPECT_TRUE(tt_has(&x, 150000))
			TH_LOG("block 150000 was written and a crash would lose it: dirty %s",
			       tt_str(&x));

	/* The path comes back: the retry records the failure. */
	ASSERT_EQ(0, vm_run("dmsetup suspend --noudevsync lt-flaky && "
			    "echo '0 524288 linear " VM_DISK_D " 0' | "
			    "dmsetup load lt-flaky && "
			    "dmsetup resume --noudevsync lt-flaky"));
	EXPECT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 160000 * BS, BS));
	EXPECT_TRUE(md_status_is("failed"));
	EXPECT_TRUE(vm_kmsg_has("unrecorded", "metadata marked invalid"));
	load_copy(_metadata, &x);
	EXPECT_EQ(262144, tt_blocks(&x)) TH_LOG("not all dirty: %s", tt_str(&x));
	free(x.e);
	tt_remove(TT_NAME);
	tt_remove("lt-flaky");
}

TEST_F(persist, unwritable_metadata_device_refuses_to_resume)
{
	tt_remove("lt-flaky");
	ASSERT_EQ(0, vm_run("echo '0 524288 error' | "
			    "dmsetup create --noudevsync lt-flaky"));
	vm_kmsg_mark("unwritable");
	EXPECT_NE(0, vm_run("echo '0 2097152 track " VM_DISK_B
			    " 0 8 2 metadata /dev/mapper/lt-flaky' | "
			    "dmsetup create --noudevsync " TT_NAME " 2>/dev/null"));
	EXPECT_TRUE(vm_kmsg_has("unwritable", "not resuming"));
	tt_remove(TT_NAME);
	tt_remove("lt-flaky");
}

/*
 * The sets move to a table without a metadata device: the old one, which
 * its last suspend left clean, must not be trusted again.
 */
TEST_F(persist, reload_away_from_the_metadata_device_invalidates_it)
{
	struct track_dm_status st;

	create(_metadata, TABLE_CLEAN);
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 5 * BS, BS));
	ASSERT_EQ(0, vm_run("echo '0 2097152 track " VM_DISK_B " 0 8 1 clean' | "
			    "dmsetup reload " TT_NAME " && dmsetup resume --noudevsync "
			    TT_NAME));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 6 * BS, BS));
	ASSERT_EQ(0, tt_status(TT_NAME, &st));
	EXPECT_EQ(2, st.dirty_active);
	tt_remove(TT_NAME);

	/* Block 6 was never stored there: everything must be dirty. */
	create_all_dirty(_metadata, TABLE_CLEAN, "back",
			 "stored state marked invalid");
}

/*
 * Creating lt-other with TABLE (the kernel log marked with TAG first) must
 * fail, and the log say WHY.
 */
static void other_is_refused(struct __test_metadata *_metadata,
			     const char *table, const char *tag,
			     const char *why)
{
	tt_remove("lt-other");
	vm_kmsg_mark(tag);
	EXPECT_NE(0, vm_run("echo '%s' | dmsetup create --noudevsync lt-other"
			    " 2>/dev/null", table));
	EXPECT_TRUE(vm_kmsg_has(tag, why));
	tt_remove("lt-other");
}

/* Two devices sharing a metadata device would load each other's sets. */
TEST_F(persist, metadata_device_of_another_track_device_is_refused)
{
	create(_metadata, TABLE);
	other_is_refused(_metadata, "0 524288 track " VM_DISK_C " 0 8 2 metadata "
			 VM_DISK_D, "shared", "in use by another track device");
}

/*
 * A metadata device that is another device's data device would have its
 * bitmap written over that device's data, and the other way round.
 */
TEST_F(persist, data_device_of_another_track_device_is_refused_as_metadata)
{
	create(_metadata, TABLE);
	other_is_refused(_metadata, "0 524288 track " VM_DISK_C " 0 8 2 metadata "
			 VM_DISK_B, "md-on-data", "in use by another track device");
	other_is_refused(_metadata, "0 524288 track " VM_DISK_D " 0 8",
			 "data-on-md",
			 "metadata or COW device of another track device");

	/* Both are fine once the first device is gone. */
	tt_remove(TT_NAME);
	EXPECT_EQ(0, vm_run("echo '0 524288 track " VM_DISK_D " 0 8' |"
			    " dmsetup create --noudevsync lt-other"));
	tt_remove("lt-other");
}

/* A reload that changes the block size cannot reuse the sets. */
TEST_F(persist, reload_with_another_block_size_marks_everything_dirty)
{
	struct track_dm_status st;

	create(_metadata, "0 2097152 track " VM_DISK_B " 0 8 1 clean");
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 11 * BS, BS));
	vm_kmsg_mark("reshape");
	ASSERT_EQ(0, vm_run("echo '0 2097152 track " VM_DISK_B " 0 16 1 clean' | "
			    "dmsetup reload " TT_NAME " && dmsetup resume --noudevsync "
			    TT_NAME));
	ASSERT_EQ(0, tt_status(TT_NAME, &st));
	EXPECT_EQ(st.nr_blocks, st.dirty_active);
	EXPECT_TRUE(vm_kmsg_has("reshape", "every block is dirty"));
}

TEST_HARNESS_MAIN
