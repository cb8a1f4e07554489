// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-track: a device-mapper target that passes I/O through to one device
 * and records which blocks were written, so that a replica can be brought
 * up to date by copying exactly those blocks.
 *
 * The written blocks form the active set. A "freeze" message atomically
 * makes it the frozen set of an epoch and starts a new, empty active set;
 * the frozen set is read (over netlink), copied, and dropped with "commit",
 * or given back with "abort". A write is marked when it is mapped and again
 * when it completes, so a write that is in flight across a freeze lands in
 * both sets: whatever the copier read, the next epoch has the block again.
 *
 * See Documentation/admin-guide/device-mapper/dm-track.rst.
 */
#include "dm-track.h"

#include <linux/dm-ioctl.h>
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/string.h>

#define TRACK_DEFAULT_BLOCK_SECTORS	8
#define TRACK_MAX_BLOCK_SECTORS		65536U

/* Every track target, for netlink lookups and table reloads. */
static LIST_HEAD(track_devices);
static DEFINE_MUTEX(track_devices_lock);
static u64 track_next_serial;

static struct track_bitset *active_set(struct track_c *tc)
{
	return rcu_dereference_protected(tc->active,
					 lockdep_is_held(&tc->lock));
}

static void track_mark(struct track_c *tc, u64 first, u64 last)
{
	rcu_read_lock();
	track_bitset_mark(rcu_dereference(tc->active), first, last,
			  GFP_NOWAIT);
	rcu_read_unlock();
}

/*
 * Mark a write being mapped; true if it waits for the preservation of the
 * frozen data it overwrites. The snapshot is the one of the set the write
 * is marked in, read in the same RCU section: a write in the new epoch of
 * a snapshot freeze always sees it.
 */
static bool track_mark_write(struct track_c *tc, struct bio *bio,
			     struct track_bio *tb)
{
	struct track_bitset *active;
	struct track_snap *snap;

	rcu_read_lock();
	active = rcu_dereference(tc->active);
	track_bitset_mark(active, tb->first, tb->last, GFP_NOWAIT);
	snap = track_snap_get(rcu_dereference(active->snap), tb);
	rcu_read_unlock();
	/* Outside RCU: it allocates and starts reads. */
	return snap && track_snap_defer(snap, bio, tb);
}

/* Replace the active set; the old one is no longer marked on return. */
static struct track_bitset *swap_active(struct track_c *tc,
					struct track_bitset *bs)
{
	struct track_bitset *old;

	old = rcu_replace_pointer(tc->active, bs, lockdep_is_held(&tc->lock));
	synchronize_rcu();
	return old;
}

static const char *track_name(struct track_c *tc)
{
	return dm_device_name(dm_table_get_md(tc->ti->table));
}

/*
 *--------------------------------------------------------------
 * Epochs
 *--------------------------------------------------------------
 */
/*
 * The message operations run with tc->lock held, on a target that is live
 * or suspended, in a memalloc_noio scope: a suspended device must not be
 * written to by reclaim.
 */

/* Persist after a change to the sets; failures are logged, not returned. */
static void track_persist(struct track_c *tc)
{
	if (tc->md)
		track_metadata_checkpoint(tc, tc->state == TRACK_SUSPENDED);
}

/*
 * Before blocks leave the set for good (commit, clear), the data they stand
 * for must be durable on the origin: the copier read it with O_DIRECT,
 * which may have been served from the origin's volatile cache. Without the
 * flush, a power loss after the checkpoint would take the origin back to
 * the old data while the replica keeps the new, and the block would not be
 * dirty to repair it. Only the metadata device makes a set outlive a
 * crash, so without one there is nothing to order.
 */
static int track_flush_origin(struct track_c *tc, const char *what)
{
	int r;

	if (!tc->md)
		return 0;
	r = blkdev_issue_flush(tc->dev->bdev);
	if (r)
		DMERR("%s: %s refused: flushing the data device failed (%d)",
		      track_name(tc), what, r);
	return r;
}

/*
 * Freeze; with SNAP (snapshot mode), the writes of the new epoch preserve
 * the data of the frozen blocks they overwrite from the moment the new
 * active set is published, so the frozen set reads as at that instant.
 */
static int track_freeze(struct track_c *tc, struct track_snap *snap,
			u64 *epoch)
{
	struct track_bitset *fresh, *old;

	fresh = track_bitset_create(tc->nr_blocks, false);
	if (!fresh)
		return -ENOMEM;

	/* A snapshot in progress ends: its epoch number is not reused. */
	track_snap_drop(tc);
	tc->snap_epoch = 0;
	RCU_INIT_POINTER(fresh->snap, snap);
	old = swap_active(tc, fresh);
	if (tc->frozen)
		track_bitset_merge(tc->frozen, old);
	else
		tc->frozen = old;
	tc->frozen_epoch = tc->epoch++;
	tc->set_seq++;
	*epoch = tc->frozen_epoch;
	if (snap)
		track_snap_start(tc, snap);
	/* The epoch is on disk before anyone can commit it. */
	if (tc->md)
		track_metadata_set_clean(tc, tc->state == TRACK_SUSPENDED);
	return 0;
}

