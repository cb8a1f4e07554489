// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-track: keeping the dirty set on a metadata device.
 *
 * Layout, in 4 KiB metadata blocks:
 *
 *   0                 superblock
 *   intent_start      write-intent map: one bit per region
 *   table_start       one entry per leaf: clean, full, or bitmap + crc32c
 *   slots_start      one block per leaf, used when its entry says bitmap
 *
 * A checkpoint writes the union of the active and frozen sets (the leaves,
 * a flush, the table), then the intent map, then the superblock. On a clean
 * suspend the intent map is empty and the superblock says so; loading it
 * gives back exactly the set. While the device is live, a write may be
 * issued only once the intent bit of every region it touches is on disk;
 * bits are set in batches by a worker and cleared only by the next
 * checkpoint, for regions not written since it began. After a crash the
 * last checkpoint's set plus every region in the intent map is dirty, which
 * covers every write that may have reached the disk since.
 *
 * A table entry or slot that fails its checksum, or a superblock that is
 * corrupt or has another geometry, makes the blocks it covers dirty.
 *
 * When a metadata write fails, the stored state can no longer cover every
 * write, so it is marked invalid (every block dirty on the next load)
 * before any write that was waiting for its intent bits is let through;
 * from then on the target tracks in memory only. If even that write fails,
 * the failure is not recorded and the stored state may look valid: writes
 * to regions whose intent bit is on disk go on (a crash finds them), and
 * every other write fails with an I/O error while the invalid superblock
 * is retried, once a second, until it sticks. Failing closed like this is
 * what keeps a flapping metadata path from losing a write at the next
 * crash.
 */
#include "dm-track.h"

#include <linux/crc32c.h>
#include <linux/dm-io.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#define TRACK_MD_MAGIC		0x6b727464	/* "dtrk" */
#define TRACK_MD_VERSION	1
#define TRACK_MD_BLOCK		4096
#define TRACK_MD_BLOCK_SECTORS	(TRACK_MD_BLOCK >> SECTOR_SHIFT)
#define TRACK_MD_CSUM_SEED	0x1e57ed41

#define TRACK_MD_CLEAN		BIT(0)		/* suspended cleanly */
#define TRACK_MD_INVALID	BIT(1)		/* do not trust: all dirty */

/* A slot: the blocks one metadata block of bitmap describes. */
#define TRACK_MD_SLOT_BITS	(TRACK_MD_BLOCK * BITS_PER_BYTE)
#define TRACK_MD_SLOT_LEAVES	(TRACK_MD_SLOT_BITS / TRACK_LEAF_BITS)

#define TRACK_MD_MAX_REGIONS	1048576U
#define TRACK_MD_MIN_REGION	8192		/* sectors: 4 MiB */

/* Slots written in one I/O. */
#define TRACK_MD_BATCH		64

/* After a failure that could not be recorded: retry this often. */
#define TRACK_MD_RETRY		HZ

struct track_disk_sb {
	__le32 csum;		/* crc32c of the rest of the block */
	__le32 magic;
	__le32 version;
	__le32 flags;
	u8 uuid[16];		/* id of the tracking state */
	__le64 nr_blocks;
	__le32 block_sectors;
	__le32 region_sectors;
	__le64 epoch;		/* the active epoch when written */
	__le64 committed_epoch;
	__le64 generation;	/* checkpoints written */
	__le64 intent_start;
	__le64 intent_blocks;
	__le64 table_start;
	__le64 table_blocks;
	__le64 slots_start;
	__le64 nr_slots;
} __packed;

enum track_disk_slot_state {
	TRACK_DISK_SLOT_CLEAN = 0,
	TRACK_DISK_SLOT_FULL = 1,
	TRACK_DISK_SLOT_BITMAP = 2,
};

struct track_disk_slot {
	__le32 state;
	__le32 csum;		/* crc32c of the slot block, for BITMAP */
} __packed;

#define TRACK_MD_TABLE_ENTRIES \
	((TRACK_MD_BLOCK - 8) / sizeof(struct track_disk_slot))

struct track_disk_table {
	__le32 csum;		/* crc32c of the rest of the block */
	__le32 index;		/* which table block this is */
	struct track_disk_slot slots[TRACK_MD_TABLE_ENTRIES];
} __packed;

struct track_metadata {
	struct track_c *tc;
	struct dm_dev *dev;
	struct dm_io_client *io;
	const char *name;
	enum track_persist state;
	bool invalid_on_disk;		/* the failure is recorded on disk */

	u64 nr_blocks;
	unsigned int block_sectors;
	unsigned int region_sectors;
	unsigned int region_shift;	/* log2 of blocks per region */
	u64 nr_regions;
	u64 intent_start, intent_blocks;
	u64 table_start, table_blocks;
	u64 slots_start, nr_slots;
	u64 generation;

	/*
	 * Write intent. intent_disk: regions whose bit is on disk, so a
	 * write to them may be issued; intent_since: regions written since
	 * the last checkpoint began; intent_want: regions waiting for the
	 * worker; deferred: the bios waiting with them. All under @lock.
	 */
	spinlock_t lock;
	unsigned long *intent_disk;
	unsigned long *intent_since;
	unsigned long *intent_prev;	/* since, of the interval before */
	bool intent_known;		/* the disk holds intent_disk */
	unsigned long *intent_want;
	unsigned long *intent_writing;
	struct bio_list deferred;
	struct work_struct work;
	struct workqueue_struct *wq;

	/*
	 * Writes in flight, counted per checkpoint generation: a checkpoint
	 * waits for those admitted before it began to complete, so that
	 * their completion marks are in the set it writes.
	 */
	unsigned int gen;
	atomic_t inflight[2];
	wait_queue_head_t wait;

	/* After a failed write: mark the stored state invalid. */
	struct delayed_work fail_work;
	struct track_disk_sb *fail_sb;

	/* Used by the holder of io_lock only. */
	struct mutex io_lock;		/* one writer of the intent map */
	unsigned long *intent_scratch;
	__le64 *intent_buf;		/* the intent map as on disk */

	/* Used under the target's lock (checkpoint, load). */
	struct track_disk_table *table_buf;	/* the table as on disk */
	bool table_known;		/* table_buf is what the disk holds */
	unsigned long *table_dirty;	/* table blocks to write */
	void *buf;			/* TRACK_MD_BATCH blocks */
	unsigned long *slot_tmp;
	struct track_disk_sb *sb;
};

static u32 md_csum(const void *data, size_t len)
{
	return crc32c(TRACK_MD_CSUM_SEED, data, len);
}

