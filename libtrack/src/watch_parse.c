// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The inotify record parser: pure, no system calls, so every odd buffer the
 * kernel (or a bug) could hand us is unit-tested.
 *
 * Plain format:   struct inotify_event, then len bytes of NUL-padded name.
 * Range format:   the same, but when mask has IN_RANGE the last 16 bytes of
 *                 len are { __u64 offset; __u64 length; } in host byte
 *                 order; the name area before them is NUL-padded (16 NUL
 *                 bytes for an event without a name).
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "internal.h"

TRACK_EXPORT int track_watch_parse(const void *buf, size_t len,
				   struct track_inotify_event *ev)
{
	const unsigned char *p = buf;
	struct inotify_event hdr;
	size_t total, name_area;
	const char *name;

	if (len == 0)
		return 0;
	if (len < sizeof(hdr))
		return -EMSGSIZE;
	memcpy(&hdr, p, sizeof(hdr));
	total = sizeof(hdr) + (size_t)hdr.len;
	if (hdr.len > INT_MAX - sizeof(hdr))
		return -EBADMSG;
	if (total > len)
		return -EMSGSIZE;

	memset(ev, 0, sizeof(*ev));
	ev->wd = hdr.wd;
	ev->mask = hdr.mask;
	ev->cookie = hdr.cookie;
	name = (const char *)p + sizeof(hdr);
	name_area = hdr.len;

	if (hdr.mask & IN_RANGE) {
		uint64_t range[2];

		if (hdr.len < TRACK_INOTIFY_RANGE_SIZE)
			return -EBADMSG;
		name_area -= TRACK_INOTIFY_RANGE_SIZE;
		memcpy(range, name + name_area, sizeof(range));
		if (range[0] + range[1] < range[0])
			return -EBADMSG;
		ev->offset = range[0];
		ev->length = range[1];
	}

	if (name_area == 0) {
		ev->name = "";
		ev->name_len = 0;
	} else {
		const char *nul = memchr(name, '\0', name_area);

		if (!nul)
			return -EBADMSG;
		ev->name = name;
		ev->name_len = (size_t)(nul - name);
	}
	return (int)total;
}
