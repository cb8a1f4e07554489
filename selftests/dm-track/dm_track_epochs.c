// SPDX-License-Identifier: GPL-2.0
/*
 * Epochs: freeze moves the active set into a frozen one, commit drops it,
 * abort gives it back, a stale epoch is refused, and a new device starts
 * all-dirty unless the table says "clean".
 */
#include <pthread.h>

#include "kselftest_harness.h"
#include "track_test.h"

#define BS 4096ULL

FIXTURE(epochs) {
	struct tt_extents x;
	struct track_dm *dm;
};

FIXTURE_SETUP(epochs)
{
	struct track_dm_params p = {
		.data_dev = VM_DISK_B, .length = 262144, .clean = 1,
	};

	TT_REQUIRE_TARGET();
	tt_remove(TT_NAME);
	memset(&self->x, 0, sizeof(self->x));
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
	ASSERT_EQ(0, track_dm_open(TT_NAME, &self->dm));
}

FIXTURE_TEARDOWN(epochs)
{
	if (self->dm)
		track_dm_free(self->dm);
	tt_remove(TT_NAME);
	free(self->x.e);
}

TEST_F(epochs, freeze_moves_active_set_to_frozen)
{
	struct track_dm_status st;
	uint64_t e;

	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 5 * BS, BS));
	ASSERT_EQ(0, track_dm_freeze(self->dm, &e));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_FROZEN, &self->x));
	ASSERT_EQ(1, self->x.n);
	EXPECT_EQ(5, self->x.e[0].first);
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	EXPECT_EQ(0, self->x.n);

	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(e, st.frozen_epoch);
	EXPECT_EQ(e + 1, st.epoch);
	EXPECT_EQ(1, st.dirty_frozen);
	EXPECT_EQ(0, st.dirty_active);
	EXPECT_EQ(0, st.committed_epoch);
}

TEST_F(epochs, commit_drops_frozen_set_and_records_epoch)
{
	struct track_dm_status st;
	uint64_t e;

	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 5 * BS, BS));
	ASSERT_EQ(0, track_dm_freeze(self->dm, &e));
	ASSERT_EQ(0, track_dm_commit(self->dm, e));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(0, st.frozen_epoch);
	EXPECT_EQ(e, st.committed_epoch);
	EXPECT_EQ(0, st.dirty_active);
	EXPECT_EQ(-ENOENT, tt_extents(TT_NAME, TRACK_DM_FROZEN, &self->x));
}

TEST_F(epochs, abort_gives_frozen_blocks_back)
{
	uint64_t e;

	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 5 * BS, BS));
	ASSERT_EQ(0, track_dm_freeze(self->dm, &e));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 9 * BS, BS));
	ASSERT_EQ(0, track_dm_abort(self->dm, e));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(2, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(5, self->x.e[0].first);
	EXPECT_EQ(9, self->x.e[1].first);
}

TEST_F(epochs, stale_commit_and_abort_are_refused)
{
	struct track_dm_status st;
	uint64_t e;

	EXPECT_EQ(-ESTALE, track_dm_commit(self->dm, 1));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 5 * BS, BS));
	ASSERT_EQ(0, track_dm_freeze(self->dm, &e));
	EXPECT_EQ(-ESTALE, track_dm_commit(self->dm, e - 1));
	EXPECT_EQ(-ESTALE, track_dm_commit(self->dm, e + 1));
	EXPECT_EQ(-ESTALE, track_dm_abort(self->dm, e + 1));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(1, st.dirty_frozen) TH_LOG("a refused commit dropped blocks");
	ASSERT_EQ(0, track_dm_commit(self->dm, e));
	EXPECT_EQ(-ESTALE, track_dm_commit(self->dm, e));
}

TEST_F(epochs, freeze_again_before_commit_ors_into_frozen)
{
	struct track_dm_status st;
	uint64_t e1, e2;

	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 5 * BS, BS));
	ASSERT_EQ(0, track_dm_freeze(self->dm, &e1));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 9 * BS, BS));
	ASSERT_EQ(0, track_dm_freeze(self->dm, &e2));
	EXPECT_LT(e1, e2);
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_FROZEN, &self->x));
	ASSERT_EQ(2, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(-ESTALE, track_dm_commit(self->dm, e1));
	ASSERT_EQ(0, track_dm_commit(self->dm, e2));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(e2, st.committed_epoch);
}

TEST_F(epochs, epochs_increase_across_many_freezes)
{
	uint64_t prev = 0, e;
	int i;

	for (i = 0; i < 50; i++) {
		ASSERT_EQ(0, track_dm_freeze(self->dm, &e));
		EXPECT_LT(prev, e);
		prev = e;
		if (i % 2)
			ASSERT_EQ(0, track_dm_commit(self->dm, e));
	}
}

