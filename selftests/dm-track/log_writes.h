/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Replay a dm-log-writes log the way a power cut would leave the device.
 *
 * dm-log-writes (Documentation/admin-guide/device-mapper/log-writes.rst)
 * logs a write only once a flush has covered it (FUA writes at once), and a
 * "mark" message where it was sent. Replaying the log up to a mark
 * therefore gives the device as it is after a power loss at that moment:
 * every write a flush made durable, and none of those still sitting in a
 * volatile cache. That is what xfstests' log-writes tests check file
 * systems against, and what a QEMU disk with cache=writeback can never
 * lose.
 */
#ifndef LT_LOG_WRITES_H
#define LT_LOG_WRITES_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <endian.h>

#define LW_MAGIC	0x6a736677736872ULL
#define LW_FLUSH	(1 << 0)
#define LW_FUA		(1 << 1)
#define LW_DISCARD	(1 << 2)
#define LW_MARK		(1 << 3)

struct lw_super {
	uint64_t magic;
	uint64_t version;
	uint64_t nr_entries;
	uint32_t sectorsize;
} __attribute__((packed));

struct lw_entry {
	uint64_t sector;
	uint64_t nr_sectors;
	uint64_t flags;
	uint64_t data_len;
} __attribute__((packed));

/* What a replay saw; for messages. */
struct lw_stats {
	uint64_t writes, flushes, discards;
	int found;			/* the mark was reached */
};

/*
 * Write the entries of LOG onto DEV (which must hold the content the
 * logged device had when logging started), up to the mark named MARK.
 * Returns 0 or -errno; st->found says whether the mark was there.
 */
static inline int lw_replay(const char *log, const char *dev,
			    const char *mark, struct lw_stats *st)
{
	char *sec = NULL, *data = NULL;
	struct lw_super sb;
	uint64_t i, pos, ss;
	int lfd, dfd, r = 0;

	memset(st, 0, sizeof(*st));
	lfd = open(log, O_RDONLY);
	dfd = open(dev, O_WRONLY);
	if (lfd < 0 || dfd < 0) {
		r = -errno;
		goto out;
	}
	if (pread(lfd, &sb, sizeof(sb), 0) != sizeof(sb)) {
		r = -EIO;
		goto out;
	}
	ss = le32toh(sb.sectorsize);
	if (le64toh(sb.magic) != LW_MAGIC || ss < 512 || ss > 65536 ||
	    (ss & (ss - 1))) {
		r = -EINVAL;
		goto out;
	}
	sec = malloc(ss);
	if (!sec) {
		r = -ENOMEM;
		goto out;
	}
	pos = ss;
	for (i = 0; i < le64toh(sb.nr_entries); i++) {
		struct lw_entry e;
		uint64_t flags, len;

		if (pread(lfd, sec, ss, pos) != (ssize_t)ss) {
			r = -EIO;
			goto out;
		}
		memcpy(&e, sec, sizeof(e));
		flags = le64toh(e.flags);
		pos += ss;
		if (flags & LW_MARK) {
			len = le64toh(e.data_len);
			if (len == strlen(mark) && len <= ss - sizeof(e) &&
			    !memcmp(sec + sizeof(e), mark, len)) {
				st->found = 1;
				break;
			}
			continue;
		}
		len = le64toh(e.nr_sectors) * ss;
		if (flags & LW_FLUSH)
			st->flushes++;
		if (!len)
			continue;
		data = realloc(data, len);
		if (!data) {
			r = -ENOMEM;
			goto out;
		}
		if (flags & LW_DISCARD) {
			/* What a discarded block reads back as is undefined. */
			memset(data, 0, len);
			st->discards++;
		} else {
			if (pread(lfd, data, len, pos) != (ssize_t)len) {
				r = -EIO;
				goto out;
			}
			pos += len;
			st->writes++;
		}
		if (pwrite(dfd, data, len, le64toh(e.sector) * ss) !=
		    (ssize_t)len) {
			r = -EIO;
			goto out;
		}
	}
	if (fsync(dfd))
		r = -errno;
out:
	free(sec);
	free(data);
	if (lfd >= 0)
		close(lfd);
	if (dfd >= 0)
		close(dfd);
	return r;
}

#endif /* LT_LOG_WRITES_H */