static int md_io(struct track_metadata *md, blk_opf_t opf, u64 block,
		 unsigned int nr, void *data, bool vmem)
{
	struct dm_io_region where = {
		.bdev = md->dev->bdev,
		.sector = block * TRACK_MD_BLOCK_SECTORS,
		.count = nr * TRACK_MD_BLOCK_SECTORS,
	};
	struct dm_io_request req = {
		.bi_opf = opf,
		.mem.type = vmem ? DM_IO_VMA : DM_IO_KMEM,
		.client = md->io,
	};

	if (vmem)
		req.mem.ptr.vma = data;
	else
		req.mem.ptr.addr = data;
	return dm_io(&req, 1, &where, NULL, IOPRIO_DEFAULT);
}

/*
 * A metadata write failed: carry on in memory, and say so loudly. Writes
 * waiting for their intent bits keep waiting until fail_worker() has
 * marked the stored state invalid; until then a crash must still find
 * them covered.
 */
static void md_fail(struct track_metadata *md, const char *what, int r)
{
	spin_lock_irq(&md->lock);
	if (md->state != TRACK_PERSIST_OK) {
		spin_unlock_irq(&md->lock);
		return;
	}
	WRITE_ONCE(md->state, TRACK_PERSIST_FAILING);
	spin_unlock_irq(&md->lock);

	DMERR("%s: metadata %s failed (%d): tracking in memory only",
	      md->name, what, r);
	mod_delayed_work(md->wq, &md->fail_work, 0);
}

enum track_persist track_metadata_state(struct track_metadata *md)
{
	return READ_ONCE(md->state);
}

sector_t track_metadata_default_region(struct track_c *tc)
{
	u64 blocks = roundup_pow_of_two(max_t(u64, 1,
			DIV_ROUND_UP_ULL(tc->nr_blocks, TRACK_MD_MAX_REGIONS)));
	u64 sectors = blocks << tc->block_shift;

	return max_t(u64, sectors, max(TRACK_MD_MIN_REGION,
				      1U << tc->block_shift));
}

/*
 *--------------------------------------------------------------
 * Write intent
 *--------------------------------------------------------------
 */

/* Regions [R0, R1] of a write to blocks FIRST..LAST. */
static void bio_regions(struct track_metadata *md, u64 first, u64 last,
			u64 *r0, u64 *r1)
{
	*r0 = first >> md->region_shift;
	*r1 = last >> md->region_shift;
}

static bool all_set(const unsigned long *map, u64 r0, u64 r1)
{
	return find_next_zero_bit(map, r1 + 1, r0) > r1;
}

/* Count a write in the current checkpoint generation. */
static void count_write(struct track_metadata *md, struct track_bio *tb)
{
	unsigned int gen;

	for (;;) {
		gen = READ_ONCE(md->gen);
		atomic_inc(&md->inflight[gen]);
		/* The count is visible before we look at gen again. */
		smp_mb__after_atomic();
		/* Pairs with smp_store_release() in the checkpoint. */
		if (smp_load_acquire(&md->gen) == gen)
			break;
		if (atomic_dec_and_test(&md->inflight[gen]))
			wake_up(&md->wait);
	}
	tb->gen = gen;
	tb->counted = true;
}

void track_metadata_write_done(struct track_c *tc, struct track_bio *tb)
{
	struct track_metadata *md = tc->md;

	if (atomic_dec_and_test(&md->inflight[tb->gen]))
		wake_up(&md->wait);
}

/*
 * Decide whether a write may go now: DM_MAPIO_REMAPPED if every region it
 * touches is recorded on disk, else DM_MAPIO_SUBMITTED with the bio queued
 * until the worker has written the missing bits.
 */
int track_metadata_admit(struct track_c *tc, struct bio *bio,
			 struct track_bio *tb)
{
	struct track_metadata *md = tc->md;
	unsigned long flags;
	bool ready = true;
	u64 r0, r1;

	if (READ_ONCE(md->state) == TRACK_PERSIST_FAILED)
		return DM_MAPIO_REMAPPED;

	count_write(md, tb);
	bio_regions(md, tb->first, tb->last, &r0, &r1);
	/* The marks of this write are visible before intent is checked. */
	smp_mb();
	/*
	 * intent_since before intent_disk: a bit in intent_since set after a
	 * checkpoint cleared intent_disk must not be seen with the old
	 * intent_disk. Pairs with md->lock around both updates.
	 */
	if (all_set(md->intent_since, r0, r1)) {
		smp_rmb();	/* intent_since before intent_disk, see above */
		if (all_set(md->intent_disk, r0, r1))
			return DM_MAPIO_REMAPPED;
	}

	spin_lock_irqsave(&md->lock, flags);
	if (md->state == TRACK_PERSIST_FAILED) {
		spin_unlock_irqrestore(&md->lock, flags);
		return DM_MAPIO_REMAPPED;
	}
	bitmap_set(md->intent_since, r0, r1 - r0 + 1);
	if (!all_set(md->intent_disk, r0, r1)) {
		/*
		 * While failing, fail_worker() releases it once the failure
		 * is recorded, or fails it if it cannot be.
		 */
		if (md->state == TRACK_PERSIST_OK)
			bitmap_set(md->intent_want, r0, r1 - r0 + 1);
		else if (md->state == TRACK_PERSIST_UNRECORDED)
			queue_delayed_work(md->wq, &md->fail_work,
					   TRACK_MD_RETRY);
		bio_list_add(&md->deferred, bio);
		ready = false;
	}
	spin_unlock_irqrestore(&md->lock, flags);

	if (ready)
		return DM_MAPIO_REMAPPED;
	if (READ_ONCE(md->state) == TRACK_PERSIST_OK)
		queue_work(md->wq, &md->work);
	return DM_MAPIO_SUBMITTED;
}

/* The on-disk image of MAP (nr_regions bits) into intent_buf. */
static void intent_image(struct track_metadata *md, const unsigned long *map)
{
	u64 *words = (u64 *)md->intent_buf;
	u64 i, n = md->intent_blocks * TRACK_MD_BLOCK / sizeof(u64);

	memset(words, 0, n * sizeof(u64));
	bitmap_to_arr64(words, map, md->nr_regions);
	for (i = 0; i < n; i++)
		md->intent_buf[i] = cpu_to_le64(words[i]);
}

/* Write blocks FIRST..LAST of the intent image, durable on return. */
static int intent_write(struct track_metadata *md, u64 first, u64 last)
{
	return md_io(md, REQ_OP_WRITE | REQ_SYNC | REQ_FUA,
		     md->intent_start + first, last - first + 1,
		     (char *)md->intent_buf + first * TRACK_MD_BLOCK, true);
}

