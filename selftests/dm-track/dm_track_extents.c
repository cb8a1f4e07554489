// SPDX-License-Identifier: GPL-2.0
/*
 * dm-track marks exactly the blocks that writes, discards and write-zeroes
 * touch, whole blocks for partial writes, and nothing for reads.
 */
#include <linux/fiemap.h>
#include <sys/mount.h>

#include "kselftest_harness.h"
#include "track_test.h"

#define BS 4096ULL

FIXTURE(track) {
	struct tt_extents x;
};

FIXTURE_SETUP(track)
{
	struct track_dm_params p = {
		.data_dev = VM_DISK_B,
		.length = 2097152,		/* 1 GiB */
		.clean = 1,
	};

	TT_REQUIRE_TARGET();
	tt_remove(TT_NAME);
	memset(&self->x, 0, sizeof(self->x));
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(0, self->x.n) TH_LOG("clean device starts dirty: %s",
				       tt_str(&self->x));
}

FIXTURE_TEARDOWN(track)
{
	vm_run("umount /mnt 2>/dev/null");
	tt_remove(TT_NAME);
	free(self->x.e);
}

TEST_F(track, aligned_write_marks_exactly_its_blocks)
{
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 10 * BS, 3 * BS));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(1, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(10, self->x.e[0].first);
	EXPECT_EQ(3, self->x.e[0].count);
}

TEST_F(track, partial_block_write_marks_the_whole_block)
{
	/* 512 bytes in the middle of block 20 (buffered: read-modify-write). */
	ASSERT_EQ(0, tt_pwrite(TT_PATH, 0, 20 * BS + 1024, 512));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(1, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(20, self->x.e[0].first);
	EXPECT_EQ(1, self->x.e[0].count);
}

TEST_F(track, unaligned_direct_write_spanning_a_boundary_marks_both_blocks)
{
	/* 1 KiB from 512 bytes before the end of block 30. */
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 31 * BS - 512, 1024));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(1, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(30, self->x.e[0].first);
	EXPECT_EQ(2, self->x.e[0].count);
}

TEST_F(track, scattered_writes_give_separate_runs_in_block_order)
{
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 5000 * BS, BS));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 7 * BS, 2 * BS));
	ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 100000 * BS, BS));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(3, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(7, self->x.e[0].first);
	EXPECT_EQ(2, self->x.e[0].count);
	EXPECT_EQ(5000, self->x.e[1].first);
	EXPECT_EQ(100000, self->x.e[2].first);
}

TEST_F(track, reads_mark_nothing)
{
	char buf[8192];
	int fd = open(TT_PATH, O_RDONLY);

	ASSERT_LE(0, fd);
	ASSERT_EQ(sizeof(buf), pread(fd, buf, sizeof(buf), 123 * BS));
	close(fd);
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	EXPECT_EQ(0, self->x.n) TH_LOG("%s", tt_str(&self->x));
}

TEST_F(track, discard_marks_its_range)
{
	uint64_t range[2] = { 64 * BS, 32 * BS };
	int fd = open(TT_PATH, O_WRONLY);

	ASSERT_LE(0, fd);
	if (ioctl(fd, BLKDISCARD, range)) {
		close(fd);
		SKIP(return, "the disk does not support discard: %s",
		     strerror(errno));
	}
	close(fd);
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(1, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(64, self->x.e[0].first);
	EXPECT_EQ(32, self->x.e[0].count);
}

TEST_F(track, write_zeroes_marks_its_range)
{
	uint64_t range[2] = { 200 * BS, 16 * BS };
	int fd = open(TT_PATH, O_WRONLY);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, ioctl(fd, BLKZEROOUT, range));
	close(fd);
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	ASSERT_EQ(1, self->x.n) TH_LOG("%s", tt_str(&self->x));
	EXPECT_EQ(200, self->x.e[0].first);
	EXPECT_EQ(16, self->x.e[0].count);
}

TEST_F(track, flush_alone_marks_nothing)
{
	int fd = open(TT_PATH, O_WRONLY);

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, fsync(fd));
	close(fd);
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	EXPECT_EQ(0, self->x.n) TH_LOG("%s", tt_str(&self->x));
}

TEST_F(track, ext4_file_blocks_are_all_dirty)
{
	char fbuf[sizeof(struct fiemap) + 32 * sizeof(struct fiemap_extent)];
	struct fiemap *fm = (void *)fbuf;
	unsigned int i;
	uint64_t b;
	int fd;

	ASSERT_EQ(0, vm_run("mkfs.ext4 -q -F -b 4096 " TT_PATH));
	ASSERT_EQ(0, mount(TT_PATH, "/mnt", "ext4", 0, NULL));
	/* Only what the file writes from now on. */
	ASSERT_EQ(0, tt_message(TT_NAME, "clear"));
	ASSERT_EQ(0, tt_pwrite("/mnt/f", O_CREAT, 0, 300 * 1024));
	fd = open("/mnt/f", O_RDONLY);
	ASSERT_LE(0, fd);
	memset(fbuf, 0, sizeof(fbuf));
	fm->fm_length = ~0ULL;
	fm->fm_flags = FIEMAP_FLAG_SYNC;
	fm->fm_extent_count = 32;
	ASSERT_EQ(0, ioctl(fd, FS_IOC_FIEMAP, fm));
	close(fd);
	ASSERT_LT(0, fm->fm_mapped_extents);
	ASSERT_EQ(0, vm_run("sync"));

	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &self->x));
	for (i = 0; i < fm->fm_mapped_extents; i++)
		for (b = fm->fm_extents[i].fe_physical / BS;
		     b < (fm->fm_extents[i].fe_physical +
			  fm->fm_extents[i].fe_length) / BS; b++)
			ASSERT_TRUE(tt_has(&self->x, b))
				TH_LOG("block %" PRIu64 " of the file is not dirty: %s",
				       b, tt_str(&self->x));
	EXPECT_EQ(0, umount("/mnt"));
}

TEST_HARNESS_MAIN
