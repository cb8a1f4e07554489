// SPDX-License-Identifier: LGPL-2.1-or-later
/* The version API: what a client checks before it relies on libtrack. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <libtrack.h>

static void running_library_matches_headers(void **state)
{
	assert_int_equal(track_version_major(), LIBTRACK_VERSION_MAJOR);
	assert_int_equal(track_version_minor(), LIBTRACK_VERSION_MINOR);
	assert_true(track_check_version(LIBTRACK_VERSION_MAJOR,
					LIBTRACK_VERSION_MINOR));
}

static void older_minor_is_served(void **state)
{
	assert_true(track_check_version(LIBTRACK_VERSION_MAJOR, 0));
}

static void newer_minor_is_refused(void **state)
{
	assert_false(track_check_version(LIBTRACK_VERSION_MAJOR,
					 LIBTRACK_VERSION_MINOR + 1));
}

static void other_major_is_refused(void **state)
{
	assert_false(track_check_version(LIBTRACK_VERSION_MAJOR + 1, 0));
	assert_false(track_check_version(LIBTRACK_VERSION_MAJOR - 1,
					 LIBTRACK_VERSION_MINOR));
}

static void compile_time_check_agrees(void **state)
{
	assert_true(LIBTRACK_CHECK_VERSION(LIBTRACK_VERSION_MAJOR,
					   LIBTRACK_VERSION_MINOR));
	assert_false(LIBTRACK_CHECK_VERSION(LIBTRACK_VERSION_MAJOR + 1, 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(running_library_matches_headers),
		cmocka_unit_test(older_minor_is_served),
		cmocka_unit_test(newer_minor_is_refused),
		cmocka_unit_test(other_major_is_refused),
		cmocka_unit_test(compile_time_check_agrees),
	};

	return cmocka_run_group_tests_name("version", tests, NULL, NULL);
}
