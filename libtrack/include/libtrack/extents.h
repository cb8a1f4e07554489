/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * track_extents_*: a set of byte ranges, such as what changed in one file
 * since a client last looked.
 *
 * Ranges that overlap or touch are merged (the union), like the kernel
 * merges consecutive write events. Past a limit of runs the set collapses
 * into one covering run: more bytes to read, never fewer. A client that
 * keeps per-block hashes turns the set into block indexes with
 * track_extents_for_each_block() and re-hashes only those blocks.
 */
#ifndef LIBTRACK_EXTENTS_H
#define LIBTRACK_EXTENTS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct track_extents;

/*
 * A callback over runs: (first, count) are bytes (start, length) or block
 * indexes, as the function taking it says. A non-zero return stops the walk
 * and is returned by the walker.
 */
typedef int (*track_extent_fn)(uint64_t first, uint64_t count, void *arg);

/* Runs a set holds before it collapses, when track_extents_new() gets 0. */
#define TRACK_EXTENTS_DEFAULT_MAX 4096u

/* Create an empty set holding up to MAX_RUNS runs (0: the default). */
int track_extents_new(unsigned int max_runs, struct track_extents **ep);

/* Free a set (NULL is ignored). */
void track_extents_free(struct track_extents *e);

/*
 * Add LENGTH bytes from START. A range running past UINT64_MAX (such as
 * LENGTH == TRACK_WHOLE_FILE) ends at UINT64_MAX; LENGTH 0 adds nothing.
 * -ENOMEM leaves the set as it was.
 */
int track_extents_add(struct track_extents *e, uint64_t start,
		      uint64_t length);

/* Add every run of SRC to DST. */
int track_extents_merge(struct track_extents *dst,
			const struct track_extents *src);

/* Empty the set (it keeps its memory for reuse). */
void track_extents_clear(struct track_extents *e);

/* The number of disjoint runs, and the bytes they cover. */
size_t track_extents_count(const struct track_extents *e);
uint64_t track_extents_bytes(const struct track_extents *e);

/*
 * Run I (0 .. count - 1, in ascending order): *START and *LENGTH.
 * -ERANGE when I is past the last run.
 */
int track_extents_get(const struct track_extents *e, size_t i,
		      uint64_t *start, uint64_t *length);

/* Call FN(start, length, ARG) for each run in ascending order. */
int track_extents_for_each(const struct track_extents *e, track_extent_fn fn,
			   void *arg);

/*
 * Call FN(first block, block count, ARG) for each run of blocks of
 * BLOCK_SIZE bytes (any size but 0) that the set touches, in ascending
 * order, each block once (runs sharing a block are joined). Only blocks
 * that start below SIZE are reported (UINT64_MAX: no limit), so a range
 * past the end of a file that shrank costs nothing. -EINVAL if BLOCK_SIZE
 * is 0.
 */
int track_extents_for_each_block(const struct track_extents *e,
				 uint64_t block_size, uint64_t size,
				 track_extent_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* LIBTRACK_EXTENTS_H */
