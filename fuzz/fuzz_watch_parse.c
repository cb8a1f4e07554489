// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libFuzzer target: track_watch_parse() on any buffer, walked record by
 * record as a reader of the inotify descriptor walks what read(2) gave it.
 *
 * What must hold: no crash, no sanitizer report; a record is refused with
 * -EMSGSIZE or -EBADMSG, or it lies inside the buffer with its name (NUL
 * terminated, name_len long) inside the record and, for IN_RANGE, a range
 * that does not wrap.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>

#include <libtrack.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (off < size) {
		struct track_inotify_event ev;
		const char *rec = (const char *)data + off;
		int r = track_watch_parse(rec, size - off, &ev);

		if (r == -EMSGSIZE || r == -EBADMSG)
			break;
		if (r < (int)sizeof(struct inotify_event) ||
		    (size_t)r > size - off)
			abort();
		if (ev.name_len) {
			if (ev.name < rec + sizeof(struct inotify_event) ||
			    ev.name + ev.name_len >= rec + r ||
			    ev.name[ev.name_len] != '\0' ||
			    strlen(ev.name) != ev.name_len)
				abort();
		} else if (ev.name[0] != '\0') {
			abort();
		}
		if ((ev.mask & IN_RANGE) && ev.offset + ev.length < ev.offset)
			abort();
		off += (size_t)r;
	}
	return 0;
}