/* Does intent block BLK hold a bit of intent_writing? */
static bool intent_block_changed(struct track_metadata *md, u64 blk)
{
	const u64 bits_per_block = TRACK_MD_BLOCK * BITS_PER_BYTE;
	u64 end = min(md->nr_regions, (blk + 1) * bits_per_block);

	return find_next_bit(md->intent_writing, end, blk * bits_per_block) <
	       end;
}

/*
 * Write the image of intent_scratch: the blocks that hold a bit of
 * intent_writing (the bits that changed), or all of it the first time.
 * Called with io_lock held.
 */
static int intent_write_changed(struct track_metadata *md)
{
	u64 b, first;
	int r;

	if (!md->intent_known)
		bitmap_fill(md->intent_writing, md->nr_regions);
	intent_image(md, md->intent_scratch);
	for (b = 0; b < md->intent_blocks; b++) {
		if (!intent_block_changed(md, b))
			continue;
		first = b;
		while (b + 1 < md->intent_blocks &&
		       intent_block_changed(md, b + 1))
			b++;
		r = intent_write(md, first, b);
		if (r)
			return r;
	}
	md->intent_known = true;
	return 0;
}

/*
 * Write the wanted intent bits, then release every deferred bio whose
 * regions are all on disk. Called with io_lock held.
 */
static void intent_flush(struct track_metadata *md)
{
	const u64 bits_per_block = TRACK_MD_BLOCK * BITS_PER_BYTE;
	struct bio_list ready, wait;
	u64 lo, hi, r0, r1;
	struct bio *bio;
	int r;

	spin_lock_irq(&md->lock);
	if (md->state != TRACK_PERSIST_OK ||
	    bitmap_empty(md->intent_want, md->nr_regions)) {
		spin_unlock_irq(&md->lock);
		return;
	}
	bitmap_copy(md->intent_writing, md->intent_want, md->nr_regions);
	bitmap_zero(md->intent_want, md->nr_regions);
	bitmap_or(md->intent_scratch, md->intent_disk, md->intent_writing,
		  md->nr_regions);
	spin_unlock_irq(&md->lock);

	intent_image(md, md->intent_scratch);
	lo = find_first_bit(md->intent_writing, md->nr_regions) /
	     bits_per_block;
	hi = find_last_bit(md->intent_writing, md->nr_regions) /
	     bits_per_block;
	r = intent_write(md, lo, hi);
	if (r) {
		md_fail(md, "write-intent update", r);
		return;
	}

	bio_list_init(&ready);
	bio_list_init(&wait);
	spin_lock_irq(&md->lock);
	bitmap_or(md->intent_disk, md->intent_disk, md->intent_writing,
		  md->nr_regions);
	while ((bio = bio_list_pop(&md->deferred))) {
		struct track_bio *tb = dm_per_bio_data(bio, sizeof(*tb));

		bio_regions(md, tb->first, tb->last, &r0, &r1);
		bio_list_add(all_set(md->intent_disk, r0, r1) ? &ready : &wait,
			     bio);
	}
	md->deferred = wait;
	spin_unlock_irq(&md->lock);

	while ((bio = bio_list_pop(&ready)))
		dm_submit_bio_remap(bio, NULL);
}

static void intent_worker(struct work_struct *ws)
{
	struct track_metadata *md = container_of(ws, struct track_metadata,
						 work);

	mutex_lock(&md->io_lock);
	intent_flush(md);
	mutex_unlock(&md->io_lock);
	/* More may have been wanted while we wrote. */
	spin_lock_irq(&md->lock);
	if (md->state == TRACK_PERSIST_OK &&
	    !bitmap_empty(md->intent_want, md->nr_regions))
		queue_work(md->wq, &md->work);
	spin_unlock_irq(&md->lock);
}

/*
 *--------------------------------------------------------------
 * Checkpoints
 *--------------------------------------------------------------
 */
static struct track_disk_slot *table_entry(struct track_metadata *md, u64 i)
{
	return &md->table_buf[i / TRACK_MD_TABLE_ENTRIES]
		.slots[i % TRACK_MD_TABLE_ENTRIES];
}

/* Blocks of a set that leaf INDEX covers. */
static unsigned int leaf_len(struct track_bitset *bs, u64 index)
{
	return min_t(u64, TRACK_LEAF_BITS,
		     bs->nr_blocks - index * TRACK_LEAF_BITS);
}

/* Slot bits as stored: little-endian 64-bit words. */
static void slot_to_disk(__le64 *dst, const unsigned long *bits)
{
	u64 *words = (u64 *)dst;
	unsigned int i;

	bitmap_to_arr64(words, bits, TRACK_MD_SLOT_BITS);
	for (i = 0; i < TRACK_MD_BLOCK / sizeof(u64); i++)
		dst[i] = cpu_to_le64(words[i]);
}

static void slot_from_disk(unsigned long *bits, __le64 *src)
{
	u64 *words = (u64 *)src;
	unsigned int i;

	for (i = 0; i < TRACK_MD_BLOCK / sizeof(u64); i++)
		words[i] = le64_to_cpu(src[i]);
	bitmap_from_arr64(bits, words, TRACK_MD_SLOT_BITS);
}

/* Slot S of ACTIVE | FROZEN into slot_tmp; returns the slot's state. */
static u32 slot_gather(struct track_metadata *md, struct track_bitset *active,
		       struct track_bitset *frozen, u64 s)
{
	const unsigned int words = TRACK_LEAF_BITS / BITS_PER_LONG;
	u64 first = s * TRACK_MD_SLOT_LEAVES, i;
	u64 last = min_t(u64, first + TRACK_MD_SLOT_LEAVES, active->nr_leaves);
	unsigned int full = 0, clean = 0, w;

	memset(md->slot_tmp, 0, TRACK_MD_BLOCK);
	for (i = first; i < last; i++) {
		unsigned long *la = track_bitset_leaf(active, i);
		unsigned long *lf = frozen ? track_bitset_leaf(frozen, i) : NULL;
		unsigned long *dst = md->slot_tmp + (i - first) * words;

		if (la == TRACK_LEAF_FULL || lf == TRACK_LEAF_FULL) {
			bitmap_set(dst, 0, leaf_len(active, i));
			full++;
		} else if (!la && !lf) {
			clean++;
		} else {
			for (w = 0; w < words; w++)
				dst[w] = (la ? READ_ONCE(la[w]) : 0) |
					 (lf ? lf[w] : 0);
		}
	}
	if (full == last - first)
		return TRACK_DISK_SLOT_FULL;
	if (clean == last - first)
		return TRACK_DISK_SLOT_CLEAN;
	return TRACK_DISK_SLOT_BITMAP;
}

