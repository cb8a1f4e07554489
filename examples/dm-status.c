// SPDX-License-Identifier: MIT
/*
 * A minimal libtrack client: prints the library version and, given the
 * name of a dm-track device, how much of it is dirty.
 *
 *   cc -o dm-status dm-status.c $(pkg-config --cflags --libs libtrack-dm)
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <libtrack.h>
#include <libtrack/dm.h>

int main(int argc, char **argv)
{
	struct track_dm_status st;
	struct track_dm *dm;
	int r;

	if (!track_check_version(LIBTRACK_VERSION_MAJOR, LIBTRACK_VERSION_MINOR)) {
		fprintf(stderr, "libtrack %d.%d is older than the headers\n",
			track_version_major(), track_version_minor());
		return 1;
	}
	printf("libtrack %d.%d\n", track_version_major(), track_version_minor());
	if (argc < 2)
		return 0;

	r = track_dm_open(argv[1], &dm);
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", argv[1], strerror(-r));
		return 1;
	}
	r = track_dm_get_status(dm, &st);
	if (r == 0)
		printf("%s: %" PRIu64 " of %" PRIu64 " blocks dirty, epoch %" PRIu64 "\n",
		       track_dm_path(dm), st.dirty_active, st.nr_blocks, st.epoch);
	track_dm_free(dm);
	return r < 0;
}
