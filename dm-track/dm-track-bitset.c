// SPDX-License-Identifier: GPL-2.0-only
/*
 * dm-track: the dirty sets, three-level bitmaps whose groups and leaves
 * are allocated on first write.
 *
 * Marking is lock-free: a group or leaf is installed with cmpxchg() and
 * bits are set with atomic ORs, so marks from any context may run
 * concurrently with each other and with track_bitset_merge() into the same
 * set. A pointer, once installed, only ever changes from NULL to something
 * else while the set is shared, so a reader never sees memory freed under
 * it. Everything else (weight, runs, resize, destroy) expects the caller to
 * keep the set from being freed; readers of a set that is being marked see
 * a snapshot that is at least as dirty as the set was when they started.
 */
#include "dm-track.h"

#include <linux/atomic.h>
#include <linux/bitmap.h>
#include <linux/slab.h>

#define MID_BYTES	(TRACK_MID_LEAVES * sizeof(unsigned long *))

static u64 leaf_first(u64 index)
{
	return index * TRACK_LEAF_BITS;
}

static u64 mid_first_leaf(u64 m)
{
	return m * TRACK_MID_LEAVES;
}

/* Number of valid blocks in leaf INDEX (the last leaf may be short). */
static unsigned int leaf_len(struct track_bitset *bs, u64 index)
{
	return min_t(u64, TRACK_LEAF_BITS, bs->nr_blocks - leaf_first(index));
}

/* Number of leaves in group M (the last group may be short). */
static unsigned int mid_len(struct track_bitset *bs, u64 m)
{
	return min_t(u64, TRACK_MID_LEAVES, bs->nr_leaves - mid_first_leaf(m));
}

static bool leaf_is_page(unsigned long *leaf)
{
	return leaf && leaf != TRACK_LEAF_FULL;
}

static bool mid_is_page(unsigned long **mid)
{
	return mid && mid != TRACK_MID_FULL;
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
	bs->nr_mids = DIV_ROUND_UP_ULL(bs->nr_leaves, TRACK_MID_LEAVES);
	bs->mids = kvcalloc(max_t(u64, bs->nr_mids, 1), sizeof(*bs->mids),
			    GFP_KERNEL | __GFP_NOWARN);
	if (!bs->mids) {
		kfree(bs);
		return NULL;
	}
	atomic_long_set(&bs->nr_pages, 0);
	atomic_long_set(&bs->nr_mid_pages, 0);

	if (full)
		for (i = 0; i < bs->nr_mids; i++)
			bs->mids[i] = TRACK_MID_FULL;

	return bs;
}

/* Free the leaves of group MID and the group itself. */
static void mid_free(unsigned long **mid)
{
	unsigned int i;

	for (i = 0; i < TRACK_MID_LEAVES; i++)
		if (leaf_is_page(mid[i]))
			kfree(mid[i]);
	kfree(mid);
}

void track_bitset_destroy(struct track_bitset *bs)
{
	u64 m;

	if (!bs)
		return;

	for (m = 0; m < bs->nr_mids; m++)
		if (mid_is_page(bs->mids[m]))
			mid_free(bs->mids[m]);
	kvfree(bs->mids);
	kfree(bs);
}

/*
 * The group M, installed if it was empty: the new array, whatever another
 * CPU installed first, or TRACK_MID_FULL when no memory could be had.
 */
static unsigned long **mid_get(struct track_bitset *bs, u64 m, gfp_t gfp)
{
	unsigned long **mid, **old;

	mid = READ_ONCE(bs->mids[m]);
	if (mid)
		return mid;

	mid = kzalloc(MID_BYTES, gfp | __GFP_NOWARN);
	if (!mid) {
		old = cmpxchg(&bs->mids[m], NULL, TRACK_MID_FULL);
		return old ? old : TRACK_MID_FULL;
	}

	old = cmpxchg(&bs->mids[m], NULL, mid);
	if (old) {
		kfree(mid);
		return old;
	}
	atomic_long_inc(&bs->nr_mid_pages);
	return mid;
}

/*
 * Install a leaf in an empty slot of group MID. Returns the leaf now in
 * the slot: the new page, whatever another CPU installed first, or
 * TRACK_LEAF_FULL when no memory could be had (the coarse mark that errs
 * towards dirty).
 */
