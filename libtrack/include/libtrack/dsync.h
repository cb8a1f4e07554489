/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The dsync engine: what dmextract and dmmerge do, for a program that
 * embeds it (a backup server, a receiver on a socket).
 *
 * track_extract_*: read given runs of blocks of a device or file and write
 * them as a stream (see <libtrack/stream.h>). Reads are gathered into
 * windows of up to 4 MiB and 256 extents, use O_DIRECT where the file
 * system allows it (all of a window's extents in flight at once, with
 * Linux AIO), and skip holes of sparse files; a second thread, started
 * by track_extract_start(), checksums, compresses and writes.
 *
 * track_apply_*: apply a stream to a device or file: nothing is written
 * before the header matched the target (and the state file's epoch, and
 * the replica's fingerprint), every record is checked before it is
 * written, writes never leave the target; with an undo file the old
 * contents are saved and synced before each batch, so an interrupted
 * apply can be rolled back.
 *
 * Neither prints: an extraction keeps its message (track_extract_error()),
 * an apply hands each message to the caller's log function.
 */
#ifndef LIBTRACK_DSYNC_H
#define LIBTRACK_DSYNC_H

#include <stdint.h>

#include <libtrack/stream.h>

#ifdef __cplusplus
extern "C" {
#endif

/* --- extraction ---------------------------------------------------------- */

struct track_extract;

/*
 * Progress of an extraction: BYTES of the requested blocks written so
 * far; FINAL is 1 on the last call. A non-zero return (a negative errno
 * value) stops the extraction with that error (the return of the final
 * call is ignored). Called in the caller's thread.
 */
typedef int (*track_extract_progress_fn)(void *arg, uint64_t bytes,
					 int final);

/*
 * Open PATH (a block device or a regular file) for reading in blocks of
 * BLOCK_SIZE bytes (the last block may be short). On failure *XP is still
 * set when the handle could be allocated, so that track_extract_error()
 * can say what went wrong; free it in any case.
 */
int track_extract_new(const char *path, uint32_t block_size,
		      struct track_extract **xp);

/* Size of the source in bytes, and in blocks. */
uint64_t track_extract_size(const struct track_extract *x);
uint64_t track_extract_block_count(const struct track_extract *x);

/* FN (NULL: none) is told the progress; call before track_extract_start(). */
int track_extract_set_progress(struct track_extract *x,
			       track_extract_progress_fn fn, void *arg);

/*
 * Start the writing thread: from now on until track_extract_finish() or
 * track_extract_abort() it alone uses W (its write function is called in
 * that thread). The thread starts with the caller's signal mask.
 */
int track_extract_start(struct track_extract *x,
			struct track_stream_writer *w);

/* Queue blocks FIRST .. FIRST + COUNT - 1 (ascending across calls). */
int track_extract_add(struct track_extract *x, uint64_t first,
		      uint64_t count);

/*
 * Write what is queued, wait for the writing thread and finish the
 * stream; T (may be NULL) gets its totals. Returns the first error of
 * either thread.
 */
int track_extract_finish(struct track_extract *x,
			 struct track_stream_totals *t);

/*
 * Stop: drop what is queued and wait for the writing thread; the stream
 * is left without its end record. Returns the first error that happened
 * before, or -ECANCELED.
 */
int track_extract_abort(struct track_extract *x);

/* What failed, e.g. "reading /dev/sdb at byte 4096: Input/output error";
 * "" if nothing did. */
const char *track_extract_error(const struct track_extract *x);

/* Release an extraction (aborting it if it runs); NULL is ignored. */
void track_extract_free(struct track_extract *x);

/* --- applying ------------------------------------------------------------ */

struct track_apply;

/* track_apply_params.flags */
#define TRACK_APPLY_FORCE	0x1u	/* apply even if the checks refuse */
#define TRACK_APPLY_VERIFY	0x2u	/* read and check, write nothing */

/* A message for the user: what failed, what was overridden, what to do. */
typedef void (*track_apply_log_fn)(void *arg, const char *msg);

/*
 * Progress of an apply: STREAM_BYTES of the stream read and BLOCK_BYTES
 * of blocks applied (or checked) so far; FINAL is 1 once the whole stream
 * was read. A non-zero return (a negative errno value) stops the apply
 * with that error, as a failure half way would.
 */
typedef int (*track_apply_progress_fn)(void *arg, uint64_t stream_bytes,
				       uint64_t block_bytes, int final);

struct track_apply_params {
	uint32_t flags;		/* TRACK_APPLY_* */
	uint32_t reserved0;
	const char *target;	/* device or file; NULL only to verify */
	const char *state_path;	/* NULL: no state file */
	const char *undo_path;	/* NULL: no undo file */
	track_apply_log_fn log;	/* NULL: messages are dropped */
	void *log_arg;
	track_apply_progress_fn progress;
	void *progress_arg;
	/* Room to grow: must be zero (track_apply_params_init() does it). */
	uint64_t reserved[8];
};

/* Zero P: no target, no state or undo file, no callbacks. */
void track_apply_params_init(struct track_apply_params *p);

/* Create an apply. P and the strings it points to must stay valid. */
int track_apply_new(const struct track_apply_params *p,
		    struct track_apply **ap);

/*
 * Apply the stream read through FN (see track_stream_read_fn; NAME names
 * it in messages, e.g. "stdin"). 0 once the target holds it and is synced
 * (and the state file names its epoch).
 */
int track_apply_run(struct track_apply *a, track_stream_read_fn fn,
		    void *arg, const char *name);

/* Write the old contents saved in the undo file UNDO_PATH back. */
int track_apply_rollback(struct track_apply *a, const char *undo_path);

/*
 * The header of the stream (or undo file) and its totals so far; RUNS
 * gets the runs written to the target. -ENODATA before a header was read.
 */
int track_apply_get_info(const struct track_apply *a,
			 struct track_stream_info *info,
			 struct track_stream_totals *t, uint64_t *runs);

/* Release an apply; NULL is ignored. */
void track_apply_free(struct track_apply *a);

#ifdef __cplusplus
}
#endif

#endif /* LIBTRACK_DSYNC_H */
