// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-track snapshot mode: "freeze snapshot" keeps the frozen epoch readable
 * as it was at the freeze, through a read-only "track-view" target.
 *
 * While the snapshot lasts, a write to a block of the frozen set that the
 * view has not read yet is held back by a worker, which first reads the
 * block's content into memory (preserves it); blocks outside the frozen
 * set, and frozen blocks the view has read, are never copied. The view
 * reads the origin and, on completion, copies preserved data over what it
 * read: a block that a write preserved while the read was in flight is
 * then still the freeze-time block. A block whole in a completed read is
 * marked read under the same lock that a preservation takes to store its
 * data, so either the read saw the old data (the write waits until the
 * data is preserved, and the preservation is only stored after the read
 * mark is checked) or the preserved data replaces what it saw.
 *
 * Memory is bounded: when the preserved data would exceed the limit, or
 * memory or the origin read fails, the snapshot fails. The view then fails
 * every read and "commit" is refused, so the copier aborts the epoch and
 * the blocks stay dirty; application writes go on, never failed.
 */
#include "dm-track.h"

#include <linux/dm-io.h>
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/xarray.h>

/* A frozen block the view has read whole: no longer preserved. */
#define SNAP_READ		xa_mk_value(0)

/* A write over more blocks than this is checked by the worker, not in map. */
#define SNAP_MAP_CHECK_MAX	1024

struct track_snap {
	struct track_c *tc;
	/* The frozen set; NULL while the freeze builds it: all blocks count. */
	struct track_bitset *frozen;
	struct xarray blocks;		/* block -> preserved data, or SNAP_READ */
	bool failed;			/* set under the xa_lock of blocks */
	u64 epoch;
	u64 seq;
	u64 limit;			/* bytes of preserved data */
	atomic64_t bytes;
};

static const char *snap_name(struct track_c *tc)
{
	return dm_device_name(dm_table_get_md(tc->ti->table));
}

static unsigned int snap_block_bytes(struct track_c *tc)
{
	return 512U << tc->block_shift;
}

static void snap_fail(struct track_snap *snap, const char *why)
{
	unsigned long flags;
	bool first;

	xa_lock_irqsave(&snap->blocks, flags);
	first = !snap->failed;
	WRITE_ONCE(snap->failed, true);
	xa_unlock_irqrestore(&snap->blocks, flags);
	if (first)
		DMERR("%s: snapshot of epoch %llu failed: %s; abort the epoch (no write is lost)",
		      snap_name(snap->tc), snap->epoch, why);
}

/* Does a write to FIRST..LAST need data preserved first? Under RCU. */
static bool snap_needs(struct track_snap *snap, u64 first, u64 last)
{
	/* Pairs with track_snap_start(): a set, then the whole set. */
	struct track_bitset *frozen = smp_load_acquire(&snap->frozen);
	u64 b;

	if (last - first >= SNAP_MAP_CHECK_MAX)
		return true;
	for (b = first; b <= last; b++) {
		if (frozen && !track_bitset_test(frozen, b))
			continue;
		if (!xa_load(&snap->blocks, b))
			return true;
	}
	return false;
}

/*
 * Called by map for a write marked in an active set whose epoch has SNAP:
 * true when the write was queued for the worker, which preserves the
 * freeze-time data of its blocks and then lets it go on.
 */
bool track_snap_defer(struct track_snap *snap, struct bio *bio,
		      struct track_bio *tb)
{
	struct track_c *tc = snap->tc;
	unsigned long flags;

	if (READ_ONCE(snap->failed) || !snap_needs(snap, tb->first, tb->last))
		return false;
	tb->snap = snap;
	spin_lock_irqsave(&tc->snap_lock, flags);
	bio_list_add(&tc->snap_bios, bio);
	spin_unlock_irqrestore(&tc->snap_lock, flags);
	queue_work(tc->snap_wq, &tc->snap_work);
	return true;
}