/* The leaves of slot S of BS from BITS (or all full). */
static int slot_scatter(struct track_bitset *bs, u64 s,
			const unsigned long *bits)
{
	const unsigned int words = TRACK_LEAF_BITS / BITS_PER_LONG;
	u64 first = s * TRACK_MD_SLOT_LEAVES, i;
	u64 last = min_t(u64, first + TRACK_MD_SLOT_LEAVES, bs->nr_leaves);
	int r;

	for (i = first; i < last; i++) {
		const unsigned long *src = bits ? bits + (i - first) * words :
					   NULL;
		unsigned int len = leaf_len(bs, i);

		if (!src || bitmap_full(src, len))
			r = track_bitset_set_leaf(bs, i, NULL, true);
		else if (!bitmap_empty(src, len))
			r = track_bitset_set_leaf(bs, i, src, false);
		else
			r = 0;
		if (r)
			return r;
	}
	return 0;
}

/* Write the N slots batched in md->buf, from slot FIRST on. */
static int write_batch(struct track_metadata *md, u64 first, unsigned int n)
{
	if (!n)
		return 0;
	return md_io(md, REQ_OP_WRITE, md->slots_start + first, n, md->buf,
		     true);
}

/* Write the table blocks marked in table_dirty, durable on return. */
static int write_table(struct track_metadata *md, bool slots_written)
{
	blk_opf_t opf = REQ_OP_WRITE | REQ_SYNC | REQ_FUA;
	u64 t = 0, end;
	int r;

	/* The slots they describe are durable first. */
	if (slots_written)
		opf |= REQ_PREFLUSH;
	for (;;) {
		t = find_next_bit(md->table_dirty, md->table_blocks, t);
		if (t >= md->table_blocks)
			return 0;
		end = find_next_zero_bit(md->table_dirty, md->table_blocks, t);
		for (u64 i = t; i < end; i++) {
			struct track_disk_table *tb = &md->table_buf[i];

			tb->index = cpu_to_le32(i);
			tb->csum = cpu_to_le32(md_csum(&tb->index, TRACK_MD_BLOCK -
						       sizeof(tb->csum)));
		}
		r = md_io(md, opf, md->table_start + t, end - t,
			  &md->table_buf[t], true);
		if (r)
			return r;
		opf &= ~REQ_PREFLUSH;
		t = end;
	}
}

/*
 * Write ACTIVE | FROZEN where it differs from what is on disk: the slots
 * whose bitmap changed, then, once those are durable, the table blocks
 * that describe them. The table of the last checkpoint (or load) is kept
 * in table_buf, so the cost of a checkpoint follows what changed since,
 * not the size of the device: empty groups of leaves are skipped without
 * looking at them, and an unchanged slot is neither written nor its table
 * block. A slot is rewritten in place; a crash before its table block is
 * on disk leaves an entry whose checksum no longer matches, which loads
 * as all dirty.
 */
static int write_sets(struct track_metadata *md, struct track_bitset *active,
		      struct track_bitset *frozen)
{
	const u64 per_slot = TRACK_MD_SLOT_LEAVES;
	bool known = md->table_known, written = false;
	u64 s, first = 0, next = 0;
	unsigned int n = 0;
	int r;

	if (!known)
		memset(md->table_buf, 0, md->table_blocks * TRACK_MD_BLOCK);
	bitmap_zero(md->table_dirty, md->table_blocks);
	for (s = 0; s < md->nr_slots; s++) {
		struct track_disk_slot *e = table_entry(md, s);
		u32 state = TRACK_DISK_SLOT_CLEAN;
		__le64 *dst = NULL;
		__le32 csum = 0;

		if (s * per_slot >= next) {
			u64 leaf = s * per_slot;

			next = track_bitset_next_leaf(active, leaf);
			if (frozen)
				next = min(next,
					   track_bitset_next_leaf(frozen, leaf));
		}
		if (next < (s + 1) * per_slot)
			state = slot_gather(md, active, frozen, s);
		if (state == TRACK_DISK_SLOT_BITMAP) {
			if (n && (first + n != s || n == TRACK_MD_BATCH)) {
				r = write_batch(md, first, n);
				if (r)
					return r;
				written = true;
				n = 0;
			}
			if (!n)
				first = s;
			dst = md->buf + (size_t)n * TRACK_MD_BLOCK;
			slot_to_disk(dst, md->slot_tmp);
			csum = cpu_to_le32(md_csum(dst, TRACK_MD_BLOCK));
		}
		if (known && le32_to_cpu(e->state) == state &&
		    (state != TRACK_DISK_SLOT_BITMAP || e->csum == csum))
			continue;
		e->state = cpu_to_le32(state);
		e->csum = csum;
		__set_bit(s / TRACK_MD_TABLE_ENTRIES, md->table_dirty);
		if (dst)
			n++;
	}
	r = write_batch(md, first, n);
	if (r)
		return r;
	r = write_table(md, written || n);
	if (r) {
		md->table_known = false;
		return r;
	}
	md->table_known = true;
	return 0;
}

static void fill_sb(struct track_metadata *md, struct track_c *tc,
		    struct track_disk_sb *sb, u32 flags)
{
	memset(sb, 0, TRACK_MD_BLOCK);
	sb->magic = cpu_to_le32(TRACK_MD_MAGIC);
	sb->version = cpu_to_le32(TRACK_MD_VERSION);
	sb->flags = cpu_to_le32(flags);
	memcpy(sb->uuid, &tc->id, sizeof(sb->uuid));
	sb->nr_blocks = cpu_to_le64(md->nr_blocks);
	sb->block_sectors = cpu_to_le32(md->block_sectors);
	sb->region_sectors = cpu_to_le32(md->region_sectors);
	sb->epoch = cpu_to_le64(READ_ONCE(tc->epoch));
	sb->committed_epoch = cpu_to_le64(READ_ONCE(tc->committed_epoch));
	sb->generation = cpu_to_le64(++md->generation);
	sb->intent_start = cpu_to_le64(md->intent_start);
	sb->intent_blocks = cpu_to_le64(md->intent_blocks);
	sb->table_start = cpu_to_le64(md->table_start);
	sb->table_blocks = cpu_to_le64(md->table_blocks);
	sb->slots_start = cpu_to_le64(md->slots_start);
	sb->nr_slots = cpu_to_le64(md->nr_slots);
	sb->csum = cpu_to_le32(md_csum(&sb->magic, TRACK_MD_BLOCK -
				       sizeof(sb->csum)));
}

