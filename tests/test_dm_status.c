// SPDX-License-Identifier: LGPL-2.1-or-later
/* The dm-track status line, as the kernel prints it, parses into its fields. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <errno.h>
#include <string.h>
#include <cmocka.h>

#include "internal.h"

static void idle_device_parses(void **state)
{
	struct track_dm_status st;

	assert_int_equal(0, trk_dm_parse_status(
		"8 262144 3 - 1 - 0 2099296 - 6b1f5e3c-3d4a-4c9e-9a63-2f5b3b3f8e10",
		&st));
	assert_int_equal(4096, st.block_size);
	assert_int_equal(262144, st.nr_blocks);
	assert_int_equal(3, st.dirty_active);
	assert_int_equal(0, st.dirty_frozen);
	assert_int_equal(1, st.epoch);
	assert_int_equal(0, st.frozen_epoch);
	assert_int_equal(0, st.committed_epoch);
	assert_int_equal(2099296, st.mem_bytes);
	assert_int_equal(TRACK_DM_PERSIST_NONE, st.persist);
	assert_string_equal("6b1f5e3c-3d4a-4c9e-9a63-2f5b3b3f8e10", st.track_id);
}

static void frozen_epoch_and_metadata_parse(void **state)
{
	struct track_dm_status st;

	assert_int_equal(0, trk_dm_parse_status(
		"1 8 0 8 18446744073709551615 18446744073709551614 17 100 ok id", &st));
	assert_int_equal(512, st.block_size);
	assert_int_equal(8, st.dirty_frozen);
	assert_true(st.epoch == UINT64_MAX);
	assert_true(st.frozen_epoch == UINT64_MAX - 1);
	assert_int_equal(17, st.committed_epoch);
	assert_int_equal(TRACK_DM_PERSIST_OK, st.persist);

	assert_int_equal(0, trk_dm_parse_status(
		"8 8 0 - 2 - 1 100 failed id", &st));
	assert_int_equal(TRACK_DM_PERSIST_FAILED, st.persist);
}

static void malformed_lines_are_refused(void **state)
{
	static const char *const bad[] = {
		"",
		"8 262144 3 - 1 - 0 2099296 -",		/* a field short */
		"8 262144 x - 1 - 0 2099296 - id",	/* not a number */
		"8 262144 3 - 1 - 0 -1x - id",
		"8 262144 3 - 99999999999999999999 - 0 1 - id", /* overflow */
		"Error",
		"8 1 1 - 1 - 0 1 - 0123456789012345678901234567890123456789",
		"0 8 0 - 1 - 0 1 - id",			/* no block size */
		"24 8 0 - 1 - 0 1 - id",		/* not a power of two */
		"131072 8 0 - 1 - 0 1 - id",		/* over 65536 sectors */
		"8 8 9 - 1 - 0 1 - id",			/* dirtier than big */
		"8 8 0 9 1 2 0 1 - id",
		"8 8 0 - 1 - 0 1 - id active",		/* 11 fields */
		"8 8 0 - 1 - 0 1 - id active 1 2 3",	/* 14 fields */
		"8 8 0 - 1 - 0 1 - id - - - 1 2 3",	/* 16 fields */
		/* a field of 64 bytes, which a %63s would read as two */
		"8 8 0 - 1 - 0 1 - id - - "
		"1000000000000000000000000000000000000000000000000000000000000000",
	};
	struct track_dm_status st;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(-EPROTO, trk_dm_parse_status(bad[i], &st));
}

