// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libFuzzer target: the parser of dm-track's status line (the line
 * track_dm_get_status() gets from the kernel) on any string.
 *
 * What must hold: no crash, no sanitizer report; a line is refused with
 * -EPROTO, or it has 10, 13 or 15 fields (dm-track.rst) of under 64 bytes
 * each and gives a status that could be true: a block size that is a
 * power of two from 512 bytes to 32 MiB, no more dirty blocks than
 * blocks, a NUL-terminated id.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The fields of LINE as the kernel separates them, -1 if one is 64 or longer. */
static int count_fields(const char *line)
{
	int n = 0;

	while (*line) {
		size_t len;

		line += strspn(line, " \t\n\v\f\r");
		len = strcspn(line, " \t\n\v\f\r");
		if (!len)
			break;
		if (len >= 64)
			return -1;
		n++;
		line += len;
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct track_dm_status st;
	char *line = malloc(size + 1);
	int r, n;

	if (!line)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	r = trk_dm_parse_status(line, &st);
	if (r && r != -EPROTO)
		abort();
	if (!r) {
		n = count_fields(line);
		if (n != 10 && n != 13 && n != 15)
			abort();
		if (st.block_size < 512 || st.block_size > (32U << 20) ||
		    (st.block_size & (st.block_size - 1)))
			abort();
		if (st.dirty_active > st.nr_blocks ||
		    st.dirty_frozen > st.nr_blocks)
			abort();
		if (!memchr(st.track_id, '\0', sizeof(st.track_id)))
			abort();
	}
	free(line);
	return 0;
}