static int track_commit(struct track_c *tc, bool has_epoch, u64 epoch,
			bool commit)
{
	int r;

	if (!tc->frozen || (has_epoch && epoch != tc->frozen_epoch))
		return -ESTALE;

	if (commit && !track_snap_usable(tc)) {
		DMERR("%s: commit refused: the snapshot of epoch %llu failed; abort it",
		      track_name(tc), tc->frozen_epoch);
		return -EIO;
	}
	track_snap_drop(tc);
	tc->snap_epoch = 0;

	if (commit) {
		r = track_flush_origin(tc, "commit");
		if (r)
			return r;
		track_bitset_destroy(tc->frozen);
		tc->committed_epoch = tc->frozen_epoch;
	} else {
		track_bitset_merge(active_set(tc), tc->frozen);
	}
	tc->frozen = NULL;
	tc->frozen_epoch = 0;
	tc->set_seq++;
	if (commit)
		track_persist(tc);
	return 0;
}

/* Make every block clean (FULL = false) or dirty; clean also drops frozen. */
static int track_reset(struct track_c *tc, bool full)
{
	struct track_bitset *fresh;
	int r;

	if (!full) {
		r = track_flush_origin(tc, "clear");
		if (r)
			return r;
	}
	fresh = track_bitset_create(tc->nr_blocks, full);
	if (!fresh)
		return -ENOMEM;

	/* A snapshot held in the old set: without clear, commit is refused. */
	track_snap_drop(tc);
	if (!full)
		tc->snap_epoch = 0;
	track_bitset_destroy(swap_active(tc, fresh));
	tc->set_seq++;
	if (!full) {
		track_bitset_destroy(tc->frozen);
		tc->frozen = NULL;
		tc->frozen_epoch = 0;
	}
	track_persist(tc);
	return 0;
}

/*
 *--------------------------------------------------------------
 * Registry
 *--------------------------------------------------------------
 */

static void track_release(struct kref *ref)
{
	kfree(container_of(ref, struct track_c, ref));
}

/* Live or suspended: the only states in which messages and dumps act. */
bool track_ready(struct track_c *tc)
{
	return tc->state == TRACK_LIVE || tc->state == TRACK_SUSPENDED;
}

/*
 * Find a ready track device by dm name or uuid, or any by serial, and return
 * it with its lock held; release with track_unlock(). ERR_PTR(-ENODEV) if
 * there is none (or it was reloaded or removed since the serial was handed
 * out). The global lock is not held while waiting for the device's lock.
 */
struct track_c *track_lookup_lock(const char *name, const char *uuid,
				  u64 serial)
{
	char dm_name[DM_NAME_LEN], dm_uuid[DM_UUID_LEN];
	struct track_c *tc, *found = NULL;

	mutex_lock(&track_devices_lock);
	list_for_each_entry(tc, &track_devices, list) {
		if (serial) {
			if (tc->serial != serial)
				continue;
		} else {
			if (READ_ONCE(tc->state) != TRACK_LIVE &&
			    READ_ONCE(tc->state) != TRACK_SUSPENDED)
				continue;
			if (dm_copy_name_and_uuid(dm_table_get_md(tc->ti->table),
						  dm_name, dm_uuid))
				continue;
			if (name && strcmp(name, dm_name))
				continue;
			if (uuid && strcmp(uuid, dm_uuid))
				continue;
		}
		kref_get(&tc->ref);
		found = tc;
		break;
	}
	mutex_unlock(&track_devices_lock);
	if (!found)
		return ERR_PTR(-ENODEV);

	mutex_lock(&found->lock);
	if (!track_ready(found)) {
		track_unlock(found);
		return ERR_PTR(-ENODEV);
	}
	return found;
}

void track_unlock(struct track_c *tc)
{
	mutex_unlock(&tc->lock);
	kref_put(&tc->ref, track_release);
}

/*
 * The ready track target of the mapped device whose disk is DEVT, with a
 * reference; NULL if DEVT is not a track device (or not a whole one).
 */
struct track_c *track_get_by_devt(dev_t devt)
{
	struct track_c *tc, *found = NULL;

	mutex_lock(&track_devices_lock);
	list_for_each_entry(tc, &track_devices, list) {
		enum track_state st = READ_ONCE(tc->state);

		if ((st == TRACK_LIVE || st == TRACK_SUSPENDED) &&
		    disk_devt(dm_disk(dm_table_get_md(tc->ti->table))) == devt) {
			kref_get(&tc->ref);
			found = tc;
			break;
		}
	}
	mutex_unlock(&track_devices_lock);
	return found;
}

