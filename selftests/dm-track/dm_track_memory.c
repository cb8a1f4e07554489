// SPDX-License-Identifier: GPL-2.0
/*
 * Memory grows with what is dirty, not with the device: a 1 TiB device with
 * a few thousand scattered dirty blocks costs a small fraction of a flat
 * bitmap, and an all-dirty one costs no more than a clean one.
 */
#include "kselftest_harness.h"
#include "track_test.h"

#define TIB_SECTORS	(1ULL << 31)
#define BS		4096ULL
#define NR_BLOCKS	(TIB_SECTORS * 512 / BS)
#define FLAT_BYTES	(NR_BLOCKS / 8)
#define SCATTERED	5000

FIXTURE(tib) {
	int unused;
};

FIXTURE_SETUP(tib)
{
	struct track_dm_params p = {
		.data_dev = "/dev/mapper/lt-zero", .length = TIB_SECTORS,
		.clean = 1,
	};

	TT_REQUIRE_TARGET();
	if (!vm_dm_target_present("zero"))
		SKIP(return, "no dm-zero in this kernel");
	tt_remove(TT_NAME);
	tt_remove("lt-zero");
	ASSERT_EQ(0, vm_run("echo '0 %llu zero' | dmsetup create --noudevsync lt-zero",
			    TIB_SECTORS));
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
}

FIXTURE_TEARDOWN(tib)
{
	tt_remove(TT_NAME);
	tt_remove("lt-zero");
}

TEST_F(tib, scattered_dirty_blocks_cost_a_small_fraction_of_a_flat_bitmap)
{
	struct track_dm_status clean, st;
	unsigned int seed = 7, i;
	void *buf;
	int fd;

	ASSERT_EQ(0, tt_status(TT_NAME, &clean));
	ASSERT_EQ(0, posix_memalign(&buf, BS, BS));
	memset(buf, 0xab, BS);
	fd = open(TT_PATH, O_WRONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	for (i = 0; i < SCATTERED; i++) {
		uint64_t b = ((uint64_t)rand_r(&seed) << 16 ^ rand_r(&seed)) %
			     NR_BLOCKS;

		ASSERT_EQ(BS, pwrite(fd, buf, BS, b * BS));
	}
	close(fd);
	free(buf);

	ASSERT_EQ(0, tt_status(TT_NAME, &st));
	EXPECT_LE(SCATTERED - 10, st.dirty_active);
	ksft_print_msg("1 TiB at 4 KiB: clean %llu KiB, %llu scattered dirty blocks %llu KiB, flat bitmap %llu KiB (%.1f%%)\n",
		       (unsigned long long)clean.mem_bytes / 1024,
		       (unsigned long long)st.dirty_active,
		       (unsigned long long)st.mem_bytes / 1024,
		       FLAT_BYTES / 1024, 100.0 * st.mem_bytes / FLAT_BYTES);
	EXPECT_GT(FLAT_BYTES / 8, st.mem_bytes)
		TH_LOG("%llu bytes is not a small fraction of %llu",
		       (unsigned long long)st.mem_bytes, FLAT_BYTES);
}

TEST_F(tib, all_dirty_costs_no_more_than_clean)
{
	struct track_dm_status clean, st;
	struct track_dm *dm;

	ASSERT_EQ(0, tt_status(TT_NAME, &clean));
	ASSERT_EQ(0, track_dm_open(TT_NAME, &dm));
	ASSERT_EQ(0, track_dm_mark_all(dm));
	ASSERT_EQ(0, track_dm_get_status(dm, &st));
	track_dm_free(dm);
	EXPECT_EQ(NR_BLOCKS, st.dirty_active);
	EXPECT_EQ(clean.mem_bytes, st.mem_bytes);
	ksft_print_msg("1 TiB all dirty: %llu KiB\n",
		       (unsigned long long)st.mem_bytes / 1024);
}

TEST_HARNESS_MAIN
