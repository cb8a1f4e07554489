/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The extraction engine shared by dmextract and dmsync: given a source
 * (a block device or a file) and runs of blocks in ascending order, read
 * exactly those blocks and write them as a stream.
 *
 * Reads are coalesced into windows of up to 4 MiB (bridging gaps of up to
 * 64 KiB, cheaper to read through than to seek over), use O_DIRECT so the
 * page cache keeps what the workload put there (falling back to buffered
 * reads plus POSIX_FADV_DONTNEED where O_DIRECT is refused), and skip
 * holes of sparse files without reading them. The caller's thread reads;
 * a second thread checksums, compresses and writes, so disk and network
 * work at the same time.
 */
#ifndef DSYNC_EXTRACT_H
#define DSYNC_EXTRACT_H

#include <stdbool.h>
#include <stdint.h>

#include <libtrack/stream.h>

#include "dsync_util.h"

struct ds_source {
	int fd;
	const char *path;
	uint64_t size;		/* bytes */
	uint32_t bs;
	uint64_t nr_blocks;
	bool regular;		/* a regular file: holes can be found */
	bool direct;		/* opened with O_DIRECT */
};

/* Open PATH for reading with block size BS. MSG says what went wrong. */
int ds_source_open(struct ds_source *s, const char *path, uint32_t bs,
		   char *msg, size_t msglen);
void ds_source_close(struct ds_source *s);

struct ds_extract;

/* A track_stream_write_fn writing to the descriptor (intptr_t)ARG with
 * ds_write_all(): a signal that sets ds_stop makes it fail. */
ssize_t ds_write_cb(void *arg, const void *buf, size_t len);

/*
 * Start extracting from SRC into the stream writer W (which the engine's
 * thread uses from now on until ds_extract_finish()). PROGRESS, if not
 * NULL, is updated with bytes of blocks done.
 */
int ds_extract_start(struct ds_extract **xp, struct ds_source *src,
		     struct track_stream_writer *w,
		     struct ds_progress *progress);

/* Queue blocks FIRST .. FIRST + COUNT - 1 (ascending across calls). */
int ds_extract_run(struct ds_extract *x, uint64_t first, uint64_t count);

/*
 * Wait for the writing thread, then (if everything worked) finish the
 * stream. Returns the first error of either thread. T gets the totals.
 */
int ds_extract_finish(struct ds_extract *x, bool ok,
		      struct track_stream_totals *t);

/* What failed, e.g. "reading /dev/sdb at byte 4096: Input/output error". */
const char *ds_extract_error(const struct ds_extract *x);

void ds_extract_free(struct ds_extract *x);

#endif /* DSYNC_EXTRACT_H */
