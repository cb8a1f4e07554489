/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The flow shared by dmextract and dmsync: options, the frozen epoch of a
 * dm-track device, and running an extraction into a descriptor.
 */
#ifndef DSYNC_DM_H
#define DSYNC_DM_H

#include <stdbool.h>
#include <stdint.h>

#include <libtrack.h>
#include <libtrack/dm.h>

#include "dsync_util.h"

/* Snapshot mode: read the frozen image through a track-view device. */
enum ds_snapshot {
	DS_SNAP_OFF,		/* read the live device */
	DS_SNAP_ON,		/* --snapshot: fail if the kernel cannot */
	DS_SNAP_AUTO,		/* where the kernel's dm-track can */
};

struct ds_opts {
	const char *name;	/* dm-track device */
	const char *device;	/* --device PATH */
	const char *dirty;	/* --dirty FILE */
	const char *source_id;
	const char *output;	/* dmextract -o */
	uint32_t block_size;
	uint64_t base_epoch;
	uint64_t new_epoch;
	int level;		/* 0 = no compression */
	bool all;
	bool no_commit;
	bool verbose;
	enum ds_progress_mode progress;
	enum ds_snapshot snapshot;
	uint64_t snapshot_limit;	/* 0: the kernel's default */
	const char *fsfreeze;	/* --fsfreeze MOUNTPOINT, or NULL */
};

/* A frozen epoch of a dm-track device. */
struct ds_epoch {
	struct track_dm *dm;	/* NULL: nothing frozen */
	int lock_fd;		/* flock()ed: one extraction at a time */
	char name[128];		/* dm name */
	char path[4096];	/* the device node to read */
	uint64_t epoch;		/* the frozen epoch */
	uint64_t base;		/* committed epoch when it was frozen */
	uint32_t block_size;
	uint64_t nr_blocks;
	uint64_t dirty_blocks;	/* in the frozen set */
	char source_id[TRACK_STREAM_ID_MAX + 1];
	char view[128];		/* the track-view device read, or "" */
};

/* --snapshot[=LIMIT] into O; -EINVAL for a bad limit. */
int ds_parse_snapshot(const char *arg, struct ds_opts *o);

/* Is NAME a dm-track device we can drive? (Nothing is changed.) */
int ds_dm_probe(const char *name, char *msg, size_t msglen);

/* Open dm-track device NAME and freeze its active set. */
int ds_epoch_freeze(const char *name, struct ds_epoch *e, char *msg,
		    size_t msglen);
/*
 * The same, in snapshot mode MODE: PATH is then a track-view device. With
 * FSFREEZE (a mount point, or NULL) the file system there is frozen for
 * the freeze message only, and always thawed.
 */
int ds_epoch_freeze_mode(const char *name, struct ds_epoch *e,
			 enum ds_snapshot mode, uint64_t limit,
			 const char *fsfreeze, char *msg,
			 size_t msglen);
/* After a failed copy: say so if it was the snapshot that failed. */
void ds_epoch_explain(struct ds_epoch *e);
/* Call FN for each run of the frozen set. */
int ds_epoch_for_each(struct ds_epoch *e,
		      int (*fn)(uint64_t first, uint64_t count, void *arg),
		      void *arg, char *msg, size_t msglen);
/* Commit (the replica has the blocks) or abort (they stay dirty), and
 * close. Both print their own messages. */
int ds_epoch_commit(struct ds_epoch *e);
int ds_epoch_abort(struct ds_epoch *e);
void ds_epoch_close(struct ds_epoch *e);

/*
 * Extract what O asks for as a stream into OUT. With a dm-track device the
 * epoch is frozen into *EP and left frozen for the caller to commit or
 * abort (also on failure: EP->dm is then set if the freeze happened).
 * Prints its own messages; returns 0 or a negative errno value.
 */
int ds_run_extract(const struct ds_opts *o, int out, struct ds_epoch *ep,
		   struct track_stream_totals *t);

/* "dmextract: 12 data blocks (48.0 KiB), ..." */
void ds_print_totals(const struct track_stream_totals *t, double secs);

#endif /* DSYNC_DM_H */