void track_put(struct track_c *tc)
{
	kref_put(&tc->ref, track_release);
}

/* Does OLD track the same blocks of the same device as TC? */
static bool same_geometry(struct track_c *tc, struct track_c *old)
{
	return old->dev->bdev == tc->dev->bdev && old->start == tc->start &&
	       old->block_shift == tc->block_shift &&
	       old->ti->begin == tc->ti->begin;
}

/*
 * A table reload constructs a new target while the old one is still live;
 * when the new table is resumed, the old one has been suspended and the new
 * one takes over its sets and epochs here, resized if the device changed
 * size. This cannot fail: when the old sets do not fit (another device,
 * offset or block size) or there is no memory to resize them, every block
 * is marked dirty instead. Returns whether there was an old table.
 */
/*
 * The ready track target of mapped device MD other than TC, with a
 * reference and its lock held, or NULL. The registry lock is held only to
 * find it: taking over can resize sets and write to the old metadata
 * device, and a hung device must not hang every other track device's
 * create, remove and netlink lookup with it.
 */
static struct track_c *lock_predecessor(struct track_c *tc,
					struct mapped_device *md)
{
	struct track_c *old;

	for (;;) {
		struct track_c *found = NULL;

		mutex_lock(&track_devices_lock);
		list_for_each_entry(old, &track_devices, list) {
			enum track_state st = READ_ONCE(old->state);

			if (old != tc && dm_table_get_md(old->ti->table) == md &&
			    (st == TRACK_LIVE || st == TRACK_SUSPENDED)) {
				kref_get(&old->ref);
				found = old;
				break;
			}
		}
		mutex_unlock(&track_devices_lock);
		if (!found)
			return NULL;

		mutex_lock(&found->lock);
		if (track_ready(found))
			return found;
		/* Removed or taken over meanwhile: states it never leaves. */
		track_unlock(found);
	}
}

/*
 * A table reload constructs a new target while the old one is still live;
 * when the new table is resumed, the old one has been suspended and the new
 * one takes over its sets and epochs here, resized if the device changed
 * size. This cannot fail: when the old sets do not fit (another device,
 * offset or block size) or there is no memory to resize them, every block
 * is marked dirty instead. Returns whether there was an old table.
 */
static bool track_take_over(struct track_c *tc)
{
	struct mapped_device *md = dm_table_get_md(tc->ti->table);
	struct track_bitset *active = NULL, *frozen = NULL;
	const char *lost = NULL;
	struct track_c *old;

	old = lock_predecessor(tc, md);
	if (!old)
		return false;

	/* Its snapshot ends here: the copier of that epoch must abort. */
	track_snap_drop(old);

	if (!same_geometry(tc, old)) {
		lost = "the device, offset or block size changed";
	} else {
		/* A resize that succeeds consumes the old set. */
		active = track_bitset_resize(active_set(old), tc->nr_blocks,
					     true);
		if (active)
			RCU_INIT_POINTER(old->active, NULL);
		if (active && old->frozen) {
			frozen = track_bitset_resize(old->frozen,
						     tc->nr_blocks, false);
			if (frozen)
				old->frozen = NULL;
		}
		if (!active || old->frozen)
			lost = "no memory to resize the dirty sets";
	}
	/*
	 * The old table wrote its sets to its metadata device when it was
	 * suspended. Unless this table keeps them on the same device, that
	 * copy is stale from now on.
	 */
	if (old->md && (!tc->md_dev || tc->md_dev->bdev != old->md_dev->bdev))
		track_metadata_invalidate(old);
	if (!lost) {
		tc->epoch = old->epoch;
		tc->frozen_epoch = frozen ? old->frozen_epoch : 0;
		tc->committed_epoch = old->committed_epoch;
		tc->id = old->id;
	}
	tc->snap_epoch = lost ? 0 : old->snap_epoch;
	WRITE_ONCE(old->state, TRACK_HANDED_OVER);
	track_unlock(old);

	mutex_lock(&tc->lock);
	if (lost) {
		/* Never drop a block: everything is dirty, a new state id. */
		track_bitset_destroy(active);
		track_bitset_destroy(frozen);
		track_bitset_mark(active_set(tc), 0, tc->nr_blocks - 1,
				  GFP_NOWAIT);
		DMWARN("%s: reload: %s: every block is dirty",
		       track_name(tc), lost);
	} else {
		track_bitset_destroy(swap_active(tc, active));
		tc->frozen = frozen;
	}
	mutex_unlock(&tc->lock);
	return true;
}

/*
 *--------------------------------------------------------------
 * Target methods
 *--------------------------------------------------------------
 */
