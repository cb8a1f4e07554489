// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-track snapshot mode: "freeze snapshot" keeps the frozen epoch readable
 * as it was at the freeze, through a read-only "track-view" target.
 *
 * While the snapshot lasts, a write to a block of the frozen set that the
 * view has not read yet is held back while the block's content is read
 * into memory (preserved); blocks outside the frozen set, and frozen
 * blocks the view has read, are never copied. The write that first needs
 * a block starts its read itself, asynchronously, from map: the reads of
 * writes in flight together run together. Writes to the block that come
 * meanwhile wait for the same read. When it completes, a worker publishes
 * the data and lets the waiting writes go on. The view reads the origin
 * and, on completion, copies preserved data over what it read: a block
 * that a write preserved while the read was in flight is then still the
 * freeze-time block. A block whole in a completed read is marked read
 * under the same lock that a preservation takes to publish its data, so
 * either the read saw the old data (the writes wait until the data is
 * published, and a preservation still running when the read completes
 * is told it need not keep it) or the preserved data replaces what it saw.
 *
 * Memory is bounded: when the preserved data would exceed the limit, it
 * goes to the COW device of the table, if there is one, into slots of one
 * block handed out in order and never reused while the snapshot lasts;
 * the worker writes the slot before it publishes it. When that is full
 * too, or memory or an I/O fails, the snapshot fails.
 * The view then fails every read and "commit" is refused, so the copier
 * aborts the epoch and the blocks stay dirty; application writes go on,
 * never failed. A view read that covers a block preserved on the COW
 * device is finished by a worker, which reads the slot.
 */
#include "dm-track.h"

#include <linux/dm-io.h>
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>
#include <linux/wait.h>
#include <linux/xarray.h>

/*
 * A frozen block the view has read whole: no longer preserved. A block
 * preserved on the COW device is xa_mk_value(slot + 1); one preserved in
 * memory points to its data. A block being preserved points to its
 * struct snap_pend and carries SNAP_PENDING; only under the xa_lock of
 * the blocks are the two seen together.
 */
#define SNAP_READ		xa_mk_value(0)
#define SNAP_PENDING		XA_MARK_1

/* Preservation reads a write may start itself; the rest go to the worker. */
#define SNAP_MAP_READS		4

struct track_snap {
	struct track_c *tc;
	/* The frozen set; NULL while the freeze builds it: all blocks count. */
	struct track_bitset *frozen;
	struct xarray blocks;		/* block -> preserved data, or SNAP_READ */
	bool failed;			/* set under the xa_lock of blocks */
	u64 epoch;
	u64 seq;
	u64 limit;			/* bytes of preserved data in memory */
	atomic64_t bytes;		/* in memory, or being read for it */
	/* On the COW device: slots of one block, handed out in order. */
	u64 cow_slots;			/* 0: no COW device */
	atomic64_t cow_next;
	atomic64_t cow_bytes;
	/*
	 * Writes being mapped for it, preservations in flight and view reads
	 * finishing with COW data: the snapshot ends when none is left.
	 */
	atomic_t users;
};

/* A write waiting for the preservation of one of its blocks. */
struct snap_waiter {
	struct snap_waiter *next;
	struct bio *bio;
};

/*
 * The preservation of one block: a read of its freeze-time data from the
 * origin (then, past the memory limit, a write of it to a COW slot), and
 * the writes to the block that wait for it. The first write to need the
 * block starts it; the writes that come while it runs join it.
 */
struct snap_pend {
	struct track_snap *snap;
	u64 block;
	void *data;
	u64 slot;			/* on the COW device, or U64_MAX */
	bool started;			/* the read was issued */
	bool held;			/* counted in the snapshot's bytes */
	bool viewed;			/* the view read it whole meanwhile */
	blk_status_t status;
	const char *why;		/* why it failed */
	struct snap_waiter *waiters;	/* under the xa_lock of blocks */
	struct snap_waiter first;
	struct work_struct work;
};

static bool snap_is_cow(void *entry)
{
	return xa_is_value(entry) && entry != SNAP_READ;
}

static const char *snap_name(struct track_c *tc)
{
	return dm_device_name(dm_table_get_md(tc->ti->table));
}

