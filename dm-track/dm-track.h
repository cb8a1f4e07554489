/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * dm-track: a device-mapper target that records which blocks were written.
 *
 * Shared between the parts of the module: the dirty sets (dm-track-bitset.c),
 * the target itself (dm-track-target.c), persistence (dm-track-metadata.c)
 * and the netlink interface (dm-track-netlink.c).
 */
#ifndef DM_TRACK_H
#define DM_TRACK_H

#include <linux/bio.h>
#include <linux/device-mapper.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/uuid.h>
#include <linux/workqueue.h>

#include "dm-track-compat.h"

#define DM_MSG_PREFIX "track"

/*
 *--------------------------------------------------------------
 * Dirty sets: a three-level bitmap. The top level has one pointer per
 * group of TRACK_MID_LEAVES leaves; a group is NULL (no block dirty),
 * TRACK_LEAF_FULL (every block dirty) or an array of leaf pointers
 * allocated on the first write to the group. A leaf of TRACK_LEAF_BITS
 * blocks is in turn NULL, TRACK_LEAF_FULL or a 256-byte bitmap. What is
 * allocated up front is 8 bytes per group: 64 KiB per set for a 16 TiB
 * device at 4 KiB blocks. Marking never sleeps and never fails: when a
 * group or leaf cannot be allocated, all of it is marked TRACK_LEAF_FULL.
 *--------------------------------------------------------------
 */
#define TRACK_LEAF_BYTES	256
#define TRACK_LEAF_BITS		(TRACK_LEAF_BYTES * BITS_PER_BYTE)
#define TRACK_LEAF_FULL		((unsigned long *)1UL)
#define TRACK_MID_LEAVES	64
#define TRACK_MID_FULL		((unsigned long **)1UL)

struct track_snap;

struct track_bitset {
	u64 nr_blocks;
	u64 nr_leaves;
	u64 nr_mids;
	unsigned long ***mids;
	atomic_long_t nr_pages;		/* allocated leaves */
	atomic_long_t nr_mid_pages;	/* allocated groups */
	/* As the active set: the snapshot its writes preserve data for. */
	struct track_snap __rcu *snap;
};

struct track_bitset *track_bitset_create(u64 nr_blocks, bool full);
void track_bitset_destroy(struct track_bitset *bs);
void track_bitset_mark(struct track_bitset *bs, u64 first, u64 last,
		       gfp_t gfp);
void track_bitset_merge(struct track_bitset *dst, struct track_bitset *src);
struct track_bitset *track_bitset_resize(struct track_bitset *bs,
					 u64 nr_blocks, bool dirty_new);
u64 track_bitset_weight(struct track_bitset *bs);
bool track_bitset_test(struct track_bitset *bs, u64 block);
u64 track_bitset_memory(struct track_bitset *bs);
bool track_bitset_next_run(struct track_bitset *bs, u64 pos, u64 *first,
			   u64 *count);
unsigned long *track_bitset_leaf(struct track_bitset *bs, u64 index);
u64 track_bitset_next_leaf(struct track_bitset *bs, u64 index);
int track_bitset_set_leaf(struct track_bitset *bs, u64 index,
			  const unsigned long *bits, bool full);

/*
 *--------------------------------------------------------------
 * Persistence (optional): the metadata device keeps the dirty set across a
 * clean shutdown, and a write-intent map of coarse regions so that after a
 * crash only the regions written since the last checkpoint come back dirty.
 *--------------------------------------------------------------
 */
struct track_metadata;

enum track_persist {
	TRACK_PERSIST_NONE,		/* no metadata device */
	TRACK_PERSIST_OK,
	TRACK_PERSIST_FAILING,		/* I/O failed; marking it invalid */
	TRACK_PERSIST_FAILED,		/* marked invalid on disk: memory only */
	/* Could not mark it invalid: writes that need a new intent bit fail. */
	TRACK_PERSIST_UNRECORDED,
};

/* Per-bio data: the blocks a write covers, marked again when it completes. */
struct track_bio {
	u64 first;
	u64 last;
	bool marked;
	bool counted;		/* in flight for a checkpoint generation */
	u8 gen;
	/* Preservations it waits for, plus one while it is being mapped. */
	atomic_t snap_waits;
};