static int snap_read_origin(struct track_c *tc, u64 block, void *buf)
{
	sector_t pos = block << tc->block_shift;
	struct dm_io_region where = {
		.bdev = tc->dev->bdev,
		.sector = tc->start + pos,
		.count = min_t(sector_t, 1U << tc->block_shift,
			       tc->ti->len - pos),
	};
	struct dm_io_request req = {
		.bi_opf = REQ_OP_READ | REQ_SYNC,
		.client = tc->snap_io,
	};

	if (is_vmalloc_addr(buf)) {
		req.mem.type = DM_IO_VMA;
		req.mem.ptr.vma = buf;
	} else {
		req.mem.type = DM_IO_KMEM;
		req.mem.ptr.addr = buf;
	}
	return dm_io(&req, 1, &where, NULL, IOPRIO_DEFAULT);
}

/* Keep the freeze-time data of the blocks of FIRST..LAST that need it. */
static void snap_preserve(struct track_snap *snap, u64 first, u64 last)
{
	struct track_c *tc = snap->tc;
	unsigned int bytes = snap_block_bytes(tc);
	struct track_bitset *frozen;
	void *buf;
	u64 b;
	int r;

	for (b = first; b <= last; b++) {
		cond_resched();
		if (READ_ONCE(snap->failed))
			return;
		/* Pairs with track_snap_start(). */
		frozen = smp_load_acquire(&snap->frozen);
		if (frozen && !track_bitset_test(frozen, b))
			continue;
		if (xa_load(&snap->blocks, b))
			continue;
		if (atomic64_add_return(bytes, &snap->bytes) > snap->limit) {
			atomic64_sub(bytes, &snap->bytes);
			snap_fail(snap, "the preserved data reached the limit");
			return;
		}
		buf = kvmalloc(bytes, GFP_KERNEL | __GFP_NOWARN);
		if (!buf) {
			atomic64_sub(bytes, &snap->bytes);
			snap_fail(snap, "out of memory for preserved data");
			return;
		}
		r = snap_read_origin(tc, b, buf);
		if (r) {
			kvfree(buf);
			atomic64_sub(bytes, &snap->bytes);
			snap_fail(snap, "reading a block to preserve failed");
			return;
		}
		/* -EBUSY: the view read it whole meanwhile, or a write. */
		r = xa_insert_irq(&snap->blocks, b, buf, GFP_KERNEL);
		if (r) {
			kvfree(buf);
			atomic64_sub(bytes, &snap->bytes);
			if (r != -EBUSY) {
				snap_fail(snap, "out of memory for the block index");
				return;
			}
		}
	}
}

static void snap_worker(struct work_struct *work)
{
	struct track_c *tc = container_of(work, struct track_c, snap_work);
	unsigned int noio = memalloc_noio_save();
	struct bio_list bios;
	struct bio *bio;

	spin_lock_irq(&tc->snap_lock);
	bios = tc->snap_bios;
	bio_list_init(&tc->snap_bios);
	spin_unlock_irq(&tc->snap_lock);

	while ((bio = bio_list_pop(&bios))) {
		struct track_bio *tb = dm_per_bio_data(bio, sizeof(*tb));

		snap_preserve(tb->snap, tb->first, tb->last);
		track_write_continue(tc, bio, tb);
	}
	memalloc_noio_restore(noio);
}

int track_snap_init(struct track_c *tc)
{
	spin_lock_init(&tc->snap_lock);
	bio_list_init(&tc->snap_bios);
	INIT_WORK(&tc->snap_work, snap_worker);
	tc->snap_wq = alloc_workqueue("dm-track-snap", WQ_MEM_RECLAIM, 1);
	if (!tc->snap_wq)
		return -ENOMEM;
	tc->snap_io = dm_io_client_create();
	if (IS_ERR(tc->snap_io)) {
		int r = PTR_ERR(tc->snap_io);

		tc->snap_io = NULL;
		return r;
	}
	return 0;
}

void track_snap_exit(struct track_c *tc)
{
	if (tc->snap_wq)
		destroy_workqueue(tc->snap_wq);
	tc->snap_wq = NULL;
	if (tc->snap_io)
		dm_io_client_destroy(tc->snap_io);
	tc->snap_io = NULL;
}