/* Snapshot mode adds three fields; a line without them has no snapshot. */
static void snapshot_fields_parse(void **state)
{
	struct track_dm_status st;

	assert_int_equal(0, trk_dm_parse_status(
		"8 1024 0 512 3 2 1 900 - id active 65536 16777216", &st));
	assert_int_equal(TRACK_DM_SNAP_ACTIVE, st.snapshot);
	assert_int_equal(65536, st.snap_bytes);
	assert_int_equal(16777216, st.snap_limit);
	assert_int_equal(0, trk_dm_parse_status(
		"8 1024 0 512 3 2 1 900 - id failed - -", &st));
	assert_int_equal(TRACK_DM_SNAP_FAILED, st.snapshot);
	assert_int_equal(0, trk_dm_parse_status(
		"8 1024 0 - 3 - 1 900 - id - - -", &st));
	assert_int_equal(TRACK_DM_SNAP_NONE, st.snapshot);
	assert_int_equal(0, trk_dm_parse_status(
		"8 1024 0 - 3 - 1 900 - id", &st));
	assert_int_equal(TRACK_DM_SNAP_NONE, st.snapshot);
	assert_int_equal(-EPROTO, trk_dm_parse_status(
		"8 1024 0 - 3 - 1 900 - id maybe 1 2", &st));
	assert_int_equal(-EPROTO, trk_dm_parse_status(
		"8 1024 0 - 3 - 1 900 - id active x 2", &st));
}

/* dm-track 1.1 adds the COW device's share and size; "-" without one. */
static void cow_fields_parse(void **state)
{
	struct track_dm_status st;

	assert_int_equal(0, trk_dm_parse_status(
		"8 1024 0 512 3 2 1 900 - id active 2097152 65536 2031616 4194304",
		&st));
	assert_int_equal(TRACK_DM_SNAP_ACTIVE, st.snapshot);
	assert_int_equal(2097152, st.snap_bytes);
	assert_int_equal(65536, st.snap_limit);
	assert_int_equal(2031616, st.snap_cow_bytes);
	assert_int_equal(4194304, st.snap_cow_size);
	assert_int_equal(0, trk_dm_parse_status(
		"8 1024 0 512 3 2 1 900 - id active 4096 65536 - -", &st));
	assert_int_equal(0, st.snap_cow_bytes);
	assert_int_equal(0, st.snap_cow_size);
	assert_int_equal(0, trk_dm_parse_status(
		"8 1024 0 - 3 - 1 900 - id - - - - -", &st));
	assert_int_equal(TRACK_DM_SNAP_NONE, st.snapshot);
	/* One COW field without the other is not a line dm-track writes. */
	assert_int_equal(-EPROTO, trk_dm_parse_status(
		"8 1024 0 512 3 2 1 900 - id active 4096 65536 4096", &st));
	assert_int_equal(-EPROTO, trk_dm_parse_status(
		"8 1024 0 512 3 2 1 900 - id active 4096 65536 x 4096", &st));
}

/* Reserved space is for later versions: not zero, not accepted. */
static void create_refuses_nonzero_reserved_fields(void **state)
{
	struct track_dm_params p = { .data_dev = "/dev/null" };

	p.reserved[5] = 1;
	assert_int_equal(track_dm_create("libtrack-test", &p), -EINVAL);
	/* An empty COW device name is not a device. */
	p.reserved[5] = 0;
	p.cow_dev = "";
	assert_int_equal(track_dm_create("libtrack-test", &p), -EINVAL);
	assert_int_equal(track_dm_create("libtrack-test", NULL), -EINVAL);
}

/* A region size needs a metadata device and must be a power of two. */
static void create_refuses_a_bad_region_size(void **state)
{
	struct track_dm_params p = { .data_dev = "/dev/null", .length = 8,
				     .region_size = 65536 };

	assert_int_equal(track_dm_create("libtrack-test", &p), -EINVAL);
	p.metadata_dev = "/dev/null";
	p.region_size = 65536 + 512;
	assert_int_equal(track_dm_create("libtrack-test", &p), -EINVAL);
	p.region_size = 2048;	/* less than the 4 KiB block */
	assert_int_equal(track_dm_create("libtrack-test", &p), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(idle_device_parses),
		cmocka_unit_test(frozen_epoch_and_metadata_parse),
		cmocka_unit_test(malformed_lines_are_refused),
		cmocka_unit_test(snapshot_fields_parse),
		cmocka_unit_test(cow_fields_parse),
		cmocka_unit_test(create_refuses_nonzero_reserved_fields),
		cmocka_unit_test(create_refuses_a_bad_region_size),
	};

	return cmocka_run_group_tests_name("dm status", tests, NULL, NULL);
}
