// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * track_extents_*: a sorted array of disjoint half-open byte runs
 * [start, end). Adding is a binary search and one memmove; past max_runs
 * the set collapses into its covering run.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct run {
	uint64_t start;
	uint64_t end;		/* exclusive; UINT64_MAX may mean "to the end" */
};

struct track_extents {
	struct run *v;
	size_t n;
	size_t cap;
	size_t max;
};

TRACK_EXPORT int track_extents_new(unsigned int max_runs,
				   struct track_extents **ep)
{
	struct track_extents *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->max = max_runs ? max_runs : TRACK_EXTENTS_DEFAULT_MAX;
	*ep = e;
	return 0;
}

TRACK_EXPORT void track_extents_free(struct track_extents *e)
{
	if (!e)
		return;
	free(e->v);
	free(e);
}

TRACK_EXPORT void track_extents_clear(struct track_extents *e)
{
	e->n = 0;
}

TRACK_EXPORT int track_extents_add(struct track_extents *e, uint64_t start,
				   uint64_t length)
{
	uint64_t end = start + length < start ? UINT64_MAX : start + length;
	size_t lo = 0, hi = e->n, i, j;

	if (length == 0)
		return 0;
	/* First run that ends at or after START (it could touch). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e->v[mid].end < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	i = lo;
	/* Runs i .. j-1 overlap or touch [start, end). */
	for (j = i; j < e->n && e->v[j].start <= end; j++) {
		if (e->v[j].start < start)
			start = e->v[j].start;
		if (e->v[j].end > end)
			end = e->v[j].end;
	}
	if (j > i) {
		e->v[i].start = start;
		e->v[i].end = end;
		memmove(&e->v[i + 1], &e->v[j], (e->n - j) * sizeof(*e->v));
		e->n -= j - i - 1;
		return 0;
	}
	if (e->n >= e->max) {
		e->v[0].start = e->v[0].start < start ? e->v[0].start : start;
		e->v[0].end = e->v[e->n - 1].end > end ? e->v[e->n - 1].end :
			      end;
		e->n = 1;
		return 0;
	}
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 4;
		struct run *v;

		if (cap > e->max)
			cap = e->max;
		v = realloc(e->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		e->v = v;
		e->cap = cap;
	}
	memmove(&e->v[i + 1], &e->v[i], (e->n - i) * sizeof(*e->v));
	e->v[i].start = start;
	e->v[i].end = end;
	e->n++;
	return 0;
}

TRACK_EXPORT int track_extents_merge(struct track_extents *dst,
				     const struct track_extents *src)
{
	for (size_t i = 0; i < src->n; i++) {
		int r = track_extents_add(dst, src->v[i].start,
					  src->v[i].end - src->v[i].start);

		if (r)
			return r;
	}
	return 0;
}

TRACK_EXPORT size_t track_extents_count(const struct track_extents *e)
{
	return e->n;
}

TRACK_EXPORT uint64_t track_extents_bytes(const struct track_extents *e)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < e->n; i++)
		sum += e->v[i].end - e->v[i].start;
	return sum;
}

TRACK_EXPORT int track_extents_get(const struct track_extents *e, size_t i,
				   uint64_t *start, uint64_t *length)
{
	if (i >= e->n)
		return -ERANGE;
	*start = e->v[i].start;
	*length = e->v[i].end - e->v[i].start;
	return 0;
}

TRACK_EXPORT int track_extents_for_each(const struct track_extents *e,
					track_extent_fn fn, void *arg)
{
	for (size_t i = 0; i < e->n; i++) {
		int r = fn(e->v[i].start, e->v[i].end - e->v[i].start, arg);

		if (r)
			return r;
	}
	return 0;
}

TRACK_EXPORT int track_extents_for_each_block(const struct track_extents *e,
					      uint64_t block_size,
					      uint64_t size,
					      track_extent_fn fn, void *arg)
{
	uint64_t nblocks, first = 0, next = 0;	/* pending run [first, next) */
	int r;

	if (!block_size)
		return -EINVAL;
	/* Blocks that start below SIZE. */
	nblocks = size / block_size + (size % block_size != 0);
	for (size_t i = 0; i < e->n; i++) {
		uint64_t b0 = e->v[i].start / block_size;
		uint64_t b1 = (e->v[i].end - 1) / block_size + 1;

		if (b0 >= nblocks)
			break;
		if (b1 > nblocks)
			b1 = nblocks;
		if (next > first && b0 <= next) {
			if (b1 > next)
				next = b1;	/* shares or touches a block */
			continue;
		}
		if (next > first) {
			r = fn(first, next - first, arg);
			if (r)
				return r;
		}
		first = b0;
		next = b1;
	}
	if (next > first)
		return fn(first, next - first, arg);
	return 0;
}
