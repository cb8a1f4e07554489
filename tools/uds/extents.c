// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * A sorted set of disjoint byte ranges: what changed in one file since the
 * last push. Ranges that overlap or touch are merged, like the kernel
 * merges consecutive events. Past EXTENTS_MAX runs the set collapses into
 * one covering run: more bytes to read, never fewer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uds.h"

void extents_init(struct extents *e)
{
	memset(e, 0, sizeof(*e));
}

void extents_free(struct extents *e)
{
	free(e->v);
	extents_init(e);
}

int extents_add(struct extents *e, uint64_t start, uint64_t len)
{
	uint64_t end = start + len < start ? UINT64_MAX : start + len;
	size_t lo = 0, hi = e->n, i, j;

	if (len == 0)
		return 0;
	/* First run that ends at or after START (could touch). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e->v[mid].end < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	i = lo;
	/* Runs from i up to j-1 overlap or touch [start, end). */
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
	if (e->n >= EXTENTS_MAX) {
		e->v[0].start = e->v[0].start < start ? e->v[0].start : start;
		e->v[0].end = e->v[e->n - 1].end > end ? e->v[e->n - 1].end :
			      end;
		e->n = 1;
		return 0;
	}
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 4;
		struct extent *v = realloc(e->v, cap * sizeof(*v));

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

uint64_t extents_bytes(const struct extents *e)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < e->n; i++)
		sum += e->v[i].end - e->v[i].start;
	return sum;
}