static void track_destroy(struct track_c *tc)
{
	unsigned int i;

	if (rcu_access_pointer(tc->snap))
		track_snap_drop(tc);
	track_snap_exit(tc);
	if (tc->cow_dev)
		dm_put_device(tc->ti, tc->cow_dev);
	if (tc->md)
		track_metadata_close(tc->md);
	if (tc->md_dev)
		dm_put_device(tc->ti, tc->md_dev);
	if (tc->dev)
		dm_put_device(tc->ti, tc->dev);
	track_bitset_destroy(rcu_access_pointer(tc->active));
	RCU_INIT_POINTER(tc->active, NULL);
	track_bitset_destroy(tc->frozen);
	tc->frozen = NULL;
	for (i = 0; i < tc->argc; i++)
		kfree(tc->argv[i]);
	kfree(tc->argv);
}

/*
 * Is BDEV used by a track target of another mapped device, as its metadata
 * or COW device, or (with DATA) as its data device? A metadata device
 * shared by two devices would have each load the other's set; a COW device
 * shared would have both write the same slots; a metadata or COW device
 * that is another device's data device would have the target write its
 * own blocks over that device's data. (A reload of the same device may
 * use them: the new table takes over from the old one.)
 */
static bool track_bdev_in_use(struct track_c *tc, struct block_device *bdev,
			      bool data)
{
	struct mapped_device *md = dm_table_get_md(tc->ti->table);
	struct track_c *other;

	lockdep_assert_held(&track_devices_lock);
	list_for_each_entry(other, &track_devices, list) {
		if (dm_table_get_md(other->ti->table) == md)
			continue;
		if ((other->md_dev && other->md_dev->bdev == bdev) ||
		    (other->cow_dev && other->cow_dev->bdev == bdev) ||
		    (data && other->dev->bdev == bdev))
			return true;
	}
	return false;
}

static int parse_block_size(struct track_c *tc, const char *arg, char **error)
{
	unsigned int sectors;
	char dummy;

	if (!strcmp(arg, "-")) {
		sectors = TRACK_DEFAULT_BLOCK_SECTORS;
	} else if (sscanf(arg, "%u%c", &sectors, &dummy) != 1 ||
		   !sectors || !is_power_of_2(sectors) ||
		   sectors > TRACK_MAX_BLOCK_SECTORS) {
		*error = "Invalid block size: a power of two from 1 to 65536 sectors, or -";
		return -EINVAL;
	}
	tc->block_shift = ilog2(sectors);
	return 0;
}