/*
 * Write the superblock; called with io_lock held, which orders it after
 * the invalid superblock of a failure (fail_worker) can never be
 * overwritten by a valid one.
 */
static int write_sb(struct track_metadata *md, struct track_c *tc,
		    u32 flags)
{
	lockdep_assert_held(&md->io_lock);
	if (READ_ONCE(md->state) != TRACK_PERSIST_OK)
		return -EIO;
	fill_sb(md, tc, md->sb, flags);
	return md_io(md, REQ_OP_WRITE | REQ_SYNC | REQ_FUA, 0, 1, md->sb,
		     false);
}

/* The superblock, taking io_lock: for callers that do not hold it. */
static int write_sb_locked(struct track_metadata *md, struct track_c *tc,
			   u32 flags)
{
	int r;

	mutex_lock(&md->io_lock);
	r = write_sb(md, tc, flags);
	mutex_unlock(&md->io_lock);
	return r;
}

/*
 * A metadata write failed: the stored set and intent map may be missing
 * writes from now on, so mark them invalid (every block dirty on the next
 * load), if the device still takes that one write.
 */
static void fail_worker(struct work_struct *ws)
{
	struct track_metadata *md = container_of(to_delayed_work(ws),
						 struct track_metadata,
						 fail_work);
	enum track_persist state;
	struct bio_list bios;
	struct bio *bio;
	int r;

	state = READ_ONCE(md->state);
	if (state == TRACK_PERSIST_OK || state == TRACK_PERSIST_FAILED)
		return;

	mutex_lock(&md->io_lock);
	fill_sb(md, md->tc, md->fail_sb, TRACK_MD_INVALID);
	r = md_io(md, REQ_OP_WRITE | REQ_SYNC | REQ_FUA, 0, 1, md->fail_sb,
		  false);
	mutex_unlock(&md->io_lock);
	if (!r)
		DMERR("%s: metadata marked invalid: the next load marks every block dirty",
		      md->name);
	else if (state == TRACK_PERSIST_FAILING)
		DMERR("%s: cannot mark the metadata invalid (%d): failing unrecorded writes",
		      md->name, r);

	/*
	 * Recorded: the writes that waited for intent bits may go, and no
	 * write needs one any more. Not recorded: they must not go, or a
	 * crash would load a set without them; fail them.
	 */
	spin_lock_irq(&md->lock);
	md->invalid_on_disk = !r;
	WRITE_ONCE(md->state, r ? TRACK_PERSIST_UNRECORDED :
				  TRACK_PERSIST_FAILED);
	bios = md->deferred;
	bio_list_init(&md->deferred);
	spin_unlock_irq(&md->lock);
	while ((bio = bio_list_pop(&bios))) {
		if (r)
			bio_io_error(bio);
		else
			dm_submit_bio_remap(bio, NULL);
	}
}

/*
 * After a failure: wait until it is recorded, and return 0 if the stored
 * state is marked invalid (resuming in memory only then loses nothing on
 * the next load), -EIO if it may still look valid, or 0 if nothing failed.
 */
int track_metadata_settle(struct track_metadata *md)
{
	if (READ_ONCE(md->state) == TRACK_PERSIST_OK)
		return 0;
	/* One more try, now. */
	mod_delayed_work(md->wq, &md->fail_work, 0);
	flush_delayed_work(&md->fail_work);
	return READ_ONCE(md->invalid_on_disk) ? 0 : -EIO;
}

/*
 * The target is suspended: no write is in flight or deferred. Let no
 * intent update that was still queued reach the device after this; a
 * reloaded table may own the metadata device next.
 */
void track_metadata_suspended(struct track_metadata *md)
{
	spin_lock_irq(&md->lock);
	bitmap_zero(md->intent_want, md->nr_regions);
	spin_unlock_irq(&md->lock);
	flush_workqueue(md->wq);
}

/*
 * The sets moved to a table that keeps them elsewhere (another metadata
 * device, or none): what this device holds is stale from now on, so a
 * later table using it again must find every block dirty.
 */
void track_metadata_invalidate(struct track_c *tc)
{
	struct track_metadata *md = tc->md;
	int r;

	r = write_sb_locked(md, tc, TRACK_MD_INVALID);
	if (r)
		DMERR("%s: cannot mark the old metadata invalid (%d): do not reuse it",
		      md->name, r);
}

/*
 * Write the dirty set and start a new write-intent generation. CLEAN: the
 * device is suspended, so nothing is in flight and the intent map can be
 * emptied. Called with the target's lock held.
 */
int track_metadata_checkpoint(struct track_c *tc, bool clean)
{
	struct track_metadata *md = tc->md;
	unsigned int old;
	int r;

	lockdep_assert_held(&tc->lock);
	if (READ_ONCE(md->state) != TRACK_PERSIST_OK)
		return -EIO;

	/*
	 * A new generation: writes admitted from now on record their regions
	 * in intent_since anew. Those admitted before mark their blocks again
	 * when they complete; wait for that, so the set written below has
	 * them even if their frozen epoch was just committed.
	 */
	spin_lock_irq(&md->lock);
	bitmap_copy(md->intent_prev, md->intent_since, md->nr_regions);
	bitmap_zero(md->intent_since, md->nr_regions);
	old = md->gen;
	/* intent_since is zero before anyone sees the new generation. */
	smp_store_release(&md->gen, !old);
	spin_unlock_irq(&md->lock);
	/* The new generation is visible before the old count is read. */
	smp_mb();
	wait_event(md->wait, !atomic_read(&md->inflight[old]));
	/*
	 * A clean checkpoint empties the intent map, so nothing may be in
	 * flight at all. After a suspend that holds already; a device that is
	 * removed without one gets here with its last writes still going.
	 */
	if (clean)
		wait_event(md->wait, !atomic_read(&md->inflight[!old]));

	r = write_sets(md, rcu_dereference_protected(tc->active,
						     lockdep_is_held(&tc->lock)),
		       tc->frozen);
	if (r) {
		md_fail(md, "checkpoint", r);
		return r;
	}

	/*
	 * The set on disk now has every block written before this checkpoint
	 * began, so their regions' intent bits may go. Regions written in
	 * this interval or the one before keep theirs: a region in steady use
	 * would otherwise make its next write wait for an intent write after
	 * every checkpoint. (A crash then finds the regions of two intervals
	 * dirty instead of one.) Clean: nothing can be in flight, all go, and
	 * the ones in use are remembered to be set again on resume.
	 */
	mutex_lock(&md->io_lock);
	spin_lock_irq(&md->lock);
	bitmap_copy(md->intent_writing, md->intent_disk, md->nr_regions);
	if (clean) {
		bitmap_copy(md->intent_prev, md->intent_disk, md->nr_regions);
		bitmap_zero(md->intent_disk, md->nr_regions);
	} else {
		bitmap_or(md->intent_scratch, md->intent_since,
			  md->intent_prev, md->nr_regions);
		bitmap_and(md->intent_disk, md->intent_disk,
			   md->intent_scratch, md->nr_regions);
	}
	bitmap_copy(md->intent_scratch, md->intent_disk, md->nr_regions);
	spin_unlock_irq(&md->lock);
	/* intent_writing: the bits that change, under io_lock like the rest. */
	bitmap_xor(md->intent_writing, md->intent_writing, md->intent_scratch,
		   md->nr_regions);
	r = intent_write_changed(md);
	if (!r)
		r = write_sb(md, tc, clean ? TRACK_MD_CLEAN : 0);
	mutex_unlock(&md->io_lock);
	if (r) {
		md_fail(md, "checkpoint", r);
		return r;
	}
	return 0;
}