/*
 *--------------------------------------------------------------
 * One track target.
 *--------------------------------------------------------------
 */
enum track_state {
	TRACK_NEW,			/* constructed, never resumed */
	TRACK_LIVE,			/* resumed */
	TRACK_SUSPENDED,
	TRACK_HANDED_OVER,		/* state moved to a reloaded table */
	TRACK_GONE,			/* destroyed; only the struct is left */
};

struct track_c {
	struct dm_target *ti;
	struct dm_dev *dev;
	sector_t start;
	unsigned int block_shift;	/* log2 of the block size in sectors */
	u64 nr_blocks;
	bool start_clean;

	/* The sets and epochs; the active set is marked under RCU. */
	struct mutex lock;
	struct track_bitset __rcu *active;
	struct track_bitset *frozen;
	u64 epoch;			/* the active epoch */
	u64 frozen_epoch;		/* 0: nothing frozen */
	u64 committed_epoch;
	/* Bumped by every message that changes a set: dumps restart. */
	u64 set_seq;
	uuid_t id;
	enum track_state state;

	/* Snapshot mode (dm-track-snap.c). */
	struct track_snap __rcu *snap;	/* of the frozen epoch, or NULL */
	u64 snap_epoch;			/* frozen with a snapshot, or 0 */
	u64 snap_seq;			/* snapshots taken */
	wait_queue_head_t snap_wait;	/* for the users of a snapshot */
	struct workqueue_struct *snap_wq;
	struct dm_io_client *snap_io;
	struct dm_dev *cow_dev;		/* preserved data past the limit */

	struct track_metadata *md;	/* NULL without a metadata device */
	struct dm_dev *md_dev;
	sector_t region_sectors;	/* write-intent granularity */

	/* Registry of all track targets, for netlink and table reloads. */
	struct list_head list;
	u64 serial;
	struct kref ref;		/* the target, and netlink readers */

	/* The table line as given, for STATUSTYPE_TABLE. */
	unsigned int argc;
	char **argv;
};

/* dm-track-target.c */
struct track_c *track_lookup_lock(const char *name, const char *uuid,
				  u64 serial);
void track_unlock(struct track_c *tc);
bool track_ready(struct track_c *tc);

void track_write_continue(struct track_c *tc, struct bio *bio,
			  struct track_bio *tb);
struct track_c *track_get_by_devt(dev_t devt);
void track_put(struct track_c *tc);

/* dm-track-snap.c */
#define TRACK_SNAP_DEFAULT_LIMIT	(64ULL << 20)
int track_snap_init(struct track_c *tc);
void track_snap_exit(struct track_c *tc);
struct track_snap *track_snap_create(struct track_c *tc, u64 limit);
void track_snap_start(struct track_c *tc, struct track_snap *snap);
void track_snap_drop(struct track_c *tc);
struct track_snap *track_snap_get(struct track_snap *snap,
				  struct track_bio *tb);
bool track_snap_defer(struct track_snap *snap, struct bio *bio,
		      struct track_bio *tb);
bool track_snap_usable(struct track_c *tc);
void track_snap_status(struct track_c *tc, char *result, unsigned int maxlen,
		       ssize_t *szp);
int track_view_register(void);
void track_view_unregister(void);

/* dm-track-metadata.c */
int track_metadata_open(struct track_c *tc, struct dm_dev *dev,
			struct track_metadata **mdp, char **error);
void track_metadata_close(struct track_metadata *md);
int track_metadata_load(struct track_c *tc);
int track_metadata_checkpoint(struct track_c *tc, bool clean);
int track_metadata_set_clean(struct track_c *tc, bool clean);
int track_metadata_resume(struct track_c *tc);
int track_metadata_settle(struct track_metadata *md);
void track_metadata_suspended(struct track_metadata *md);
void track_metadata_invalidate(struct track_c *tc);
int track_metadata_admit(struct track_c *tc, struct bio *bio,
			 struct track_bio *tb);
void track_metadata_write_done(struct track_c *tc, struct track_bio *tb);
enum track_persist track_metadata_state(struct track_metadata *md);
sector_t track_metadata_default_region(struct track_c *tc);

/* dm-track-netlink.c */
int track_netlink_init(void);
void track_netlink_exit(void);

#endif /* DM_TRACK_H */
