/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * track_dm_*: drive a dm-track device (the kernel target "track").
 *
 * Messages go through libdevmapper, dirty extents come over generic netlink
 * (libmnl). All of it needs CAP_SYS_ADMIN. These functions live in their
 * own library: link with `pkg-config --libs libtrack-dm`.
 */
#ifndef LIBTRACK_DM_H
#define LIBTRACK_DM_H

#include <stdint.h>

#include <libtrack/extents.h>	/* track_extent_fn */

#ifdef __cplusplus
extern "C" {
#endif

struct track_dm;

/* Which dirty set to read. */
enum track_dm_set {
	TRACK_DM_ACTIVE = 0,	/* blocks written in the current epoch */
	TRACK_DM_FROZEN = 1,	/* blocks of the frozen epoch, being synced */
};

/* Persistence state of a device, from its status line. */
enum track_dm_persist {
	TRACK_DM_PERSIST_NONE = 0,	/* no metadata device: memory only */
	TRACK_DM_PERSIST_OK = 1,	/* metadata device in use */
	TRACK_DM_PERSIST_FAILED = 2,	/* metadata I/O failed; see the kernel log */
};

struct track_dm_status {
	uint64_t block_size;	/* bytes per tracked block */
	uint64_t nr_blocks;	/* blocks in the device */
	uint64_t dirty_active;	/* dirty blocks in the active set */
	uint64_t dirty_frozen;	/* dirty blocks in the frozen set */
	uint64_t epoch;		/* the active epoch */
	uint64_t frozen_epoch;	/* epoch of the frozen set, 0 if none */
	uint64_t committed_epoch; /* the last committed epoch, 0 if none */
	uint64_t mem_bytes;	/* memory the sets use */
	enum track_dm_persist persist;
	char track_id[40];	/* stable id of the tracking state (hex) */
	uint32_t snapshot;	/* enum track_dm_snapshot (since 2.1) */
	uint64_t snap_bytes;	/* data preserved for the snapshot */
	uint64_t snap_limit;	/* its limit in bytes, in memory */
	uint64_t snap_cow_bytes; /* of snap_bytes, on the COW device */
	uint64_t snap_cow_size;	/* the COW device's bytes, 0: none */
	uint64_t reserved[4];	/* zero; later versions may fill these */
};

/* The frozen epoch's snapshot (track_dm_freeze_snapshot()). */
enum track_dm_snapshot {
	TRACK_DM_SNAP_NONE = 0,		/* not frozen in snapshot mode */
	TRACK_DM_SNAP_ACTIVE = 1,	/* the view reads the frozen image */
	TRACK_DM_SNAP_FAILED = 2,	/* it did not hold: abort the epoch */
};

/* What track_dm_create() puts into the table line. */
struct track_dm_params {
	const char *data_dev;	/* the device to track */
	uint64_t offset;	/* start on data_dev, in 512-byte sectors */
	uint64_t length;	/* length in sectors; 0 = to the end of data_dev */
	uint32_t block_size;	/* bytes, a power of two; 0 = 4096 */
	const char *metadata_dev; /* NULL = no persistence */
	int clean;		/* start with nothing dirty (replica identical) */
	const char *uuid;	/* dm uuid, or NULL */
	/* Bytes of write intent per region with metadata_dev, a power of
	 * two of at least block_size; 0 = the target's default. */
	uint64_t region_size;
	/* Snapshot mode keeps the preserved data past its memory limit on
	 * this device, or NULL (since 2.1; in a union with 8 bytes so that
	 * the struct keeps its layout on every ABI). */
	union {
		const char *cow_dev;
		uint64_t cow_dev_space;
	};
	/* Room to grow: must be zero (initialise the struct with { 0 } or
	 * designated initialisers); track_dm_create() refuses anything else
	 * with -EINVAL. */
	uint64_t reserved[6];
};

/* Create a dm-track device NAME and resume it. */
int track_dm_create(const char *name, const struct track_dm_params *p);

/* Remove the device NAME (it must not be open). */
int track_dm_remove(const char *name);

/*
 * Open the dm-track device with this dm name or uuid. Fails with -ENODEV if
 * no such device exists and -EMEDIUMTYPE if it is not a dm-track device.
 */
int track_dm_open(const char *name, struct track_dm **dmp);

/* Release a handle from track_dm_open(). */
void track_dm_free(struct track_dm *dm);

/* The dm name, dm uuid ("" if none) and /dev/mapper path of the device. */
const char *track_dm_name(const struct track_dm *dm);
const char *track_dm_uuid(const struct track_dm *dm);
const char *track_dm_path(const struct track_dm *dm);

/* Read the device's status line. */
int track_dm_get_status(struct track_dm *dm, struct track_dm_status *st);

/*
 * Atomically move the active set into a frozen epoch (ORed into an existing
 * frozen set that was never committed). *epoch receives the frozen epoch.
 */
int track_dm_freeze(struct track_dm *dm, uint64_t *epoch);

/*
 * Freeze in snapshot mode (since 2.1): until the epoch is committed or
 * aborted, a track-view device (track_dm_view_create()) reads every frozen
 * block as it was at the freeze, preserving at most LIMIT bytes of
 * overwritten data (0: the target's default). -EOPNOTSUPP if the kernel's
 * dm-track has no snapshot mode.
 */
int track_dm_freeze_snapshot(struct track_dm *dm, uint64_t limit,
			     uint64_t *epoch);

/*
 * Create the read-only track-view device NAME over DM (since 2.1); its
 * node is /dev/mapper/NAME. Create it before freezing; remove it with
 * track_dm_remove().
 */
int track_dm_view_create(struct track_dm *dm, const char *name);

/* Called with the name of each view; non-zero stops the walk. */
typedef int (*track_dm_view_fn)(const char *name, void *arg);

/*
 * Call FN with the dm name of each track-view device over DM (since 2.1),
 * whatever its name: each device whose live table is one track-view
 * target naming DM's device. FN may remove the view it is given. A
 * non-zero return from FN stops the walk and is returned.
 */
int track_dm_for_each_view(struct track_dm *dm, track_dm_view_fn fn,
			   void *arg);

/*
 * Remove NAME if it is a track-view device over DM and nothing has it
 * open (since 2.1); never another device. -ENODEV if there is no NAME,
 * -EMEDIUMTYPE if it is not a view, -EXDEV if it is a view of another
 * device, -EBUSY if it is open.
 */
int track_dm_view_remove(struct track_dm *dm, const char *name);

/* Drop the frozen set after the replica confirmed it; -ESTALE if EPOCH
 * is not the frozen epoch. */
int track_dm_commit(struct track_dm *dm, uint64_t epoch);

/* OR the frozen set back into the active one; -ESTALE as above. */
int track_dm_abort(struct track_dm *dm, uint64_t epoch);

/* Forget every dirty block, or mark every block dirty. */
int track_dm_clear(struct track_dm *dm);
int track_dm_mark_all(struct track_dm *dm);

/*
 * Call FN for each run of dirty blocks of SET, in block order. A non-zero
 * return from FN stops the walk and is returned.
 */
int track_dm_for_each_extent(struct track_dm *dm, enum track_dm_set set,
			     track_extent_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* LIBTRACK_DM_H */