TEST_F(epochs, clear_forgets_and_mark_all_marks_everything)
{
	struct track_dm_status st;

	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 5 * BS, BS));
	ASSERT_EQ(0, track_dm_mark_all(self->dm));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(st.nr_blocks, st.dirty_active);
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(1, self->x.n);
	EXPECT_EQ(0, self->x.e[0].first);
	EXPECT_EQ(st.nr_blocks, self->x.e[0].count);

	ASSERT_EQ(0, track_dm_clear(self->dm));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(0, st.dirty_active);
}

TEST_F(epochs, status_table_prints_the_table_back)
{
	char out[512], want[512];
	FILE *f;

	f = popen("dmsetup table " TT_NAME, "r");
	ASSERT_NE(NULL, f);
	ASSERT_NE(NULL, fgets(out, sizeof(out), f));
	pclose(f);
	/* Devices as major:minor, as dm-era and dm-linear print them. */
	snprintf(want, sizeof(want), "0 262144 track %s 0 8 1 clean\n",
		 vm_devno(VM_DISK_B));
	EXPECT_STREQ(want, out);
}

TEST(new_device_starts_all_dirty_without_clean)
{
	struct track_dm_params p = { .data_dev = VM_DISK_B, .length = 8192 };
	struct track_dm_status st;

	TT_REQUIRE_TARGET();
	tt_remove(TT_NAME);
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
	ASSERT_EQ(0, tt_status(TT_NAME, &st));
	tt_remove(TT_NAME);
	EXPECT_EQ(1024, st.nr_blocks);
	EXPECT_EQ(1024, st.dirty_active);
}

TEST(block_sizes_from_512_bytes_to_1_mib_count_blocks)
{
	static const unsigned int sizes[] = { 512, 4096, 65536, 1048576 };
	struct track_dm_status st;
	struct tt_extents x = { 0 };
	unsigned int i;

	TT_REQUIRE_TARGET();
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		struct track_dm_params p = {
			.data_dev = VM_DISK_B, .length = 65536, .clean = 1,
			.block_size = sizes[i],
		};

		tt_remove(TT_NAME);
		ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
		/* 4 KiB at 1 MiB + 4 KiB. */
		ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 1052672, 4096));
		ASSERT_EQ(0, tt_status(TT_NAME, &st));
		EXPECT_EQ(sizes[i], st.block_size);
		EXPECT_EQ(65536ULL * 512 / sizes[i], st.nr_blocks);
		ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &x));
		ASSERT_EQ(1, x.n);
		EXPECT_EQ(1052672 / sizes[i], x.e[0].first);
		EXPECT_EQ(sizes[i] >= 4096 ? 1 : 4096 / sizes[i], x.e[0].count);
		tt_remove(TT_NAME);
	}
	free(x.e);
}

static void *delayed_write(void *arg)
{
	return (void *)(long)tt_pwrite(TT_PATH, O_DIRECT, 77 * BS, BS);
}

/*
 * A write still in flight when freeze returns must reach the next epoch as
 * well: the copier may read the block before the data lands. dm-delay
 * under dm-track holds the write for two seconds.
 */
TEST(freeze_never_loses_inflight_write)
{
	struct track_dm_params p = {
		.data_dev = "/dev/mapper/lt-delay", .length = 262144, .clean = 1,
	};
	struct tt_extents x = { 0 };
	struct track_dm *dm;
	pthread_t t;
	uint64_t e;
	void *ret;

	TT_REQUIRE_TARGET();
	if (!vm_dm_target_present("delay"))
		SKIP(return, "no dm-delay in this kernel");
	tt_remove(TT_NAME);
	tt_remove("lt-delay");
	ASSERT_EQ(0, vm_run("echo '0 262144 delay " VM_DISK_B " 0 0 "
			    VM_DISK_B " 0 2000' | dmsetup create --noudevsync lt-delay"));
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
	ASSERT_EQ(0, track_dm_open(TT_NAME, &dm));

	ASSERT_EQ(0, pthread_create(&t, NULL, delayed_write, NULL));
	usleep(500000);			/* mapped, held by dm-delay */
	ASSERT_EQ(0, track_dm_freeze(dm, &e));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_FROZEN, &x));
	EXPECT_TRUE(tt_has(&x, 77)) TH_LOG("frozen: %s", tt_str(&x));

	ASSERT_EQ(0, pthread_join(t, &ret));
	ASSERT_EQ(NULL, ret);
	ASSERT_EQ(0, track_dm_commit(dm, e));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &x));
	EXPECT_TRUE(tt_has(&x, 77))
		TH_LOG("the write completed after freeze but is not in the new epoch: %s",
		       tt_str(&x));

	track_dm_free(dm);
	tt_remove(TT_NAME);
	tt_remove("lt-delay");
	free(x.e);
}

TEST_HARNESS_MAIN