static unsigned long *leaf_get(struct track_bitset *bs, unsigned long **slot,
			       gfp_t gfp)
{
	unsigned long *leaf, *old;

	leaf = READ_ONCE(*slot);
	if (leaf)
		return leaf;

	leaf = kzalloc(TRACK_LEAF_BYTES, gfp | __GFP_NOWARN);
	if (!leaf) {
		old = cmpxchg(slot, NULL, TRACK_LEAF_FULL);
		return old ? old : TRACK_LEAF_FULL;
	}

	old = cmpxchg(slot, NULL, leaf);
	if (old) {
		kfree(leaf);
		return old;
	}
	atomic_long_inc(&bs->nr_pages);
	return leaf;
}

/* Leaf INDEX as stored: NULL, TRACK_LEAF_FULL or the bitmap. */
unsigned long *track_bitset_leaf(struct track_bitset *bs, u64 index)
{
	unsigned long **mid = READ_ONCE(bs->mids[index / TRACK_MID_LEAVES]);

	if (!mid)
		return NULL;
	if (mid == TRACK_MID_FULL)
		return TRACK_LEAF_FULL;
	return READ_ONCE(mid[index % TRACK_MID_LEAVES]);
}

/* Is BLOCK in the set? Lock-free, for a set that is no longer marked. */
bool track_bitset_test(struct track_bitset *bs, u64 block)
{
	unsigned long *leaf;

	if (block >= bs->nr_blocks)
		return false;
	leaf = track_bitset_leaf(bs, block / TRACK_LEAF_BITS);
	if (!leaf)
		return false;
	if (leaf == TRACK_LEAF_FULL)
		return true;
	return test_bit(block % TRACK_LEAF_BITS, leaf);
}

/* Mark blocks LO..HI of leaf INDEX, all in group MID. */
static void mark_in_leaf(struct track_bitset *bs, unsigned long **mid,
			 u64 index, u64 lo, u64 hi, gfp_t gfp)
{
	unsigned long **slot = &mid[index % TRACK_MID_LEAVES];
	unsigned long *leaf;

	/* A whole leaf needs no memory at all. */
	if (lo == leaf_first(index) && hi - lo + 1 == leaf_len(bs, index) &&
	    !READ_ONCE(*slot) && !cmpxchg(slot, NULL, TRACK_LEAF_FULL))
		return;

	leaf = leaf_get(bs, slot, gfp);
	if (leaf == TRACK_LEAF_FULL)
		return;
	leaf_set_range(leaf, lo - leaf_first(index), hi - lo + 1);
}

/* Mark blocks FIRST to LAST (inclusive) dirty. Never sleeps with GFP_NOWAIT. */
void track_bitset_mark(struct track_bitset *bs, u64 first, u64 last, gfp_t gfp)
{
	u64 index, m;

	if (first >= bs->nr_blocks)
		return;
	last = min(last, bs->nr_blocks - 1);

	index = first / TRACK_LEAF_BITS;
	while (index <= last / TRACK_LEAF_BITS) {
		u64 m_lo, m_hi, end;
		unsigned long **mid;

		m = index / TRACK_MID_LEAVES;
		m_lo = leaf_first(mid_first_leaf(m));
		m_hi = min(bs->nr_blocks,
			   leaf_first(mid_first_leaf(m) + TRACK_MID_LEAVES)) - 1;
		end = mid_first_leaf(m) + TRACK_MID_LEAVES;

		/* A whole group needs no memory either. */
		if (first <= m_lo && last >= m_hi &&
		    !READ_ONCE(bs->mids[m]) &&
		    !cmpxchg(&bs->mids[m], NULL, TRACK_MID_FULL)) {
			index = end;
			continue;
		}
		mid = mid_get(bs, m, gfp);
		if (mid == TRACK_MID_FULL) {
			index = end;
			continue;
		}
		for (; index < end && index <= last / TRACK_LEAF_BITS; index++)
			mark_in_leaf(bs, mid, index,
				     max(first, leaf_first(index)),
				     min(last, leaf_first(index) +
					       TRACK_LEAF_BITS - 1), gfp);
	}
}

/* Make every leaf of group D (of DST, being marked) full. */
static void mid_fill(struct track_bitset *dst, unsigned long **d, u64 m)
{
	unsigned int i, n = mid_len(dst, m);

	for (i = 0; i < n; i++) {
		unsigned long *leaf = cmpxchg(&d[i], NULL, TRACK_LEAF_FULL);

		if (leaf_is_page(leaf))
			leaf_set_range(leaf, 0,
				       leaf_len(dst, mid_first_leaf(m) + i));
	}
}