static unsigned int snap_block_bytes(struct track_c *tc)
{
	return 512U << tc->block_shift;
}

static void snap_put(struct track_snap *snap)
{
	struct track_c *tc = snap->tc;

	/* tc outlives the snapshot, which may be freed once this drops. */
	if (atomic_dec_and_test(&snap->users))
		wake_up(&tc->snap_wait);
}

/* Mark the snapshot failed; under the xa_lock of its blocks. */
static bool __snap_fail(struct track_snap *snap)
{
	bool first = !snap->failed;

	WRITE_ONCE(snap->failed, true);
	return first;
}

static void snap_fail_log(struct track_snap *snap, const char *why)
{
	DMERR("%s: snapshot of epoch %llu failed: %s; abort the epoch (no write is lost)",
	      snap_name(snap->tc), snap->epoch, why);
}

static void snap_fail(struct track_snap *snap, const char *why)
{
	unsigned long flags;
	bool first;

	xa_lock_irqsave(&snap->blocks, flags);
	first = __snap_fail(snap);
	xa_unlock_irqrestore(&snap->blocks, flags);
	if (first)
		snap_fail_log(snap, why);
}

/*
 * May a write to FIRST..LAST have to wait for a preservation? Under RCU.
 * Only a block read by the view or preserved on the COW device is sure
 * not to: a pointer may be a preservation still running.
 */
static bool snap_needs(struct track_snap *snap, u64 first, u64 last)
{
	/* Pairs with track_snap_start(): a set, then the whole set. */
	struct track_bitset *frozen = smp_load_acquire(&snap->frozen);
	u64 b;

	for (b = first; b <= last; b++) {
		if (frozen && !track_bitset_test(frozen, b))
			continue;
		if (!xa_is_value(xa_load(&snap->blocks, b)))
			return true;
	}
	return false;
}

/*
 * The snapshot whose preservations a write to TB's blocks may have to
 * wait for, with a reference that keeps it, or NULL. Under RCU.
 */
struct track_snap *track_snap_get(struct track_snap *snap,
				  struct track_bio *tb)
{
	if (!snap || READ_ONCE(snap->failed) ||
	    !snap_needs(snap, tb->first, tb->last))
		return NULL;
	/* track_snap_drop() waits for it after an RCU grace period. */
	atomic_inc(&snap->users);
	return snap;
}

/* The sectors of BLOCK: a whole block, or less for the last one. */
static sector_t snap_block_sectors(struct track_c *tc, u64 block)
{
	sector_t pos = block << tc->block_shift;

	return min_t(sector_t, 1U << tc->block_shift, tc->ti->len - pos);
}

/*
 * Read or write COUNT sectors of BDEV at SECTOR from or into BUF; with FN,
 * asynchronously: FN is called with CONTEXT when it is done, maybe in
 * interrupt context.
 */