static int parse_features(struct dm_arg_set *as, struct track_c *tc,
			  const char **md_path, const char **cow_path,
			  unsigned int *region_sectors, char **error)
{
	static const struct dm_arg _args[] = {
		{0, 7, "Invalid number of feature arguments"},
	};
	unsigned int argc;
	const char *arg;
	char dummy;
	int r;

	if (!as->argc)
		return 0;

	r = dm_read_arg_group(_args, as, &argc, error);
	if (r)
		return r;

	while (argc) {
		arg = dm_shift_arg(as);
		argc--;

		if (!strcasecmp(arg, "clean")) {
			tc->start_clean = true;
		} else if (!strcasecmp(arg, "metadata")) {
			if (!argc) {
				*error = "Feature metadata needs a device";
				return -EINVAL;
			}
			*md_path = dm_shift_arg(as);
			argc--;
		} else if (!strcasecmp(arg, "cow_dev")) {
			if (!argc) {
				*error = "Feature cow_dev needs a device";
				return -EINVAL;
			}
			*cow_path = dm_shift_arg(as);
			argc--;
		} else if (!strcasecmp(arg, "region_size")) {
			if (!argc ||
			    sscanf(dm_shift_arg(as), "%u%c", region_sectors,
				   &dummy) != 1 ||
			    !is_power_of_2(*region_sectors) ||
			    *region_sectors < (1U << tc->block_shift)) {
				*error = "Invalid region_size: a power of two >= the block size";
				return -EINVAL;
			}
			argc--;
		} else {
			*error = "Unrecognised feature requested";
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * Construct a track mapping:
 *
 * <dev path> <offset> <block size in sectors> [<#feature args> [<arg>]*]
 *
 * block size: a power of two from 1 to 65536 sectors, or - for 8 (4 KiB).
 *
 * Optional feature arguments:
 *   clean                   the replica is known to be identical: start with
 *                           no block dirty (default: every block dirty)
 *   metadata <dev path>     keep the dirty set on this device across
 *                           restarts and crashes
 *   region_size <sectors>   write-intent granularity with metadata
 *   cow_dev <dev path>      snapshot mode keeps the preserved data that
 *                           exceeds the memory limit on this device
 */
static int track_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct dm_arg_set as = { .argc = argc, .argv = argv };
	unsigned int region_sectors = 0;
	const char *md_path = NULL, *cow_path = NULL;
	unsigned long long offset;
	struct track_c *tc;
	char dummy;
	int r;

	if (argc < 3) {
		ti->error = "Invalid argument count: <dev> <offset> <block size> [features]";
		return -EINVAL;
	}

	tc = kzalloc(sizeof(*tc), GFP_KERNEL);
	if (!tc) {
		ti->error = "Cannot allocate track context";
		return -ENOMEM;
	}
	tc->ti = ti;
	mutex_init(&tc->lock);
	INIT_LIST_HEAD(&tc->list);
	kref_init(&tc->ref);
	r = track_snap_init(tc);
	if (r) {
		ti->error = "Cannot allocate the snapshot worker";
		goto bad;
	}

	tc->argv = kcalloc(argc, sizeof(*tc->argv), GFP_KERNEL);
	if (!tc->argv) {
		ti->error = "Cannot allocate table arguments";
		r = -ENOMEM;
		goto bad;
	}
	for (tc->argc = 0; tc->argc < argc; tc->argc++) {
		tc->argv[tc->argc] = kstrdup(argv[tc->argc], GFP_KERNEL);
		if (!tc->argv[tc->argc]) {
			ti->error = "Cannot allocate table arguments";
			r = -ENOMEM;
			goto bad;
		}
	}

	if (sscanf(argv[1], "%llu%c", &offset, &dummy) != 1 ||
	    offset != (sector_t)offset) {
		ti->error = "Invalid device offset";
		r = -EINVAL;
		goto bad;
	}
	tc->start = offset;

	r = parse_block_size(tc, argv[2], &ti->error);
	if (r)
		goto bad;

	dm_consume_args(&as, 3);
	r = parse_features(&as, tc, &md_path, &cow_path, &region_sectors,
			   &ti->error);
	if (r)
		goto bad;
	if (as.argc) {
		ti->error = "Too many arguments";
		r = -EINVAL;
		goto bad;
	}

	r = dm_get_device(ti, argv[0], dm_table_get_mode(ti->table), &tc->dev);
	if (r) {
		ti->error = "Cannot open the data device";
		goto bad;
	}

	tc->nr_blocks = DIV_ROUND_UP_ULL(ti->len, 1ULL << tc->block_shift);
	tc->epoch = 1;
	uuid_gen(&tc->id);
	RCU_INIT_POINTER(tc->active,
			 track_bitset_create(tc->nr_blocks, !tc->start_clean));
	if (!rcu_access_pointer(tc->active)) {
		ti->error = "Cannot allocate the dirty set";
		r = -ENOMEM;
		goto bad;
	}

	if (md_path) {
		r = dm_get_device(ti, md_path, BLK_OPEN_READ | BLK_OPEN_WRITE,
				  &tc->md_dev);
		if (r) {
			ti->error = "Cannot open the metadata device";
			goto bad;
		}
		if (tc->md_dev->bdev == tc->dev->bdev) {
			ti->error = "The metadata device must not be the data device";
			r = -EINVAL;
			goto bad;
		}
		tc->region_sectors = region_sectors ?:
				     track_metadata_default_region(tc);
		r = track_metadata_open(tc, tc->md_dev, &tc->md, &ti->error);
		if (r)
			goto bad;
	}

	if (cow_path) {
		r = dm_get_device(ti, cow_path, BLK_OPEN_READ | BLK_OPEN_WRITE,
				  &tc->cow_dev);
		if (r) {
			ti->error = "Cannot open the COW device";
			goto bad;
		}
		if (tc->cow_dev->bdev == tc->dev->bdev ||
		    (tc->md_dev && tc->cow_dev->bdev == tc->md_dev->bdev)) {
			ti->error = "The COW device must not be the data or metadata device";
			r = -EINVAL;
			goto bad;
		}
	}

	ti->num_flush_bios = 1;
	ti->num_discard_bios = 1;
	ti->num_secure_erase_bios = 1;
	ti->num_write_zeroes_bios = 1;
	ti->per_io_data_size = sizeof(struct track_bio);
	ti->accounts_remapped_io = true;
	compat_set_flush_bypasses_map(ti);
	ti->private = tc;

	/* The check and the insertion under one hold: no two creates race. */
	mutex_lock(&track_devices_lock);
	if (track_bdev_in_use(tc, tc->dev->bdev, false)) {
		mutex_unlock(&track_devices_lock);
		ti->error = "The data device is the metadata or COW device of another track device";
		r = -EBUSY;
		goto bad;
	}
	if (tc->md_dev && track_bdev_in_use(tc, tc->md_dev->bdev, true)) {
		mutex_unlock(&track_devices_lock);
		DMERR("%s: give each track device a metadata device of its own",
		      dm_device_name(dm_table_get_md(ti->table)));
		ti->error = "The metadata device is in use by another track device";
		r = -EBUSY;
		goto bad;
	}
	if (tc->cow_dev && track_bdev_in_use(tc, tc->cow_dev->bdev, true)) {
		mutex_unlock(&track_devices_lock);
		ti->error = "The COW device is in use by another track device";
		r = -EBUSY;
		goto bad;
	}
	tc->serial = ++track_next_serial;
	list_add_tail(&tc->list, &track_devices);
	mutex_unlock(&track_devices_lock);
	return 0;

bad:
	track_destroy(tc);
	kfree(tc);
	return r;
}

static void track_dtr(struct dm_target *ti)
{
	struct track_c *tc = ti->private;

	mutex_lock(&track_devices_lock);
	list_del(&tc->list);
	mutex_unlock(&track_devices_lock);

	/* A netlink reader may still hold a reference: it will see GONE. */
	mutex_lock(&tc->lock);
	WRITE_ONCE(tc->state, TRACK_GONE);
	track_destroy(tc);
	mutex_unlock(&tc->lock);
	kref_put(&tc->ref, track_release);
}

static int track_map(struct dm_target *ti, struct bio *bio)
{
	struct track_c *tc = ti->private;
	sector_t offset = dm_target_offset(ti, bio->bi_iter.bi_sector);
	struct track_bio *tb;

	bio_set_dev(bio, tc->dev->bdev);
	bio->bi_iter.bi_sector = tc->start + offset;

	if (!op_is_write(bio_op(bio)))
		return DM_MAPIO_REMAPPED;

	tb = dm_per_bio_data(bio, sizeof(*tb));
	tb->marked = false;
	tb->counted = false;
	if (!bio_sectors(bio))
		return DM_MAPIO_REMAPPED;

	tb->first = offset >> tc->block_shift;
	tb->last = (offset + bio_sectors(bio) - 1) >> tc->block_shift;
	tb->marked = true;
	if (track_mark_write(tc, bio, tb))
		return DM_MAPIO_SUBMITTED;

	if (tc->md)
		return track_metadata_admit(tc, bio, tb);
	return DM_MAPIO_REMAPPED;
}

/* A write that waited for snapshot mode's preservations: let it go on. */
void track_write_continue(struct track_c *tc, struct bio *bio,
			  struct track_bio *tb)
{
	int r = DM_MAPIO_REMAPPED;

	if (tc->md)
		r = track_metadata_admit(tc, bio, tb);
	if (r == DM_MAPIO_REMAPPED)
		dm_submit_bio_remap(bio, NULL);
	else if (r == DM_MAPIO_KILL)
		bio_io_error(bio);
}

static int track_end_io(struct dm_target *ti, struct bio *bio,
			blk_status_t *error)
{
	struct track_c *tc = ti->private;
	struct track_bio *tb;

	if (!op_is_write(bio_op(bio)))
		return DM_ENDIO_DONE;

	/* Again, into whichever set is active now: see the top of the file. */
	tb = dm_per_bio_data(bio, sizeof(*tb));
	if (tb->marked)
		track_mark(tc, tb->first, tb->last);
	if (tb->counted)
		track_metadata_write_done(tc, tb);
	return DM_ENDIO_DONE;
}

static void track_postsuspend(struct dm_target *ti)
{
	struct track_c *tc = ti->private;
	unsigned int noio = memalloc_noio_save();

	mutex_lock(&tc->lock);
	if (tc->state == TRACK_LIVE) {
		WRITE_ONCE(tc->state, TRACK_SUSPENDED);
		if (tc->md) {
			track_metadata_checkpoint(tc, true);
			track_metadata_suspended(tc->md);
		}
	}
	mutex_unlock(&tc->lock);
	memalloc_noio_restore(noio);
}

static int track_preresume(struct dm_target *ti)
{
	struct track_c *tc = ti->private;
	unsigned int noio = memalloc_noio_save();
	bool loaded = false;
	int r = 0;

	if (tc->state == TRACK_NEW && !track_take_over(tc) && tc->md) {
		r = track_metadata_load(tc);
		if (r < 0)
			goto out;
		loaded = r;
	}

	mutex_lock(&tc->lock);
	if (tc->md) {
		/*
		 * On disk before the first write is admitted. If that cannot
		 * be written, a crash or even a clean stop later would load a
		 * stale set: refuse to resume.
		 */
		if (tc->state == TRACK_SUSPENDED)
			r = track_metadata_resume(tc);
		else if (loaded)
			r = track_metadata_set_clean(tc, false);
		else
			r = track_metadata_checkpoint(tc, false);
		/*
		 * Failed, now or before: resuming in memory only is safe once
		 * the stored state is marked invalid, as the next load then
		 * marks every block dirty. If even that could not be written,
		 * a stale set may look valid: refuse.
		 */
		if (r && !track_metadata_settle(tc->md)) {
			DMWARN("%s: metadata device failed: resuming, tracking in memory only",
			       track_name(tc));
			r = 0;
		}
		if (r) {
			DMERR("%s: metadata failed, cannot mark it invalid (%d): not resuming",
			      track_name(tc), r);
			DMERR("%s: reload the table with a working metadata device, or without one",
			      track_name(tc));
			mutex_unlock(&tc->lock);
			goto out;
		}
	}
	WRITE_ONCE(tc->state, TRACK_LIVE);
	mutex_unlock(&tc->lock);
	r = 0;
out:
	memalloc_noio_restore(noio);
	return r;
}

/*
 * Status format:
 *
 * <block size> <#blocks> <#dirty active> <#dirty frozen | -> <epoch>
 * <frozen epoch | -> <committed epoch> <memory> <metadata> <id>
 * <snapshot> <preserved bytes> <snapshot limit> <preserved on COW>
 * <COW bytes>
 *
 * block size is in sectors, memory in bytes (both sets); metadata is "-"
 * without a metadata device, "ok", "failed" (a metadata write failed and
 * the stored state is marked invalid on disk: tracking in memory only) or
 * "unrecorded" (it failed and that is not on disk yet: writes that need a
 * new write-intent bit fail until it is); id is the uuid of the tracking
 * state, which a replica can use to know its source. snapshot is "-" (the
 * frozen epoch was not frozen in snapshot mode), "active" or "failed" (it
 * cannot be committed: abort it); preserved bytes and the limit are "-"
 * without a snapshot. The last two are the part of the preserved bytes
 * on the COW device and its size, "-" without a snapshot or COW device.
 */
static const char * const persist_name[] = {
	[TRACK_PERSIST_NONE] = "-",
	[TRACK_PERSIST_OK] = "ok",
	[TRACK_PERSIST_FAILING] = "unrecorded",
	[TRACK_PERSIST_FAILED] = "failed",
	[TRACK_PERSIST_UNRECORDED] = "unrecorded",
};

static void track_status(struct dm_target *ti, status_type_t type,
			 unsigned int status_flags, char *result,
			 unsigned int maxlen)
{
	struct track_c *tc = ti->private;
	struct track_bitset *active;
	ssize_t sz = 0;
	unsigned int i;
	u64 mem;

	switch (type) {
	case STATUSTYPE_INFO:
		mutex_lock(&tc->lock);
		active = active_set(tc);
		mem = track_bitset_memory(active);
		DMEMIT("%u %llu %llu", 1U << tc->block_shift, tc->nr_blocks,
		       track_bitset_weight(active));
		if (tc->frozen) {
			mem += track_bitset_memory(tc->frozen);
			DMEMIT(" %llu", track_bitset_weight(tc->frozen));
		} else {
			DMEMIT(" -");
		}
		DMEMIT(" %llu", tc->epoch);
		if (tc->frozen)
			DMEMIT(" %llu", tc->frozen_epoch);
		else
			DMEMIT(" -");
		DMEMIT(" %llu %llu", tc->committed_epoch, mem);
		if (!tc->md)
			DMEMIT(" -");
		else
			DMEMIT(" %s", persist_name[track_metadata_state(tc->md)]);
		DMEMIT(" %pUb", &tc->id);
		track_snap_status(tc, result, maxlen, &sz);
		mutex_unlock(&tc->lock);
		break;

	case STATUSTYPE_TABLE:
		/* The table as given, with devices as major:minor (dm-era). */
		DMEMIT("%s", tc->dev->name);
		for (i = 1; i < tc->argc; i++) {
			const char *arg = tc->argv[i];

			if (i > 3 && tc->md_dev &&
			    !strcasecmp(tc->argv[i - 1], "metadata"))
				arg = tc->md_dev->name;
			else if (i > 3 && tc->cow_dev &&
				 !strcasecmp(tc->argv[i - 1], "cow_dev"))
				arg = tc->cow_dev->name;
			DMEMIT(" %s", arg);
		}
		break;

	case STATUSTYPE_IMA:
		*result = '\0';
		break;
	}
}

/*
 * Messages:
 *   freeze              start a new epoch; prints the frozen epoch
 *   freeze snapshot [<limit>]   and keep the frozen blocks readable as
 *                       they were through a track-view device, preserving
 *                       at most <limit> bytes (K, M, G suffixes)
 *   commit [<epoch>]    drop the frozen set (the replica has it)
 *   abort [<epoch>]     give the frozen set back to the active one
 *   clear               forget every dirty block, frozen ones too
 *   mark_all            mark every block dirty
 *   checkpoint          write the dirty set to the metadata device
 */
static int track_freeze_message(struct track_c *tc, unsigned int argc,
				char **argv, char *result, unsigned int maxlen)
{
	u64 limit = TRACK_SNAP_DEFAULT_LIMIT, epoch;
	struct track_snap *snap = NULL;
	char *end;
	int r;

	if (argc > 1) {
		if (strcasecmp(argv[1], "snapshot")) {
			DMERR("%s: freeze: unknown mode '%s' (snapshot is the only one)",
			      track_name(tc), argv[1]);
			return -EINVAL;
		}
		if (argc > 3) {
			DMERR("%s: freeze snapshot takes at most a limit",
			      track_name(tc));
			return -EINVAL;
		}
		if (argc == 3) {
			limit = memparse(argv[2], &end);
			if (*end || end == argv[2] || !limit) {
				DMERR("%s: freeze snapshot: invalid limit '%s' (bytes, K, M, G)",
				      track_name(tc), argv[2]);
				return -EINVAL;
			}
		}
		snap = track_snap_create(tc, limit);
		if (!snap)
			return -ENOMEM;
	}
	r = track_freeze(tc, snap, &epoch);
	if (r) {
		kfree(snap);
		return r;
	}
	scnprintf(result, maxlen, "%llu", epoch);
	return 1;
}

/* One message, with tc->lock held; 1 when RESULT holds a reply. */
static int track_do_message(struct track_c *tc, unsigned int argc,
			    char **argv, char *result, unsigned int maxlen)
{
	bool has_epoch = argc == 2;
	u64 epoch = 0;
	int r;

	if (!strcasecmp(argv[0], "freeze"))
		return track_freeze_message(tc, argc, argv, result, maxlen);
	if (argc > 2)
		goto bad;
	if (!strcasecmp(argv[0], "commit") || !strcasecmp(argv[0], "abort")) {
		if (has_epoch && kstrtou64(argv[1], 10, &epoch)) {
			DMERR("%s: invalid epoch '%s'", track_name(tc), argv[1]);
			return -EINVAL;
		}
		r = track_commit(tc, has_epoch, epoch,
				 !strcasecmp(argv[0], "commit"));
		if (r == -ESTALE)
			DMERR("%s: %s %s refused: not the frozen epoch",
			      track_name(tc), argv[0], has_epoch ? argv[1] : "");
		return r;
	}
	if (argc != 1)
		goto bad;

	if (!strcasecmp(argv[0], "clear"))
		return track_reset(tc, false);
	if (!strcasecmp(argv[0], "mark_all"))
		return track_reset(tc, true);
	if (!strcasecmp(argv[0], "checkpoint")) {
		if (!tc->md) {
			DMERR("%s: checkpoint: no metadata device",
			      track_name(tc));
			return -EINVAL;
		}
		return track_metadata_checkpoint(tc, false);
	}

bad:
	DMERR("%s: unsupported message '%s'", track_name(tc), argv[0]);
	return -EINVAL;
}

static int track_message(struct dm_target *ti, unsigned int argc,
			 char **argv, char *result, unsigned int maxlen)
{
	struct track_c *tc = ti->private;
	unsigned int noio;
	int r;

	if (!argc || argc > 3) {
		DMERR("%s: a message is a word and at most two arguments",
		      track_name(tc));
		return -EINVAL;
	}

	noio = memalloc_noio_save();
	mutex_lock(&tc->lock);
	if (!track_ready(tc)) {
		DMERR("%s: %s: the table is not live", track_name(tc), argv[0]);
		r = -EBUSY;
	} else {
		r = track_do_message(tc, argc, argv, result, maxlen);
	}
	mutex_unlock(&tc->lock);
	memalloc_noio_restore(noio);
	return r;
}

static int track_iterate_devices(struct dm_target *ti,
				 iterate_devices_callout_fn fn, void *data)
{
	struct track_c *tc = ti->private;

	return fn(ti, tc->dev, tc->start, ti->len, data);
}

static struct target_type track_target = {
	.name = "track",
	.version = {1, 1, 0},
	.features = DM_TARGET_SINGLETON,
	.module = THIS_MODULE,
	.ctr = track_ctr,
	.dtr = track_dtr,
	.map = track_map,
	.end_io = track_end_io,
	.postsuspend = track_postsuspend,
	.preresume = track_preresume,
	.status = track_status,
	.message = track_message,
	.iterate_devices = track_iterate_devices,
};

static int __init dm_track_init(void)
{
	int r;

	r = dm_register_target(&track_target);
	if (r)
		return r;

	r = track_view_register();
	if (r)
		goto bad_view;
	r = track_netlink_init();
	if (r)
		goto bad_netlink;
	return 0;

bad_netlink:
	track_view_unregister();
bad_view:
	dm_unregister_target(&track_target);
	return r;
}

static void __exit dm_track_exit(void)
{
	track_netlink_exit();
	track_view_unregister();
	dm_unregister_target(&track_target);
}

module_init(dm_track_init);
module_exit(dm_track_exit);

MODULE_DESCRIPTION(DM_NAME " target recording which blocks were written");
MODULE_ALIAS("dm-track-view");
MODULE_LICENSE("GPL");
