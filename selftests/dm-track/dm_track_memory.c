// SPDX-License-Identifier: GPL-2.0
/*
 * Memory grows with what is dirty, not with the device: a 1 TiB device with
 * a few thousand scattered dirty blocks costs a small fraction of a flat
 * bitmap, and an all-dirty one costs no more than a clean one. At 64 TiB
 * with a metadata device, memory, a freeze and a checkpoint all cost a
 * small fraction of a flat bitmap too.
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

#define BIG_SECTORS	(1ULL << 37)		/* 64 TiB */
#define BIG_BLOCKS	(BIG_SECTORS * 512 / BS)
#define BIG_FLAT	(BIG_BLOCKS / 8)
#define BIG_DIRTY	10000
/* The metadata layout at 64 TiB: 32 intent, 1027 table, 2^19 slot blocks. */
#define BIG_MD_SECTORS	(8ULL * (1 + 32 + 1027 + 524288) + 8192)

/* Sectors written to dm device NAME so far, from its /sys stat. */
static uint64_t sectors_written(const char *name)
{
	unsigned long long v[7] = { 0 };
	char path[128], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/block/%s/stat", name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(line, sizeof(line), f))
		sscanf(line, "%llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
		       &v[2], &v[3], &v[4], &v[5], &v[6]);
	fclose(f);
	return v[6];
}

/* The dm-N kernel name of /dev/mapper/NAME. */
static const char *dm_kname(const char *name)
{
	static char buf[32];
	char path[128];
	ssize_t n;

	snprintf(path, sizeof(path), "/dev/mapper/%s", name);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		return strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
	}
	/* A device node, not a link: find it by its minor number. */
	snprintf(buf, sizeof(buf), "dm-%s",
		 strchr(vm_devno(path), ':') + 1);
	return buf;
}

/*
 * 64 TiB with a metadata device (both dm-zero: the figures are what is
 * kept in memory and what is written, not what is stored): memory, a
 * freeze and a checkpoint with 10,000 scattered dirty blocks each cost a
 * small fraction of the 2 GiB flat bitmap.
 */
FIXTURE(huge) {
	int unused;
};

FIXTURE_SETUP(huge)
{
}

FIXTURE_TEARDOWN(huge)
{
	tt_remove(TT_NAME);
	tt_remove("lt-zero");
	tt_remove("lt-mdzero");
}

TEST_F_TIMEOUT(huge, costs_follow_the_dirty_blocks, 900)
{
	struct track_dm_params p = {
		.data_dev = "/dev/mapper/lt-zero", .length = BIG_SECTORS,
		.metadata_dev = "/dev/mapper/lt-mdzero", .clean = 1,
	};
	struct track_dm_status clean, st, frozen;
	uint64_t created, before, checkpoint, again, commit;
	unsigned int seed = 11, i;
	const char *md;
	void *buf;
	int fd;

	TT_REQUIRE_TARGET();
	if (!vm_dm_target_present("zero"))
		SKIP(return, "no dm-zero in this kernel");
	tt_remove(TT_NAME);
	tt_remove("lt-zero");
	tt_remove("lt-mdzero");
	ASSERT_EQ(0, vm_run("echo '0 %llu zero' | dmsetup create --noudevsync lt-zero",
			    BIG_SECTORS));
	ASSERT_EQ(0, vm_run("echo '0 %llu zero' | dmsetup create --noudevsync lt-mdzero",
			    BIG_MD_SECTORS));
	md = dm_kname("lt-mdzero");
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
	created = sectors_written(md);
	ASSERT_EQ(0, tt_status(TT_NAME, &clean));

	ASSERT_EQ(0, posix_memalign(&buf, BS, BS));
	memset(buf, 0xcd, BS);
	fd = open(TT_PATH, O_WRONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	for (i = 0; i < BIG_DIRTY; i++) {
		uint64_t b = (((uint64_t)rand_r(&seed) << 31) ^
			      ((uint64_t)rand_r(&seed) << 8) ^ rand_r(&seed)) %
			     BIG_BLOCKS;

		ASSERT_EQ(BS, pwrite(fd, buf, BS, b * BS));
	}
	close(fd);
	free(buf);
	ASSERT_EQ(0, tt_status(TT_NAME, &st));

	before = sectors_written(md);
	ASSERT_EQ(0, tt_message(TT_NAME, "checkpoint"));
	checkpoint = sectors_written(md) - before;
	/* A second checkpoint with 100 more blocks writes about 100 slots. */
	fd = open(TT_PATH, O_WRONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, posix_memalign(&buf, BS, BS));
	for (i = 0; i < 100; i++)
		ASSERT_EQ(BS, pwrite(fd, buf, BS,
				     (uint64_t)rand_r(&seed) * 8192 % BIG_BLOCKS * BS));
	close(fd);
	free(buf);
	before = sectors_written(md);
	ASSERT_EQ(0, tt_message(TT_NAME, "checkpoint"));
	again = sectors_written(md) - before;
	ASSERT_EQ(0, tt_message(TT_NAME, "freeze"));
	ASSERT_EQ(0, tt_status(TT_NAME, &frozen));
	before = sectors_written(md);
	ASSERT_EQ(0, tt_message(TT_NAME, "commit"));
	commit = sectors_written(md) - before;
	tt_remove(TT_NAME);
	tt_remove("lt-zero");
	tt_remove("lt-mdzero");

	ksft_print_msg("64 TiB at 4 KiB, flat bitmap %llu MiB:\n",
		       BIG_FLAT >> 20);
	ksft_print_msg("  memory: clean %llu KiB, %llu dirty %llu KiB (%.2f%%), after freeze %llu KiB\n",
		       (unsigned long long)clean.mem_bytes >> 10,
		       (unsigned long long)st.dirty_active,
		       (unsigned long long)st.mem_bytes >> 10,
		       100.0 * st.mem_bytes / BIG_FLAT,
		       (unsigned long long)frozen.mem_bytes >> 10);
	ksft_print_msg("  metadata written: create %llu KiB, checkpoint %llu KiB (%.3f%%), after 100 more %llu KiB, commit %llu KiB\n",
		       (unsigned long long)created / 2,
		       (unsigned long long)checkpoint / 2,
		       100.0 * checkpoint * 512 / BIG_FLAT,
		       (unsigned long long)again / 2,
		       (unsigned long long)commit / 2);
	EXPECT_LE(BIG_DIRTY - 10, st.dirty_active);
	EXPECT_GT(BIG_FLAT / 64, st.mem_bytes);
	EXPECT_GT(BIG_FLAT / 64, frozen.mem_bytes);
	/* About a 4 KiB slot per dirty block, and the table blocks. */
	EXPECT_GT(BIG_FLAT / 32, checkpoint * 512);
	EXPECT_GT(BIG_FLAT / 1024, again * 512);
	EXPECT_GT(BIG_FLAT / 64, commit * 512);
}

TEST_HARNESS_MAIN