struct track_snap *track_snap_create(struct track_c *tc, u64 limit)
{
	struct track_snap *snap;

	snap = kzalloc(sizeof(*snap), GFP_KERNEL);
	if (!snap)
		return NULL;
	snap->tc = tc;
	snap->limit = limit;
	atomic64_set(&snap->bytes, 0);
	xa_init_flags(&snap->blocks, XA_FLAGS_LOCK_IRQ);
	return snap;
}

static void snap_free(struct track_snap *snap)
{
	unsigned long index;
	void *entry;

	xa_for_each(&snap->blocks, index, entry) {
		if (!xa_is_value(entry))
			kvfree(entry);
		cond_resched();
	}
	xa_destroy(&snap->blocks);
	kfree(snap);
}

/*
 * The freeze has built the frozen set: the view may use SNAP. Its writes
 * have preserved data since the new active set was published.
 */
void track_snap_start(struct track_c *tc, struct track_snap *snap)
{
	lockdep_assert_held(&tc->lock);
	snap->epoch = tc->frozen_epoch;
	snap->seq = ++tc->snap_seq;
	/* The set is complete before a reader can see it. */
	smp_store_release(&snap->frozen, tc->frozen);
	rcu_assign_pointer(tc->snap, snap);
	tc->snap_epoch = tc->frozen_epoch;
}

/*
 * End the snapshot and free its data: no write defers for it, no view read
 * uses it, and the writes deferred for it have gone on when this returns.
 * tc->snap_epoch is left for the caller: commit is refused while it names
 * the frozen epoch and there is no working snapshot.
 */
void track_snap_drop(struct track_c *tc)
{
	struct track_snap *snap;
	struct track_bitset *active;

	snap = rcu_dereference_protected(tc->snap, lockdep_is_held(&tc->lock));
	active = rcu_dereference_protected(tc->active,
					   lockdep_is_held(&tc->lock));
	if (!snap && !(active && rcu_access_pointer(active->snap)))
		return;
	if (!snap)
		snap = rcu_dereference_protected(active->snap,
						 lockdep_is_held(&tc->lock));
	RCU_INIT_POINTER(tc->snap, NULL);
	if (active)
		RCU_INIT_POINTER(active->snap, NULL);
	synchronize_rcu();
	flush_work(&tc->snap_work);
	snap_free(snap);
}

/* May the frozen epoch be committed? Not if its snapshot did not hold. */
bool track_snap_usable(struct track_c *tc)
{
	struct track_snap *snap;

	if (!tc->snap_epoch || tc->snap_epoch != tc->frozen_epoch)
		return true;
	snap = rcu_dereference_protected(tc->snap, lockdep_is_held(&tc->lock));
	return snap && !READ_ONCE(snap->failed);
}

/* Status: <snapshot: - | active | failed> <preserved bytes | -> <limit | -> */
void track_snap_status(struct track_c *tc, char *result, unsigned int maxlen,
		       ssize_t *szp)
{
	struct track_snap *snap;
	ssize_t sz = *szp;

	snap = rcu_dereference_protected(tc->snap, lockdep_is_held(&tc->lock));
	if (snap)
		DMEMIT(" %s %lld %llu", READ_ONCE(snap->failed) ?
		       "failed" : "active", atomic64_read(&snap->bytes),
		       snap->limit);
	else if (tc->snap_epoch && tc->snap_epoch == tc->frozen_epoch)
		DMEMIT(" failed - -");
	else
		DMEMIT(" - - -");
	*szp = sz;
}

/*
 *--------------------------------------------------------------
 * The view: track-view <track device>
 *--------------------------------------------------------------
 */
struct track_view {
	struct track_c *tc;		/* a reference, not an open device */
	struct dm_dev *origin;
	dev_t track_devt;
	sector_t start;			/* of the track device on the origin */
};

struct track_view_bio {
	sector_t offset;		/* of the read, in the track device */
	struct bvec_iter iter;		/* the read's data, as mapped */
	u64 seq;			/* the snapshot it was mapped under */
};