/*
 * Resuming after a clean suspend: set the intent bits of the regions that
 * were in use again, in one write, before the superblock says the device
 * is in use; their first writes then need no intent write of their own.
 */
int track_metadata_resume(struct track_c *tc)
{
	struct track_metadata *md = tc->md;
	int r;

	lockdep_assert_held(&tc->lock);
	if (READ_ONCE(md->state) != TRACK_PERSIST_OK)
		return -EIO;

	mutex_lock(&md->io_lock);
	spin_lock_irq(&md->lock);
	bitmap_andnot(md->intent_writing, md->intent_prev, md->intent_disk,
		      md->nr_regions);
	bitmap_or(md->intent_scratch, md->intent_disk, md->intent_prev,
		  md->nr_regions);
	spin_unlock_irq(&md->lock);
	r = intent_write_changed(md);
	if (!r) {
		spin_lock_irq(&md->lock);
		bitmap_copy(md->intent_disk, md->intent_scratch,
			    md->nr_regions);
		spin_unlock_irq(&md->lock);
		r = write_sb(md, tc, 0);
	}
	mutex_unlock(&md->io_lock);
	if (r)
		md_fail(md, "resume", r);
	return r;
}

/* Only the superblock: mark the state clean or in use. */
int track_metadata_set_clean(struct track_c *tc, bool clean)
{
	struct track_metadata *md = tc->md;
	int r;

	lockdep_assert_held(&tc->lock);
	if (READ_ONCE(md->state) != TRACK_PERSIST_OK)
		return -EIO;

	r = write_sb_locked(md, tc, clean ? TRACK_MD_CLEAN : 0);
	if (r)
		md_fail(md, "superblock update", r);
	return r;
}

/*
 *--------------------------------------------------------------
 * Loading
 *--------------------------------------------------------------
 */

/* Replace the active set of a target that has not been resumed yet. */
static void install_set(struct track_c *tc, struct track_bitset *bs)
{
	struct track_bitset *old;

	mutex_lock(&tc->lock);
	old = rcu_replace_pointer(tc->active, bs, lockdep_is_held(&tc->lock));
	mutex_unlock(&tc->lock);
	track_bitset_destroy(old);
}

/* No usable state: every block is dirty. */
static int load_all_dirty(struct track_c *tc)
{
	struct track_bitset *bs = track_bitset_create(tc->nr_blocks, true);

	if (!bs)
		return -ENOMEM;
	install_set(tc, bs);
	return 0;
}

static const char *check_sb(struct track_metadata *md,
			    struct track_disk_sb *sb, u64 dev_blocks)
{
	u64 nr_blocks = le64_to_cpu(sb->nr_blocks);
	u64 region = le32_to_cpu(sb->region_sectors);
	u64 block = le32_to_cpu(sb->block_sectors);
	u64 nr_slots, nr_regions, end;

	if (le32_to_cpu(sb->magic) != TRACK_MD_MAGIC)
		return "has no dm-track superblock";
	if (le32_to_cpu(sb->csum) !=
	    md_csum(&sb->magic, TRACK_MD_BLOCK - sizeof(sb->csum)))
		return "superblock checksum is wrong";
	if (le32_to_cpu(sb->version) != TRACK_MD_VERSION)
		return "superblock has an unknown version";
	if (!block || !is_power_of_2(block) || !region ||
	    !is_power_of_2(region) || region < block)
		return "superblock has an invalid geometry";

	nr_slots = DIV_ROUND_UP_ULL(nr_blocks, TRACK_MD_SLOT_BITS);
	nr_regions = DIV_ROUND_UP_ULL(nr_blocks, region / block);
	end = le64_to_cpu(sb->slots_start) + le64_to_cpu(sb->nr_slots);
	if (le64_to_cpu(sb->nr_slots) != nr_slots ||
	    le64_to_cpu(sb->intent_blocks) !=
	    DIV_ROUND_UP_ULL(nr_regions, TRACK_MD_BLOCK * BITS_PER_BYTE) ||
	    le64_to_cpu(sb->table_blocks) !=
	    DIV_ROUND_UP_ULL(nr_slots, TRACK_MD_TABLE_ENTRIES) ||
	    end > dev_blocks)
		return "superblock layout does not add up";
	return NULL;
}

/* Read the stored sets into BS; *BAD counts slots that failed a check. */
static int read_sets(struct track_metadata *md, struct track_disk_sb *sb,
		     struct track_bitset *bs, bool keep, u64 *bad)
{
	u64 table_start = le64_to_cpu(sb->table_start);
	u64 table_blocks = le64_to_cpu(sb->table_blocks);
	u64 slots_start = le64_to_cpu(sb->slots_start);
	u64 nr_slots = le64_to_cpu(sb->nr_slots);
	struct track_disk_table *table;
	u64 s, t;
	int r;

	table = vmalloc(table_blocks * TRACK_MD_BLOCK);
	if (!table)
		return -ENOMEM;
	r = md_io(md, REQ_OP_READ, table_start, table_blocks, table, true);
	if (r)
		goto out;