/* OR leaf S (private) into slot D of DST (being marked); S is consumed. */
static void leaf_merge(struct track_bitset *dst, struct track_bitset *src,
		       unsigned long **d_slot, unsigned long **s_slot,
		       u64 index)
{
	unsigned long *s = *s_slot, *d;
	unsigned int w;

	if (!s)
		return;
	d = cmpxchg(d_slot, NULL, s);
	if (!d) {
		/* Moved: DST owns the page (or the FULL mark) now. */
		*s_slot = NULL;
		if (s != TRACK_LEAF_FULL) {
			atomic_long_dec(&src->nr_pages);
			atomic_long_inc(&dst->nr_pages);
		}
		return;
	}
	if (d == TRACK_LEAF_FULL)
		return;
	if (s == TRACK_LEAF_FULL) {
		leaf_set_range(d, 0, leaf_len(dst, index));
		return;
	}
	for (w = 0; w < TRACK_LEAF_BITS / BITS_PER_LONG; w++)
		if (s[w] & ~READ_ONCE(d[w]))
			atomic_long_or(s[w], (atomic_long_t *)&d[w]);
}

/* Leaves that are pages in group MID. */
static unsigned int mid_pages(unsigned long **mid)
{
	unsigned int i, n = 0;

	for (i = 0; i < TRACK_MID_LEAVES; i++)
		n += leaf_is_page(mid[i]);
	return n;
}

/*
 * OR SRC into DST (same size) and destroy SRC. DST may be marked
 * concurrently; SRC must be private to the caller. Groups and leaves of SRC
 * move into empty slots of DST without copying.
 */
void track_bitset_merge(struct track_bitset *dst, struct track_bitset *src)
{
	u64 m, n = min(dst->nr_mids, src->nr_mids);
	unsigned int i;

	for (m = 0; m < n; m++) {
		unsigned long **s = src->mids[m], **d;
		unsigned int pages;

		if (!s)
			continue;

		/* Counted while S is private: once moved, DST's markers add. */
		pages = mid_is_page(s) ? mid_pages(s) : 0;
		d = cmpxchg(&dst->mids[m], NULL, s);
		if (!d) {
			src->mids[m] = NULL;
			if (s != TRACK_MID_FULL) {
				atomic_long_sub(pages, &src->nr_pages);
				atomic_long_add(pages, &dst->nr_pages);
				atomic_long_dec(&src->nr_mid_pages);
				atomic_long_inc(&dst->nr_mid_pages);
			}
			continue;
		}
		if (d == TRACK_MID_FULL)
			continue;
		if (s == TRACK_MID_FULL) {
			mid_fill(dst, d, m);
			continue;
		}
		for (i = 0; i < mid_len(dst, m); i++)
			leaf_merge(dst, src, &d[i], &s[i],
				   mid_first_leaf(m) + i);
	}
	track_bitset_destroy(src);
}

/*
 * Drop what lies at or beyond block END of a private set: the bits of the
 * leaf END falls in, and every later leaf of its group. Afterwards the
 * set's groups hold nothing past END, so they can move into a smaller set.
 */
static void trim_tail(struct track_bitset *bs, u64 end)
{
	u64 index = end / TRACK_LEAF_BITS, m = index / TRACK_MID_LEAVES;
	unsigned long **mid = bs->mids[m];
	unsigned int i;

	if (mid == TRACK_MID_FULL) {
		bs->mids[m] = NULL;
		if (leaf_first(mid_first_leaf(m)) < end)
			track_bitset_mark(bs, leaf_first(mid_first_leaf(m)),
					  end - 1, GFP_KERNEL);
		return;
	}
	if (!mid)
		return;
	for (i = index % TRACK_MID_LEAVES; i < TRACK_MID_LEAVES; i++) {
		unsigned long *leaf = mid[i];
		u64 lf = leaf_first(mid_first_leaf(m) + i);

		if (!leaf)
			continue;
		if (lf >= end) {
			if (leaf_is_page(leaf)) {
				kfree(leaf);
				atomic_long_dec(&bs->nr_pages);
			}
			mid[i] = NULL;
		} else if (leaf == TRACK_LEAF_FULL) {
			mid[i] = NULL;
			track_bitset_mark(bs, lf, end - 1, GFP_KERNEL);
		} else {
			bitmap_clear(leaf, end - lf, TRACK_LEAF_BITS - (end - lf));
		}
	}
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

	if (nr_blocks < old_blocks &&
	    nr_blocks % (TRACK_LEAF_BITS * TRACK_MID_LEAVES))
		trim_tail(bs, nr_blocks);
	/*
	 * When growing, a FULL last group or leaf of the old set now also
	 * covers some new blocks: more dirty than needed, never less.
	 */
	track_bitset_merge(nbs, bs);
	if (dirty_new && nr_blocks > old_blocks)
		track_bitset_mark(nbs, old_blocks, nr_blocks - 1, GFP_KERNEL);
	return nbs;
}

