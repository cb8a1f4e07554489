// SPDX-License-Identifier: GPL-2.0
/*
 * Every malformed table line is refused, and the kernel log names what is
 * wrong with it; a good one is printed back unchanged.
 */
#include "kselftest_harness.h"
#include "track_test.h"

static const struct {
	const char *table;
	const char *error;
} bad_tables[] = {
	{ "track " VM_DISK_B " 0", "Invalid argument count" },
	{ "track " VM_DISK_B " x 8", "Invalid device offset" },
	{ "track " VM_DISK_B " 0 3", "Invalid block size" },
	{ "track " VM_DISK_B " 0 0", "Invalid block size" },
	{ "track " VM_DISK_B " 0 131072", "Invalid block size" },
	{ "track " VM_DISK_B " 0 8x", "Invalid block size" },
	{ "track /dev/nonexistent 0 8", "Cannot open the data device" },
	{ "track " VM_DISK_B " 0 8 1 bogus", "Unrecognised feature requested" },
	{ "track " VM_DISK_B " 0 8 2 clean", "Invalid number of feature arguments" },
	{ "track " VM_DISK_B " 0 8 9 clean", "Invalid number of feature arguments" },
	{ "track " VM_DISK_B " 0 8 1 metadata", "Feature metadata needs a device" },
	{ "track " VM_DISK_B " 0 8 1 clean extra", "Too many arguments" },
	{ "track " VM_DISK_B " 0 8 2 region_size 3", "Invalid region_size" },
	{ "track " VM_DISK_B " 0 8 2 region_size 4", "Invalid region_size" },
	{ "track " VM_DISK_B " 0 8 2 metadata /dev/nonexistent",
	  "Cannot open the metadata device" },
	{ "track " VM_DISK_B " 0 8 2 metadata " VM_DISK_B,
	  "The metadata device must not be the data device" },
	{ "track " VM_DISK_B " 0 8 2 metadata /dev/mapper/lt-tiny",
	  "Metadata device too small" },
};

TEST(malformed_table_lines_are_refused_with_their_reason)
{
	char tag[32];
	unsigned int i;

	TT_REQUIRE_TARGET();
	tt_remove(TT_NAME);
	tt_remove("lt-tiny");
	ASSERT_EQ(0, vm_run("echo '0 8 linear " VM_DISK_C " 0' | "
			    "dmsetup create --noudevsync lt-tiny"));
	for (i = 0; i < ARRAY_SIZE(bad_tables); i++) {
		snprintf(tag, sizeof(tag), "table-%u", i);
		vm_kmsg_mark(tag);
		EXPECT_NE(0, vm_run("echo '0 2097152 %s' | dmsetup create "
				    "--noudevsync " TT_NAME " 2>/dev/null",
				    bad_tables[i].table))
			TH_LOG("accepted: %s", bad_tables[i].table);
		EXPECT_TRUE(vm_kmsg_has(tag, bad_tables[i].error))
			TH_LOG("'%s' did not log '%s'", bad_tables[i].table,
			       bad_tables[i].error);
		tt_remove(TT_NAME);
	}
	tt_remove("lt-tiny");
}

TEST(table_is_printed_back_unchanged)
{
	/* Given with paths; printed back with devices as major:minor. */
	static const char *const tables[] = {
		"0 2097152 track %s 0 8",
		"0 2097152 track %s 0 -",
		"0 1048576 track %s 2048 128 1 clean",
		"0 2097152 track %s 0 8 4 metadata %s region_size 16384",
	};
	char table[512];
	char out[512], want[600];
	unsigned int i;
	FILE *f;

	TT_REQUIRE_TARGET();
	for (i = 0; i < ARRAY_SIZE(tables); i++) {
		tt_remove(TT_NAME);
		ASSERT_EQ(0, vm_run("/sbin/blkdiscard -z " VM_DISK_D));
		snprintf(table, sizeof(table), tables[i], VM_DISK_B, VM_DISK_D);
		ASSERT_EQ(0, vm_run("echo '%s' | dmsetup create --noudevsync "
				    TT_NAME, table));
		f = popen("dmsetup table " TT_NAME, "r");
		ASSERT_NE(NULL, f);
		ASSERT_NE(NULL, fgets(out, sizeof(out), f));
		pclose(f);
		snprintf(table, sizeof(table), tables[i], vm_devno(VM_DISK_B),
			 vm_devno(VM_DISK_D));
		snprintf(want, sizeof(want), "%s\n", table);
		EXPECT_STREQ(want, out);
	}
	tt_remove(TT_NAME);
}

TEST(netlink_dump_needs_cap_sys_admin)
{
	struct track_dm_params p = { .data_dev = VM_DISK_B, .length = 8192 };
	struct tt_extents x = { 0 };
	struct track_dm *dm;
	int status, r;
	pid_t pid;

	TT_REQUIRE_TARGET();
	tt_remove(TT_NAME);
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
	ASSERT_EQ(0, track_dm_open(TT_NAME, &dm));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(100);
		r = track_dm_for_each_extent(dm, TRACK_DM_ACTIVE, tt_collect, &x);
		_exit(r == -EPERM ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("an unprivileged dump was not refused with EPERM");
	/* And root still can. */
	EXPECT_EQ(0, track_dm_for_each_extent(dm, TRACK_DM_ACTIVE, tt_collect, &x));
	EXPECT_EQ(1024, tt_blocks(&x));
	track_dm_free(dm);
	tt_remove(TT_NAME);
	free(x.e);
}

TEST(messages_are_checked)
{
	struct track_dm_params p = { .data_dev = VM_DISK_B, .length = 8192 };

	TT_REQUIRE_TARGET();
	tt_remove(TT_NAME);
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
	vm_kmsg_mark("messages");
	EXPECT_NE(0, tt_message(TT_NAME, "frobnicate"));
	EXPECT_TRUE(vm_kmsg_has("messages", "unsupported message 'frobnicate'"));
	EXPECT_NE(0, tt_message(TT_NAME, "commit notanumber"));
	EXPECT_TRUE(vm_kmsg_has("messages", "invalid epoch 'notanumber'"));
	EXPECT_NE(0, tt_message(TT_NAME, "checkpoint"));
	EXPECT_TRUE(vm_kmsg_has("messages", "checkpoint: no metadata device"));
	EXPECT_EQ(0, tt_message(TT_NAME, "FREEZE"));
	tt_remove(TT_NAME);
}

TEST(dmtrack_create_sets_the_region_size)
{
	char out[512];
	FILE *f;

	TT_REQUIRE_TARGET();
	tt_remove(TT_NAME);
	ASSERT_EQ(0, vm_run("/sbin/blkdiscard -z " VM_DISK_D));
	ASSERT_EQ(0, vm_run("dmtrack create " TT_NAME " " VM_DISK_B
			    " --length 2097152 --metadata " VM_DISK_D
			    " --region-size 65536 --clean"));
	f = popen("dmsetup table " TT_NAME, "r");
	ASSERT_NE(NULL, f);
	ASSERT_NE(NULL, fgets(out, sizeof(out), f));
	pclose(f);
	tt_remove(TT_NAME);
	EXPECT_NE(NULL, strstr(out, " region_size 128"))
		TH_LOG("table: %s", out);
}

TEST_HARNESS_MAIN