/*
 * Construct a view: track-view <track device>
 *
 * The track device is named by path or major:minor and is not opened: a
 * file system mounted on it holds it exclusively, and reading the frozen
 * image of a mounted file system is what the view is for. The view holds
 * a reference to the track target that is live on it, and opens only that
 * target's data device, which dm shares between the tables that use it
 * (as dm-snapshot shares its origin). A reload or removal of the track
 * device ends the view: its reads then fail with EIO.
 */
static int view_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct track_view *tv;
	char origin[16];
	dev_t devt;
	int r;

	if (argc != 1) {
		ti->error = "Invalid argument count: <track device>";
		return -EINVAL;
	}
	r = dm_devt_from_path(argv[0], &devt);
	if (r) {
		ti->error = "Cannot find the track device";
		return r;
	}
	tv = kzalloc(sizeof(*tv), GFP_KERNEL);
	if (!tv) {
		ti->error = "Cannot allocate view context";
		return -ENOMEM;
	}
	tv->track_devt = devt;
	tv->tc = track_get_by_devt(devt);
	if (!tv->tc) {
		ti->error = "Not a live track device";
		r = -EINVAL;
		goto bad;
	}
	mutex_lock(&tv->tc->lock);
	if (!track_ready(tv->tc)) {
		mutex_unlock(&tv->tc->lock);
		ti->error = "Not a live track device";
		r = -EINVAL;
		goto bad;
	}
	if (ti->begin || ti->len > tv->tc->ti->len) {
		mutex_unlock(&tv->tc->lock);
		ti->error = "The view must not be larger than the track device";
		r = -EINVAL;
		goto bad;
	}
	tv->start = tv->tc->start;
	strscpy(origin, tv->tc->dev->name, sizeof(origin));
	mutex_unlock(&tv->tc->lock);
	r = dm_get_device(ti, origin, BLK_OPEN_READ, &tv->origin);
	if (r) {
		ti->error = "Cannot open the track device's data device";
		goto bad;
	}

	ti->num_flush_bios = 1;
	ti->per_io_data_size = sizeof(struct track_view_bio);
	ti->private = tv;
	return 0;

bad:
	if (tv->tc)
		track_put(tv->tc);
	kfree(tv);
	return r;
}

static void view_dtr(struct dm_target *ti)
{
	struct track_view *tv = ti->private;

	dm_put_device(ti, tv->origin);
	track_put(tv->tc);
	kfree(tv);
}

static int view_map(struct dm_target *ti, struct bio *bio)
{
	struct track_view *tv = ti->private;
	struct track_c *tc = tv->tc;
	sector_t offset = dm_target_offset(ti, bio->bi_iter.bi_sector);
	enum track_state st = READ_ONCE(tc->state);
	struct track_view_bio *vb;
	struct track_snap *snap;
	u64 seq = 0;
	bool failed;

	if (op_is_write(bio_op(bio)) && bio_sectors(bio))
		return DM_MAPIO_KILL;
	if (st != TRACK_LIVE && st != TRACK_SUSPENDED)
		return DM_MAPIO_KILL;

	rcu_read_lock();
	snap = rcu_dereference(tc->snap);
	/* An epoch frozen in snapshot mode whose snapshot ended: no image. */
	failed = snap ? READ_ONCE(snap->failed) : !!READ_ONCE(tc->snap_epoch);
	if (snap)
		seq = snap->seq;
	rcu_read_unlock();
	if (failed)
		return DM_MAPIO_KILL;

	bio_set_dev(bio, tv->origin->bdev);
	bio->bi_iter.bi_sector = tv->start + offset;
	vb = dm_per_bio_data(bio, sizeof(*vb));
	vb->offset = offset;
	vb->iter = bio->bi_iter;
	vb->seq = seq;
	return DM_MAPIO_REMAPPED;
}

/* Copy LEN bytes from SRC into the data of BIO at SKIP bytes into ITER. */
static void copy_to_bio(struct bio *bio, struct bvec_iter iter,
			unsigned int skip, const char *src, unsigned int len)
{
	struct bvec_iter it;
	struct bio_vec bv;

	bio_advance_iter(bio, &iter, skip);
	iter.bi_size = len;
	__bio_for_each_segment(bv, bio, it, iter) {
		memcpy_to_bvec(&bv, src);
		src += bv.bv_len;
	}
}

