// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-track: the dirty sets, two-level bitmaps whose leaves are allocated on
 * first write.
 *
 * Marking is lock-free: a leaf is installed with cmpxchg() and bits are set
 * with atomic ORs, so marks from any context may run concurrently with each
 * other and with track_bitset_merge() into the same set. Everything else
 * (weight, runs, resize, destroy) expects the caller to keep the set from
 * being freed; readers of a set that is being marked see a snapshot that is
 * at least as dirty as the set was when they started.
 */
#include "dm-track.h"

#include <linux/atomic.h>
#include <linux/bitmap.h>
#include <linux/slab.h>

static u64 leaf_first(u64 index)
{
	return index * TRACK_LEAF_BITS;
}

/* Number of valid blocks in leaf INDEX (the last leaf may be short). */
static unsigned int leaf_len(struct track_bitset *bs, u64 index)
{
	return min_t(u64, TRACK_LEAF_BITS, bs->nr_blocks - leaf_first(index));
}

static bool leaf_is_page(unsigned long *leaf)
{
	return leaf && leaf != TRACK_LEAF_FULL;
}

static void leaf_set_range(unsigned long *leaf, unsigned int start,
			   unsigned int nbits)
{
	while (nbits) {
		unsigned int word = start / BITS_PER_LONG;
		unsigned int bit = start % BITS_PER_LONG;
		unsigned int n = min(nbits, BITS_PER_LONG - bit);
		unsigned long mask = n == BITS_PER_LONG ? ~0UL :
				     ((1UL << n) - 1) << bit;

		if ((READ_ONCE(leaf[word]) & mask) != mask)
			atomic_long_or(mask, (atomic_long_t *)&leaf[word]);
		start += n;
		nbits -= n;
	}
}

struct track_bitset *track_bitset_create(u64 nr_blocks, bool full)
{
	struct track_bitset *bs;
	u64 i;

	bs = kzalloc(sizeof(*bs), GFP_KERNEL);
	if (!bs)
		return NULL;

	bs->nr_blocks = nr_blocks;
	bs->nr_leaves = DIV_ROUND_UP_ULL(nr_blocks, TRACK_LEAF_BITS);
	bs->leaves = kvcalloc(max_t(u64, bs->nr_leaves, 1),
			      sizeof(*bs->leaves), GFP_KERNEL | __GFP_NOWARN);
	if (!bs->leaves) {
		kfree(bs);
		return NULL;
	}
	atomic_long_set(&bs->nr_pages, 0);

	if (full)
		for (i = 0; i < bs->nr_leaves; i++)
			bs->leaves[i] = TRACK_LEAF_FULL;

	return bs;
}

void track_bitset_destroy(struct track_bitset *bs)
{
	u64 i;

	if (!bs)
		return;

	for (i = 0; i < bs->nr_leaves; i++)
		if (leaf_is_page(bs->leaves[i]))
			kfree(bs->leaves[i]);
	kvfree(bs->leaves);
	kfree(bs);
}

/*
 * Install a leaf in an empty slot. Returns the leaf now in the slot: the new
 * page, whatever another CPU installed first, or TRACK_LEAF_FULL when no
 * memory could be had (the coarse mark that errs towards dirty).
 */
static unsigned long *leaf_get(struct track_bitset *bs, u64 index, gfp_t gfp)
{
	unsigned long *leaf, *old;

	leaf = READ_ONCE(bs->leaves[index]);
	if (leaf)
		return leaf;

	leaf = kzalloc(TRACK_LEAF_BYTES, gfp | __GFP_NOWARN);
	if (!leaf) {
		old = cmpxchg(&bs->leaves[index], NULL, TRACK_LEAF_FULL);
		return old ? old : TRACK_LEAF_FULL;
	}

	old = cmpxchg(&bs->leaves[index], NULL, leaf);
	if (old) {
		kfree(leaf);
		return old;
	}
	atomic_long_inc(&bs->nr_pages);
	return leaf;
}

