// SPDX-License-Identifier: GPL-2.0
/*
 * The VM platform itself: a dm-linear device created with dmsetup over a
 * virtio disk passes writes through to the disk at the mapped offset.
 */
#include "kselftest_harness.h"
#include "vmtest.h"

#define DM_NAME "lt-linear"
#define OFFSET_SECTORS 2048ULL
#define LEN (1024 * 1024)

FIXTURE(linear) {
	char *buf;
	char *back;
};

FIXTURE_SETUP(linear)
{
	if (!vm_dm_target_present("linear"))
		SKIP(return, "device-mapper or dm-linear is not in this kernel");
	vm_run("dmsetup remove --noudevsync " DM_NAME " 2>/dev/null");
	ASSERT_EQ(0, vm_run("echo '0 65536 linear " VM_DISK_B " %llu' | "
			    "dmsetup create --noudevsync " DM_NAME,
			    OFFSET_SECTORS));
	ASSERT_EQ(0, posix_memalign((void **)&self->buf, 4096, LEN));
	ASSERT_EQ(0, posix_memalign((void **)&self->back, 4096, LEN));
	ASSERT_NE(NULL, self->buf);
	ASSERT_NE(NULL, self->back);
}

FIXTURE_TEARDOWN(linear)
{
	vm_run("dmsetup remove --noudevsync " DM_NAME " 2>/dev/null");
	free(self->buf);
	free(self->back);
}

TEST_F(linear, write_through_dm_lands_at_mapped_offset_of_disk)
{
	int fd;

	vm_fill(self->buf, LEN, 42, 0);
	fd = open("/dev/mapper/" DM_NAME, O_WRONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	ASSERT_EQ(LEN, pwrite(fd, self->buf, LEN, 4096));
	ASSERT_EQ(0, fsync(fd));
	close(fd);

	fd = open(VM_DISK_B, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	ASSERT_EQ(LEN, pread(fd, self->back, LEN,
			     OFFSET_SECTORS * 512 + 4096));
	close(fd);
	ASSERT_EQ(0, memcmp(self->buf, self->back, LEN));
}

TEST_HARNESS_MAIN