static int snap_io(struct track_c *tc, blk_opf_t opf, struct block_device *bdev,
		   sector_t sector, sector_t count, void *buf,
		   io_notify_fn fn, void *context)
{
	struct dm_io_region where = {
		.bdev = bdev,
		.sector = sector,
		.count = count,
	};
	struct dm_io_request req = {
		.bi_opf = opf | REQ_SYNC,
		.notify.fn = fn,
		.notify.context = context,
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

static void snap_pend_free(struct snap_pend *pend)
{
	if (!pend)
		return;
	kvfree(pend->data);
	kfree(pend);
}

/* The preservation read is done; maybe in interrupt context. */
static void snap_pend_read_done(unsigned long error, void *context)
{
	struct snap_pend *pend = context;

	if (error) {
		pend->status = BLK_STS_IOERR;
		pend->why = "reading a block to preserve failed";
	}
	queue_work(pend->snap->tc->snap_wq, &pend->work);
}

static void snap_pend_start(struct snap_pend *pend)
{
	struct track_c *tc = pend->snap->tc;

	pend->started = true;
	if (pend->status) {
		queue_work(tc->snap_wq, &pend->work);
		return;
	}
	/* On an error, dm_io() has called snap_pend_read_done() too. */
	snap_io(tc, REQ_OP_READ, tc->dev->bdev,
		tc->start + (pend->block << tc->block_shift),
		snap_block_sectors(tc, pend->block), pend->data,
		snap_pend_read_done, pend);
}

/*
 * A preservation's read is done (or it failed before): write it to its COW
 * slot, if it has one, publish it, and let the writes that waited for it
 * go on. A write waiting for several blocks goes on after the last one.
 * A preservation that failed fails the snapshot, never the writes.
 */
static void snap_pend_work(struct work_struct *work)
{
	struct snap_pend *pend = container_of(work, struct snap_pend, work);
	struct track_snap *snap = pend->snap;
	struct track_c *tc = snap->tc;
	unsigned int bytes = snap_block_bytes(tc);
	unsigned int noio = memalloc_noio_save();
	struct snap_waiter *w, *next;
	bool cow = pend->slot != U64_MAX;
	bool first = false;
	void *entry;

	if (!pend->started) {
		/* Started by the worker: see SNAP_MAP_READS. */
		snap_pend_start(pend);
		memalloc_noio_restore(noio);
		return;
	}
	/* A slot is never reused while the snapshot lasts: no need to wait. */
	if (!pend->status && cow && !READ_ONCE(pend->viewed) &&
	    snap_io(tc, REQ_OP_WRITE, tc->cow_dev->bdev,
		    pend->slot << tc->block_shift,
		    snap_block_sectors(tc, pend->block), pend->data,
		    NULL, NULL)) {
		pend->status = BLK_STS_IOERR;
		pend->why = "writing to the COW device failed";
	}

	xa_lock_irq(&snap->blocks);
	if (pend->status)
		first = __snap_fail(snap);
	if (snap->failed)
		entry = NULL;
	else if (pend->viewed)
		entry = SNAP_READ;
	else if (cow)
		entry = xa_mk_value(pend->slot + 1);
	else
		entry = pend->data;
	__xa_clear_mark(&snap->blocks, pend->block, SNAP_PENDING);
	/* Replaces an entry in place: never allocates. */
	if (entry)
		__xa_store(&snap->blocks, pend->block, entry, GFP_NOWAIT);
	else
		__xa_erase(&snap->blocks, pend->block);
	w = pend->waiters;
	pend->waiters = NULL;
	xa_unlock_irq(&snap->blocks);
	if (first)
		snap_fail_log(snap, pend->why);

	if (entry && entry == pend->data)
		pend->data = NULL;	/* now the snapshot's */
	else if (pend->held)
		atomic64_sub(bytes, &snap->bytes);
	if (snap_is_cow(entry))
		atomic64_add(bytes, &snap->cow_bytes);

	for (; w; w = next) {
		struct track_bio *tb = dm_per_bio_data(w->bio, sizeof(*tb));
		struct bio *bio = w->bio;

		next = w->next;
		if (w != &pend->first)
			kfree(w);
		if (atomic_dec_and_test(&tb->snap_waits))
			track_write_continue(tc, bio, tb);
	}
	snap_pend_free(pend);
	snap_put(snap);
	memalloc_noio_restore(noio);
}

/*
 * A new preservation of BLOCK; its memory is taken before the block is
 * known to need it, as it cannot be under the lock. NULL if there is none.
 */
static struct snap_pend *snap_pend_alloc(struct track_snap *snap, u64 block)
{
	struct snap_pend *pend;

	pend = kzalloc(sizeof(*pend), GFP_KERNEL | __GFP_NOWARN);
	if (!pend)
		return NULL;
	pend->data = kvmalloc(snap_block_bytes(snap->tc),
			      GFP_KERNEL | __GFP_NOWARN);
	if (!pend->data) {
		kfree(pend);
		return NULL;
	}
	pend->snap = snap;
	pend->block = block;
	pend->slot = U64_MAX;
	INIT_WORK(&pend->work, snap_pend_work);
	return pend;
}

/*
 * Room for a new preservation: memory up to the limit, then a COW slot.
 * False, with the reason, when there is none: the snapshot fails.
 */
static bool snap_pend_reserve(struct snap_pend *pend, const char **why)
{
	struct track_snap *snap = pend->snap;
	unsigned int bytes = snap_block_bytes(snap->tc);

	if (atomic64_add_return(bytes, &snap->bytes) <= snap->limit) {
		pend->held = true;
		return true;
	}
	atomic64_sub(bytes, &snap->bytes);
	if (!snap->cow_slots) {
		*why = "the preserved data reached the limit";
		return false;
	}
	pend->slot = atomic64_inc_return(&snap->cow_next) - 1;
	if (pend->slot >= snap->cow_slots) {
		*why = "the COW device is full";
		return false;
	}
	return true;
}

enum snap_wait {
	SNAP_WAIT_NONE,		/* the block needs nothing (any more) */
	SNAP_WAIT_JOINED,	/* the write waits for a running preservation */
	SNAP_WAIT_STARTED,	/* ... for a new one, to be started */
	SNAP_WAIT_NEED_PEND,	/* a new one is needed: allocate it */
	SNAP_WAIT_NEED_WAITER,	/* a running one: allocate a waiter */
	SNAP_WAIT_FAILED,
};

/*
 * Make the write BIO wait for the preservation of BLOCK, if it needs one:
 * join the one running, or start one with *PEND. Under the xa_lock.
 */
static enum snap_wait snap_wait_locked(struct track_snap *snap,
				       struct bio *bio, struct track_bio *tb,
				       u64 block, struct snap_pend **pend,
				       struct snap_waiter **waiter)
{
	struct snap_pend *p;
	void *entry;

	if (snap->failed)
		return SNAP_WAIT_NONE;
	entry = xa_load(&snap->blocks, block);
	if (entry && !xa_get_mark(&snap->blocks, block, SNAP_PENDING))
		return SNAP_WAIT_NONE;
	if (entry) {
		if (!*waiter)
			return SNAP_WAIT_NEED_WAITER;
		p = entry;
		(*waiter)->bio = bio;
		(*waiter)->next = p->waiters;
		p->waiters = *waiter;
		*waiter = NULL;
		atomic_inc(&tb->snap_waits);
		return SNAP_WAIT_JOINED;
	}
	if (!*pend)
		return SNAP_WAIT_NEED_PEND;
	p = *pend;
	p->block = block;
	/* May drop the lock to allocate: then only if still absent. */
	entry = __xa_cmpxchg(&snap->blocks, block, NULL, p, GFP_NOIO);
	if (xa_is_err(entry)) {
		if (__snap_fail(snap))
			return SNAP_WAIT_FAILED;
		return SNAP_WAIT_NONE;
	}
	if (entry)	/* came meanwhile: look again */
		return snap_wait_locked(snap, bio, tb, block, pend, waiter);
	__xa_set_mark(&snap->blocks, block, SNAP_PENDING);
	p->first.bio = bio;
	p->waiters = &p->first;
	atomic_inc(&tb->snap_waits);
	atomic_inc(&snap->users);
	return SNAP_WAIT_STARTED;
}

/*
 * Called by map for a write marked in an active set whose epoch has SNAP,
 * with a reference from track_snap_get(), which this drops: true when the
 * write waits for the preservation of the freeze-time data of some of its
 * blocks, and goes on when the last one is done. The first reads start
 * here, so that the reads of writes mapped together run together.
 */
bool track_snap_defer(struct track_snap *snap, struct bio *bio,
		      struct track_bio *tb)
{
	/* Pairs with track_snap_start(). */
	struct track_bitset *frozen = smp_load_acquire(&snap->frozen);
	unsigned int noio = memalloc_noio_save();
	struct snap_waiter *waiter = NULL;
	struct snap_pend *pend = NULL;
	const char *why = NULL;
	unsigned int reads = 0;
	enum snap_wait r;
	u64 b;

	atomic_set(&tb->snap_waits, 1);
	for (b = tb->first; b <= tb->last; b++) {
		if (frozen && !track_bitset_test(frozen, b))
			continue;
		cond_resched();
again:
		xa_lock_irq(&snap->blocks);
		r = snap_wait_locked(snap, bio, tb, b, &pend, &waiter);
		xa_unlock_irq(&snap->blocks);
		switch (r) {
		case SNAP_WAIT_NEED_PEND:
			pend = snap_pend_alloc(snap, b);
			if (pend)
				goto again;
			why = "out of memory for preserved data";
			break;
		case SNAP_WAIT_NEED_WAITER:
			waiter = kmalloc(sizeof(*waiter),
					 GFP_KERNEL | __GFP_NOWARN);
			if (waiter)
				goto again;
			why = "out of memory for a waiting write";
			break;
		case SNAP_WAIT_FAILED:
			snap_fail_log(snap, "out of memory for the block index");
			break;
		case SNAP_WAIT_STARTED:
			break;
		default:
			continue;
		}
		if (why) {
			snap_fail(snap, why);
			break;
		}
		if (r != SNAP_WAIT_STARTED)
			break;
		/* Published: its read, not yet started, ends it. */
		if (!snap_pend_reserve(pend, &why)) {
			pend->status = BLK_STS_IOERR;
			pend->why = why;
			why = NULL;
		}
		if (reads++ < SNAP_MAP_READS)
			snap_pend_start(pend);
		else
			queue_work(snap->tc->snap_wq, &pend->work);
		pend = NULL;
	}
	snap_pend_free(pend);
	kfree(waiter);
	memalloc_noio_restore(noio);
	snap_put(snap);
	return !atomic_dec_and_test(&tb->snap_waits);
}

int track_snap_init(struct track_c *tc)
{
	init_waitqueue_head(&tc->snap_wait);
	tc->snap_wq = alloc_workqueue("dm-track-snap", WQ_MEM_RECLAIM, 0);
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
	if (tc->cow_dev)
		snap->cow_slots = bdev_nr_sectors(tc->cow_dev->bdev) >>
				  tc->block_shift;
	atomic64_set(&snap->cow_next, 0);
	atomic64_set(&snap->cow_bytes, 0);
	atomic_set(&snap->users, 1);	/* its own, until it is dropped */
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
 * End the snapshot and free its data: no write waits for it, no view read
 * uses it, its preservations are done and the writes that waited for them
 * have gone on when this returns.
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
	/* Writes and view reads that found it took a reference under RCU. */
	synchronize_rcu();
	snap_put(snap);
	wait_event(tc->snap_wait, !atomic_read(&snap->users));
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

/*
 * Status: <snapshot: - | active | failed> <preserved bytes | -> <limit | ->
 * <preserved on the COW device | -> <COW device bytes | ->
 */
void track_snap_status(struct track_c *tc, char *result, unsigned int maxlen,
		       ssize_t *szp)
{
	struct track_snap *snap;
	ssize_t sz = *szp;
	s64 cow;

	snap = rcu_dereference_protected(tc->snap, lockdep_is_held(&tc->lock));
	if (snap) {
		cow = atomic64_read(&snap->cow_bytes);
		DMEMIT(" %s %lld %llu", READ_ONCE(snap->failed) ?
		       "failed" : "active", atomic64_read(&snap->bytes) + cow,
		       snap->limit);
		if (snap->cow_slots)
			DMEMIT(" %lld %llu", cow, snap->cow_slots *
			       snap_block_bytes(tc));
		else
			DMEMIT(" - -");
	} else if (tc->snap_epoch && tc->snap_epoch == tc->frozen_epoch) {
		DMEMIT(" failed - - - -");
	} else {
		DMEMIT(" - - - - -");
	}
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
	/* A read that covers blocks preserved on the COW device. */
	bool cow_done;
	struct track_snap *snap;
	struct work_struct cow_work;
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
	vb->cow_done = false;
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
 * what it read, and mark the frozen blocks it read whole as read. True if
 * some of them are preserved on the COW device: the caller has that read
 * by snap_cow_read().
 */
static bool snap_read_done(struct track_snap *snap, struct bio *bio,
			   struct track_view_bio *vb, blk_status_t *error)
{
	struct track_c *tc = snap->tc;
	sector_t start = vb->offset, end = start + (vb->iter.bi_size >> 9);
	sector_t per = 1U << tc->block_shift;
	u64 b, first = start >> tc->block_shift;
	u64 last = (end - 1) >> tc->block_shift;
	unsigned long flags;
	bool cow = false;
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
		if (entry && xa_get_mark(&snap->blocks, b, SNAP_PENDING)) {
			/*
			 * Its writes wait: what the read saw is the freeze-
			 * time data, which the view need not keep if whole.
			 */
			if (lo == bs && hi == be)
				((struct snap_pend *)entry)->viewed = true;
		} else if (entry && !xa_is_value(entry)) {
			copy_to_bio(bio, vb->iter, (lo - start) << 9,
				    entry + ((lo - bs) << 9), (hi - lo) << 9);
		} else if (snap_is_cow(entry)) {
			cow = true;
		} else if (!entry && lo == bs && hi == be &&
			   xa_is_err(__xa_store(&snap->blocks, b, SNAP_READ,
						GFP_ATOMIC))) {
			snap->failed = true;
			*error = BLK_STS_IOERR;
			xa_unlock_irqrestore(&snap->blocks, flags);
			DMERR("%s: snapshot of epoch %llu failed: no memory to mark a block read",
			      snap_name(tc), snap->epoch);
			return false;
		}
	}
out:
	xa_unlock_irqrestore(&snap->blocks, flags);
	return cow && !*error;
}

/*
 * Finish a view read with the data of its blocks preserved on the COW
 * device. A slot, once in the index, holds its block until the snapshot
 * ends, and the snapshot waits for this (users) before it ends.
 */
static void snap_cow_read(struct work_struct *work)
{
	struct track_view_bio *vb = container_of(work, struct track_view_bio,
						 cow_work);
	struct bio *bio = dm_bio_from_per_bio_data(vb, sizeof(*vb));
	struct track_snap *snap = vb->snap;
	struct track_c *tc = snap->tc;
	sector_t start = vb->offset, end = start + (vb->iter.bi_size >> 9);
	u64 b, first = start >> tc->block_shift;
	u64 last = (end - 1) >> tc->block_shift;
	unsigned int noio = memalloc_noio_save();
	void *buf, *entry;

	buf = kvmalloc(snap_block_bytes(tc), GFP_KERNEL);
	if (!buf) {
		snap_fail(snap, "out of memory to read the COW device");
		bio->bi_status = BLK_STS_IOERR;
		goto out;
	}
	for (b = first; b <= last; b++) {
		sector_t bs = b << tc->block_shift;
		sector_t lo = max(bs, start);
		sector_t hi = min(bs + (1U << tc->block_shift), end);
		u64 slot;

		entry = xa_load(&snap->blocks, b);
		if (!snap_is_cow(entry))
			continue;
		slot = xa_to_value(entry) - 1;
		if (snap_io(tc, REQ_OP_READ, tc->cow_dev->bdev,
			    slot << tc->block_shift, snap_block_sectors(tc, b),
			    buf, NULL, NULL)) {
			snap_fail(snap, "reading the COW device failed");
			bio->bi_status = BLK_STS_IOERR;
			break;
		}
		copy_to_bio(bio, vb->iter, (lo - start) << 9,
			    buf + ((lo - bs) << 9), (hi - lo) << 9);
	}
	kvfree(buf);
out:
	if (READ_ONCE(snap->failed))
		bio->bi_status = BLK_STS_IOERR;
	snap_put(snap);
	memalloc_noio_restore(noio);
	vb->cow_done = true;
	bio_endio(bio);
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
	if (!vb->iter.bi_size || !vb->seq || vb->cow_done)
		return DM_ENDIO_DONE;

	rcu_read_lock();
	snap = rcu_dereference(tv->tc->snap);
	if (snap && snap->seq == vb->seq) {
		if (snap_read_done(snap, bio, vb, error)) {
			/* The snapshot waits for it. */
			atomic_inc(&snap->users);
			vb->snap = snap;
			INIT_WORK(&vb->cow_work, snap_cow_read);
			queue_work(tv->tc->snap_wq, &vb->cow_work);
			rcu_read_unlock();
			return DM_ENDIO_INCOMPLETE;
		}
	} else {
		*error = BLK_STS_IOERR;	/* its snapshot ended meanwhile */
	}
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