/* Mark blocks FIRST to LAST (inclusive) dirty. Never sleeps with GFP_NOWAIT. */
void track_bitset_mark(struct track_bitset *bs, u64 first, u64 last, gfp_t gfp)
{
	u64 index;

	if (first >= bs->nr_blocks)
		return;
	last = min(last, bs->nr_blocks - 1);

	for (index = first / TRACK_LEAF_BITS;
	     index <= last / TRACK_LEAF_BITS; index++) {
		u64 lo = max(first, leaf_first(index));
		u64 hi = min(last, leaf_first(index) + TRACK_LEAF_BITS - 1);
		unsigned long *leaf;

		/* A whole leaf needs no memory at all. */
		if (lo == leaf_first(index) &&
		    hi - lo + 1 == leaf_len(bs, index) &&
		    !READ_ONCE(bs->leaves[index]) &&
		    !cmpxchg(&bs->leaves[index], NULL, TRACK_LEAF_FULL))
			continue;

		leaf = leaf_get(bs, index, gfp);
		if (leaf == TRACK_LEAF_FULL)
			continue;
		leaf_set_range(leaf, lo - leaf_first(index), hi - lo + 1);
	}
}

/*
 * OR SRC into DST (same size) and destroy SRC. DST may be marked
 * concurrently; SRC must be private to the caller. Leaves of SRC move into
 * empty slots of DST without copying.
 */
void track_bitset_merge(struct track_bitset *dst, struct track_bitset *src)
{
	u64 i, n = min(dst->nr_leaves, src->nr_leaves);

	for (i = 0; i < n; i++) {
		unsigned long *s = src->leaves[i], *d;
		unsigned int w;

		if (!s)
			continue;

		d = cmpxchg(&dst->leaves[i], NULL, s);
		if (!d) {
			/* Moved: DST owns the page (or the FULL mark) now. */
			src->leaves[i] = NULL;
			if (s != TRACK_LEAF_FULL) {
				atomic_long_dec(&src->nr_pages);
				atomic_long_inc(&dst->nr_pages);
			}
			continue;
		}
		if (d == TRACK_LEAF_FULL)
			continue;
		if (s == TRACK_LEAF_FULL) {
			leaf_set_range(d, 0, leaf_len(dst, i));
			continue;
		}
		for (w = 0; w < TRACK_LEAF_BITS / BITS_PER_LONG; w++)
			if (s[w] & ~READ_ONCE(d[w]))
				atomic_long_or(s[w], (atomic_long_t *)&d[w]);
	}
	track_bitset_destroy(src);
}

/*
 * A copy of BS for a device of NR_BLOCKS blocks: blocks beyond the new end
 * are dropped, and with DIRTY_NEW blocks beyond the old end are dirty (the
 * replica has never seen them). BS is destroyed. Not for sets that are
 * being marked.
 */
struct track_bitset *track_bitset_resize(struct track_bitset *bs,
					 u64 nr_blocks, bool dirty_new)
{
	struct track_bitset *nbs;
	u64 old_blocks = bs->nr_blocks;

	if (nr_blocks == old_blocks)
		return bs;

	nbs = track_bitset_create(nr_blocks, false);
	if (!nbs)
		return NULL;

	/* Clear what lies beyond the new end in the last shared leaf. */
	if (nr_blocks < old_blocks && nr_blocks % TRACK_LEAF_BITS) {
		u64 index = nr_blocks / TRACK_LEAF_BITS;
		unsigned long *leaf = bs->leaves[index];

		if (leaf == TRACK_LEAF_FULL) {
			bs->leaves[index] = NULL;
			track_bitset_mark(bs, leaf_first(index), nr_blocks - 1,
					  GFP_KERNEL);
		} else if (leaf) {
			bitmap_clear(leaf, nr_blocks % TRACK_LEAF_BITS,
				     TRACK_LEAF_BITS -
				     nr_blocks % TRACK_LEAF_BITS);
		}
	}
	/*
	 * When growing, a FULL last leaf of the old set now also covers some
	 * new blocks: more dirty than needed, never less.
	 */
	track_bitset_merge(nbs, bs);
	if (dirty_new && nr_blocks > old_blocks)
		track_bitset_mark(nbs, old_blocks, nr_blocks - 1, GFP_KERNEL);
	return nbs;
}