/*
 * A view read completed: put the preserved data of its frozen blocks over
 * what it read, and mark the frozen blocks it read whole as read.
 */
static void snap_read_done(struct track_snap *snap, struct bio *bio,
			   struct track_view_bio *vb, blk_status_t *error)
{
	struct track_c *tc = snap->tc;
	sector_t start = vb->offset, end = start + (vb->iter.bi_size >> 9);
	sector_t per = 1U << tc->block_shift;
	u64 b, first = start >> tc->block_shift;
	u64 last = (end - 1) >> tc->block_shift;
	unsigned long flags;
	void *entry;

	xa_lock_irqsave(&snap->blocks, flags);
	if (snap->failed) {
		*error = BLK_STS_IOERR;
		goto out;
	}
	for (b = first; b <= last; b++) {
		sector_t bs = b << tc->block_shift, be = bs + per;
		sector_t lo = max(bs, start), hi = min(be, end);

		if (!track_bitset_test(snap->frozen, b))
			continue;
		entry = xa_load(&snap->blocks, b);
		if (entry && !xa_is_value(entry)) {
			copy_to_bio(bio, vb->iter, (lo - start) << 9,
				    entry + ((lo - bs) << 9), (hi - lo) << 9);
		} else if (!entry && lo == bs && hi == be &&
			   xa_is_err(__xa_store(&snap->blocks, b, SNAP_READ,
						GFP_ATOMIC))) {
			snap->failed = true;
			*error = BLK_STS_IOERR;
			xa_unlock_irqrestore(&snap->blocks, flags);
			DMERR("%s: snapshot of epoch %llu failed: no memory to mark a block read",
			      snap_name(tc), snap->epoch);
			return;
		}
	}
out:
	xa_unlock_irqrestore(&snap->blocks, flags);
}

static int view_end_io(struct dm_target *ti, struct bio *bio,
		       blk_status_t *error)
{
	struct track_view *tv = ti->private;
	struct track_view_bio *vb;
	struct track_snap *snap;

	if (op_is_write(bio_op(bio)) || *error)
		return DM_ENDIO_DONE;
	vb = dm_per_bio_data(bio, sizeof(*vb));
	if (!vb->iter.bi_size || !vb->seq)
		return DM_ENDIO_DONE;

	rcu_read_lock();
	snap = rcu_dereference(tv->tc->snap);
	if (snap && snap->seq == vb->seq)
		snap_read_done(snap, bio, vb, error);
	else
		*error = BLK_STS_IOERR;	/* its snapshot ended meanwhile */
	rcu_read_unlock();
	return DM_ENDIO_DONE;
}

static void view_status(struct dm_target *ti, status_type_t type,
			unsigned int status_flags, char *result,
			unsigned int maxlen)
{
	struct track_view *tv = ti->private;
	ssize_t sz = 0;

	switch (type) {
	case STATUSTYPE_INFO:
		*result = '\0';
		break;
	case STATUSTYPE_TABLE:
		DMEMIT("%u:%u", MAJOR(tv->track_devt), MINOR(tv->track_devt));
		break;
	case STATUSTYPE_IMA:
		*result = '\0';
		break;
	}
}

static int view_iterate_devices(struct dm_target *ti,
				iterate_devices_callout_fn fn, void *data)
{
	struct track_view *tv = ti->private;

	return fn(ti, tv->origin, tv->start, ti->len, data);
}

static struct target_type view_target = {
	.name = "track-view",
	.version = {1, 1, 0},
	.features = DM_TARGET_SINGLETON,
	.module = THIS_MODULE,
	.ctr = view_ctr,
	.dtr = view_dtr,
	.map = view_map,
	.end_io = view_end_io,
	.status = view_status,
	.iterate_devices = view_iterate_devices,
};

int track_view_register(void)
{
	return dm_register_target(&view_target);
}

void track_view_unregister(void)
{
	dm_unregister_target(&view_target);
}