u64 track_bitset_weight(struct track_bitset *bs)
{
	u64 m, weight = 0;
	unsigned int i;

	for (m = 0; m < bs->nr_mids; m++) {
		unsigned long **mid = READ_ONCE(bs->mids[m]);

		if (!mid)
			continue;
		for (i = 0; i < mid_len(bs, m); i++) {
			u64 index = mid_first_leaf(m) + i;
			unsigned long *leaf = mid == TRACK_MID_FULL ?
					      TRACK_LEAF_FULL :
					      READ_ONCE(mid[i]);

			if (leaf == TRACK_LEAF_FULL)
				weight += leaf_len(bs, index);
			else if (leaf)
				weight += bitmap_weight(leaf,
							leaf_len(bs, index));
		}
	}
	return weight;
}

u64 track_bitset_memory(struct track_bitset *bs)
{
	return sizeof(*bs) + bs->nr_mids * sizeof(*bs->mids) +
	       (u64)atomic_long_read(&bs->nr_mid_pages) * MID_BYTES +
	       (u64)atomic_long_read(&bs->nr_pages) * TRACK_LEAF_BYTES;
}

/* First dirty block at or after POS, or nr_blocks. */
static u64 next_set(struct track_bitset *bs, u64 pos)
{
	while (pos < bs->nr_blocks) {
		u64 index = pos / TRACK_LEAF_BITS;
		u64 m = index / TRACK_MID_LEAVES;
		unsigned long **mid = READ_ONCE(bs->mids[m]);
		unsigned long *leaf;
		unsigned int off, len;

		if (!mid) {
			pos = leaf_first(mid_first_leaf(m + 1));
			continue;
		}
		if (mid == TRACK_MID_FULL)
			return pos;
		leaf = READ_ONCE(mid[index % TRACK_MID_LEAVES]);
		if (leaf == TRACK_LEAF_FULL)
			return pos;
		if (leaf) {
			off = pos - leaf_first(index);
			len = leaf_len(bs, index);
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
		u64 m = index / TRACK_MID_LEAVES;
		unsigned long **mid = READ_ONCE(bs->mids[m]);
		unsigned long *leaf;
		unsigned int off, len;

		if (!mid)
			return pos;
		if (mid == TRACK_MID_FULL) {
			pos = leaf_first(mid_first_leaf(m + 1));
			continue;
		}
		leaf = READ_ONCE(mid[index % TRACK_MID_LEAVES]);
		if (!leaf)
			return pos;
		if (leaf != TRACK_LEAF_FULL) {
			off = pos - leaf_first(index);
			len = leaf_len(bs, index);
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
	*count = min(next_clear(bs, start), bs->nr_blocks) - start;
	return true;
}

/*
 * The first leaf at or after INDEX that is not empty, or nr_leaves: lets a
 * scan of a sparse set skip empty groups without looking at their leaves.
 */
u64 track_bitset_next_leaf(struct track_bitset *bs, u64 index)
{
	while (index < bs->nr_leaves) {
		u64 m = index / TRACK_MID_LEAVES;
		unsigned long **mid = READ_ONCE(bs->mids[m]);

		if (!mid) {
			index = mid_first_leaf(m + 1);
			continue;
		}
		if (mid == TRACK_MID_FULL ||
		    READ_ONCE(mid[index % TRACK_MID_LEAVES]))
			return index;
		index++;
	}
	return bs->nr_leaves;
}

/* Set leaf INDEX of a private set from BITS, or to full. */
int track_bitset_set_leaf(struct track_bitset *bs, u64 index,
			  const unsigned long *bits, bool full)
{
	unsigned long **mid, **slot, *leaf;

	mid = mid_get(bs, index / TRACK_MID_LEAVES, GFP_KERNEL);
	if (mid == TRACK_MID_FULL)
		return 0;
	slot = &mid[index % TRACK_MID_LEAVES];
	if (full) {
		if (leaf_is_page(*slot)) {
			kfree(*slot);
			atomic_long_dec(&bs->nr_pages);
		}
		*slot = TRACK_LEAF_FULL;
		return 0;
	}
	leaf = leaf_get(bs, slot, GFP_KERNEL);
	if (leaf == TRACK_LEAF_FULL)
		return 0;
	bitmap_or(leaf, leaf, bits, leaf_len(bs, index));
	return 0;
}