u64 track_bitset_weight(struct track_bitset *bs)
{
	u64 i, weight = 0;

	for (i = 0; i < bs->nr_leaves; i++) {
		unsigned long *leaf = READ_ONCE(bs->leaves[i]);

		if (leaf == TRACK_LEAF_FULL)
			weight += leaf_len(bs, i);
		else if (leaf)
			weight += bitmap_weight(leaf, leaf_len(bs, i));
	}
	return weight;
}

u64 track_bitset_memory(struct track_bitset *bs)
{
	return sizeof(*bs) + bs->nr_leaves * sizeof(*bs->leaves) +
	       (u64)atomic_long_read(&bs->nr_pages) * TRACK_LEAF_BYTES;
}

/* First dirty block at or after POS, or nr_blocks. */
static u64 next_set(struct track_bitset *bs, u64 pos)
{
	while (pos < bs->nr_blocks) {
		u64 index = pos / TRACK_LEAF_BITS;
		unsigned long *leaf = READ_ONCE(bs->leaves[index]);
		unsigned int off = pos - leaf_first(index);
		unsigned int len = leaf_len(bs, index);

		if (leaf == TRACK_LEAF_FULL)
			return pos;
		if (leaf) {
			off = find_next_bit(leaf, len, off);
			if (off < len)
				return leaf_first(index) + off;
		}
		pos = leaf_first(index + 1);
	}
	return bs->nr_blocks;
}

/* First clean block at or after POS, or nr_blocks. */
static u64 next_clear(struct track_bitset *bs, u64 pos)
{
	while (pos < bs->nr_blocks) {
		u64 index = pos / TRACK_LEAF_BITS;
		unsigned long *leaf = READ_ONCE(bs->leaves[index]);
		unsigned int off = pos - leaf_first(index);
		unsigned int len = leaf_len(bs, index);

		if (!leaf)
			return pos;
		if (leaf != TRACK_LEAF_FULL) {
			off = find_next_zero_bit(leaf, len, off);
			if (off < len)
				return leaf_first(index) + off;
		}
		pos = leaf_first(index + 1);
	}
	return bs->nr_blocks;
}

/* The first run of dirty blocks at or after POS; false when there is none. */
bool track_bitset_next_run(struct track_bitset *bs, u64 pos, u64 *first,
			   u64 *count)
{
	u64 start = next_set(bs, pos);

	if (start >= bs->nr_blocks)
		return false;
	*first = start;
	*count = next_clear(bs, start) - start;
	return true;
}

/* Leaf INDEX as stored: NULL, TRACK_LEAF_FULL or the bitmap. */
unsigned long *track_bitset_leaf(struct track_bitset *bs, u64 index)
{
	return READ_ONCE(bs->leaves[index]);
}

/* Set leaf INDEX of a private set from BITS, or to full. */
int track_bitset_set_leaf(struct track_bitset *bs, u64 index,
			  const unsigned long *bits, bool full)
{
	unsigned long *leaf;

	if (full) {
		if (leaf_is_page(bs->leaves[index])) {
			kfree(bs->leaves[index]);
			atomic_long_dec(&bs->nr_pages);
		}
		bs->leaves[index] = TRACK_LEAF_FULL;
		return 0;
	}
	leaf = leaf_get(bs, index, GFP_KERNEL);
	if (leaf == TRACK_LEAF_FULL)
		return 0;
	bitmap_or(leaf, leaf, bits, leaf_len(bs, index));
	return 0;
}