	*bad = 0;
	for (t = 0; t < table_blocks; t++) {
		struct track_disk_table *tb = &table[t];
		bool ok = le32_to_cpu(tb->index) == t &&
			  le32_to_cpu(tb->csum) ==
			  md_csum(&tb->index, TRACK_MD_BLOCK - sizeof(tb->csum));

		for (s = t * TRACK_MD_TABLE_ENTRIES;
		     s < min(nr_slots, (t + 1) * TRACK_MD_TABLE_ENTRIES); s++) {
			struct track_disk_slot *e =
				&tb->slots[s % TRACK_MD_TABLE_ENTRIES];
			u32 state = le32_to_cpu(e->state);

			if (ok && state == TRACK_DISK_SLOT_CLEAN)
				continue;
			if (!ok || state != TRACK_DISK_SLOT_BITMAP) {
				*bad += !ok || state != TRACK_DISK_SLOT_FULL;
				r = slot_scatter(bs, s, NULL);
				if (r)
					goto out;
				continue;
			}
			r = md_io(md, REQ_OP_READ, slots_start + s, 1,
				  md->buf, true);
			if (r)
				goto out;
			if (le32_to_cpu(e->csum) !=
			    md_csum(md->buf, TRACK_MD_BLOCK)) {
				(*bad)++;
				r = slot_scatter(bs, s, NULL);
			} else {
				slot_from_disk(md->slot_tmp, md->buf);
				r = slot_scatter(bs, s, md->slot_tmp);
			}
			if (r)
				goto out;
		}
	}
	/* Same layout, nothing bad: the next checkpoint writes changes only. */
	if (keep && !*bad && table_blocks == md->table_blocks) {
		memcpy(md->table_buf, table, table_blocks * TRACK_MD_BLOCK);
		md->table_known = true;
	}
out:
	vfree(table);
	return r;
}

/* Mark the regions of the stored intent map dirty; returns how many. */
static int read_intent(struct track_metadata *md, struct track_disk_sb *sb,
		       struct track_bitset *bs, bool keep, u64 *regions)
{
	u64 blocks = le64_to_cpu(sb->intent_blocks);
	u64 region_blocks = le32_to_cpu(sb->region_sectors) /
			    le32_to_cpu(sb->block_sectors);
	u64 nr_regions = DIV_ROUND_UP_ULL(le64_to_cpu(sb->nr_blocks),
					  region_blocks);
	unsigned long *map;
	__le64 *raw;
	u64 i, r;
	int ret = -ENOMEM;

	raw = vmalloc(blocks * TRACK_MD_BLOCK);
	map = kvcalloc(BITS_TO_LONGS(nr_regions), sizeof(long), GFP_KERNEL);
	if (!raw || !map)
		goto out;
	ret = md_io(md, REQ_OP_READ, le64_to_cpu(sb->intent_start), blocks,
		    raw, true);
	if (ret)
		goto out;
	for (i = 0; i < blocks * TRACK_MD_BLOCK / sizeof(u64); i++)
		((u64 *)raw)[i] = le64_to_cpu(raw[i]);
	bitmap_from_arr64(map, (u64 *)raw, nr_regions);

	*regions = 0;
	for_each_set_bit(r, map, nr_regions) {
		track_bitset_mark(bs, r * region_blocks,
				  (r + 1) * region_blocks - 1, GFP_KERNEL);
		(*regions)++;
	}
	/* Same geometry: those bits stay on disk until the next checkpoint. */
	if (keep) {
		bitmap_copy(md->intent_disk, map, md->nr_regions);
		md->intent_known = true;
	}
out:
	kvfree(map);
	vfree(raw);
	return ret;
}

/*
 * Load the dirty set stored on the metadata device into a target that has
 * not been resumed. Returns 1 when the stored state was used and its layout
 * is the current one (only the superblock needs writing before resuming),
 * 0 when the caller must write a full checkpoint, or -errno.
 */
int track_metadata_load(struct track_c *tc)
{
	struct track_metadata *md = tc->md;
	struct track_disk_sb *sb = md->sb;
	u64 dev_blocks = bdev_nr_sectors(md->dev->bdev) / TRACK_MD_BLOCK_SECTORS;
	struct track_bitset *bs;
	u64 nr_blocks, regions = 0, bad = 0;
	const char *why;
	bool same;
	u32 flags;
	int r;

	r = md_io(md, REQ_OP_READ, 0, 1, sb, false);
	if (r) {
		md_fail(md, "superblock read", r);
		DMERR("%s: cannot read the metadata device: every block is dirty",
		      md->name);
		return load_all_dirty(tc);
	}
	if (!memchr_inv(sb, 0, TRACK_MD_BLOCK)) {
		DMINFO("%s: new metadata device: %s", md->name,
		       tc->start_clean ? "no block is dirty" :
		       "every block is dirty until the first sync");
		return 0;
	}
	why = check_sb(md, sb, dev_blocks);
	if (!why && le32_to_cpu(sb->block_sectors) != md->block_sectors)
		why = "was written for another block size";
	if (why) {
		DMWARN("%s: metadata device %s: every block is dirty",
		       md->name, why);
		return load_all_dirty(tc);
	}

	nr_blocks = le64_to_cpu(sb->nr_blocks);
	flags = le32_to_cpu(sb->flags);
	same = nr_blocks == md->nr_blocks &&
	       le32_to_cpu(sb->region_sectors) == md->region_sectors &&
	       !(flags & TRACK_MD_INVALID);

	if (flags & TRACK_MD_INVALID) {
		DMWARN("%s: stored state marked invalid (an I/O error or a reload): all dirty",
		       md->name);
		bs = track_bitset_create(md->nr_blocks, true);
		if (!bs)
			return -ENOMEM;
		goto install;
	}

	bs = track_bitset_create(nr_blocks, false);
	if (!bs)
		return -ENOMEM;
	r = read_sets(md, sb, bs, same, &bad);
	if (!r && !(flags & TRACK_MD_CLEAN))
		r = read_intent(md, sb, bs, same, &regions);
	if (r) {
		track_bitset_destroy(bs);
		if (r == -ENOMEM)
			return r;
		md_fail(md, "read", r);
		DMERR("%s: cannot read the stored dirty set: every block is dirty",
		      md->name);
		return load_all_dirty(tc);
	}
	if (bad)
		DMWARN("%s: %llu stored slots failed their checksum: dirty",
		       md->name, bad);
	if (!(flags & TRACK_MD_CLEAN))
		DMWARN("%s: not shut down cleanly: %llu write-intent regions are dirty",
		       md->name, regions);
	if (nr_blocks != md->nr_blocks) {
		struct track_bitset *nbs;

		DMINFO("%s: device size changed from %llu to %llu blocks",
		       md->name, nr_blocks, md->nr_blocks);
		nbs = track_bitset_resize(bs, md->nr_blocks, true);
		if (!nbs) {
			track_bitset_destroy(bs);
			return -ENOMEM;
		}
		bs = nbs;
	}

install:
	mutex_lock(&tc->lock);
	memcpy(&tc->id, sb->uuid, sizeof(tc->id));
	/* freeze writes the epoch first, so none is ever handed out twice */
	tc->epoch = le64_to_cpu(sb->epoch) + 1;
	tc->committed_epoch = le64_to_cpu(sb->committed_epoch);
	md->generation = le64_to_cpu(sb->generation);
	mutex_unlock(&tc->lock);
	install_set(tc, bs);
	if (same)
		return 1;

	/*
	 * The caller writes a checkpoint in the current layout, over the old
	 * one: mark the old one invalid first, so a crash in between loads
	 * everything dirty rather than a mix.
	 */
	r = write_sb_locked(md, tc, TRACK_MD_INVALID);
	if (r)
		md_fail(md, "superblock update", r);
	return 0;
}

/*
 *--------------------------------------------------------------
 * Setup
 *--------------------------------------------------------------
 */
void track_metadata_close(struct track_metadata *md)
{
	if (md->wq) {
		cancel_delayed_work_sync(&md->fail_work);
		destroy_workqueue(md->wq);
	}
	if (md->io)
		dm_io_client_destroy(md->io);
	kvfree(md->intent_disk);
	kvfree(md->intent_since);
	kvfree(md->intent_prev);
	kvfree(md->intent_want);
	kvfree(md->intent_writing);
	kvfree(md->intent_scratch);
	vfree(md->intent_buf);
	vfree(md->table_buf);
	kvfree(md->table_dirty);
	vfree(md->buf);
	kfree(md->slot_tmp);
	kfree(md->sb);
	kfree(md->fail_sb);
	kfree(md);
}

static unsigned long *alloc_map(u64 bits)
{
	return kvcalloc(BITS_TO_LONGS(bits), sizeof(long), GFP_KERNEL);
}

int track_metadata_open(struct track_c *tc, struct dm_dev *dev,
			struct track_metadata **mdp, char **error)
{
	struct track_metadata *md;
	u64 needed;

	md = kzalloc(sizeof(*md), GFP_KERNEL);
	if (!md) {
		*error = "Cannot allocate metadata context";
		return -ENOMEM;
	}
	md->tc = tc;
	md->dev = dev;
	md->name = dm_device_name(dm_table_get_md(tc->ti->table));
	md->state = TRACK_PERSIST_OK;
	md->nr_blocks = tc->nr_blocks;
	md->block_sectors = 1U << tc->block_shift;
	md->region_sectors = tc->region_sectors;
	md->region_shift = ilog2(tc->region_sectors) - tc->block_shift;
	md->nr_regions = DIV_ROUND_UP_ULL(md->nr_blocks, 1ULL << md->region_shift);
	md->intent_start = 1;
	md->intent_blocks = DIV_ROUND_UP_ULL(md->nr_regions,
					     TRACK_MD_BLOCK * BITS_PER_BYTE);
	md->nr_slots = DIV_ROUND_UP_ULL(md->nr_blocks, TRACK_MD_SLOT_BITS);
	md->table_start = md->intent_start + md->intent_blocks;
	md->table_blocks = DIV_ROUND_UP_ULL(md->nr_slots,
					    TRACK_MD_TABLE_ENTRIES);
	md->slots_start = md->table_start + md->table_blocks;
	spin_lock_init(&md->lock);
	bio_list_init(&md->deferred);
	INIT_WORK(&md->work, intent_worker);
	INIT_DELAYED_WORK(&md->fail_work, fail_worker);
	init_waitqueue_head(&md->wait);
	atomic_set(&md->inflight[0], 0);
	atomic_set(&md->inflight[1], 0);
	mutex_init(&md->io_lock);

	if (md->nr_regions > TRACK_MD_MAX_REGIONS) {
		DMERR("%s: region_size %u gives %llu regions; at most %u: use %llu sectors or more",
		      md->name, md->region_sectors, md->nr_regions,
		      TRACK_MD_MAX_REGIONS,
		      (u64)track_metadata_default_region(tc));
		*error = "region_size too small for this device (the kernel log says the minimum)";
		kfree(md);
		return -EINVAL;
	}

	needed = (md->slots_start + md->nr_slots) * TRACK_MD_BLOCK_SECTORS;
	if (bdev_nr_sectors(dev->bdev) < needed) {
		DMERR("%s: metadata device has %llu sectors, needs %llu",
		      md->name, (u64)bdev_nr_sectors(dev->bdev), needed);
		*error = "Metadata device too small (the kernel log says how big it must be)";
		kfree(md);
		return -EINVAL;
	}

	md->intent_disk = alloc_map(md->nr_regions);
	md->intent_since = alloc_map(md->nr_regions);
	md->intent_prev = alloc_map(md->nr_regions);
	md->intent_want = alloc_map(md->nr_regions);
	md->intent_writing = alloc_map(md->nr_regions);
	md->intent_scratch = alloc_map(md->nr_regions);
	md->intent_buf = vzalloc(md->intent_blocks * TRACK_MD_BLOCK);
	md->table_buf = vzalloc(md->table_blocks * TRACK_MD_BLOCK);
	md->table_dirty = alloc_map(md->table_blocks);
	md->buf = vmalloc(TRACK_MD_BATCH * TRACK_MD_BLOCK);
	md->slot_tmp = kmalloc(TRACK_MD_BLOCK, GFP_KERNEL);
	md->sb = kmalloc(TRACK_MD_BLOCK, GFP_KERNEL);
	md->fail_sb = kmalloc(TRACK_MD_BLOCK, GFP_KERNEL);
	if (!md->intent_disk || !md->intent_since || !md->intent_prev ||
	    !md->intent_want ||
	    !md->intent_writing || !md->intent_scratch || !md->intent_buf ||
	    !md->table_buf || !md->table_dirty || !md->buf ||
	    !md->slot_tmp || !md->sb ||
	    !md->fail_sb) {
		*error = "Cannot allocate metadata buffers";
		goto bad;
	}

	md->io = dm_io_client_create();
	if (IS_ERR(md->io)) {
		md->io = NULL;
		*error = "Cannot create a dm-io client for the metadata device";
		goto bad;
	}
	md->wq = alloc_ordered_workqueue("dm-" DM_MSG_PREFIX, WQ_MEM_RECLAIM);
	if (!md->wq) {
		*error = "Cannot create the metadata workqueue";
		goto bad;
	}

	*mdp = md;
	return 0;

bad:
	track_metadata_close(md);
	return -ENOMEM;
}
