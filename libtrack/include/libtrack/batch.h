/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * track_batch_*: when to push a batch of pending updates (the UDS policy).
 *
 * Three triggers, as in the UDS paper (section 5.1), the fail-safe made
 * precise:
 *   timer     t ms passed since the last update (reset by every update);
 *   counter   the estimated compressed size of the pending updates reached
 *             c bytes (zlib, like the paper's gzip estimate);
 *   fail-safe f ms passed since the first pending update, however fast the
 *             updates keep coming.
 * Pure logic: no threads, no signals, no sleeping. Time comes from a clock
 * the caller may inject, so the policy is tested without waiting.
 */
#ifndef LIBTRACK_BATCH_H
#define LIBTRACK_BATCH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct track_batch;

/* Defaults: the paper's values. */
#define TRACK_BATCH_DEFAULT_TIMER_MS	5000
#define TRACK_BATCH_DEFAULT_COUNTER	250000
#define TRACK_BATCH_DEFAULT_FAILSAFE_MS	30000

/* A trigger set to this never fires. */
#define TRACK_BATCH_NEVER	UINT64_MAX

struct track_batch_params {
	uint64_t timer_ms;	/* t; 0 pushes after every update */
	uint64_t counter_bytes;	/* c, compressed bytes */
	uint64_t failsafe_ms;	/* f */
	/* Milliseconds on a monotonic clock; NULL uses CLOCK_MONOTONIC. */
	uint64_t (*clock)(void *arg);
	void *clock_arg;
	int zlib_level;		/* for track_batch_add_data(); 0 = 1 (fast) */
	/* Room to grow: must be zero (track_batch_params_init() does it);
	 * track_batch_new() refuses anything else with -EINVAL. */
	uint32_t reserved0;
	uint64_t reserved[7];
};

/* Why a push is due. */
enum track_batch_reason {
	TRACK_BATCH_NONE = 0,	/* nothing pending, or not yet */
	TRACK_BATCH_TIMER,	/* quiet for t */
	TRACK_BATCH_COUNTER,	/* c compressed bytes pending */
	TRACK_BATCH_FAILSAFE,	/* f since the first pending update */
};

/* What is pending, from track_batch_pending(). */
struct track_batch_state {
	uint64_t updates;	/* updates since the last push */
	uint64_t bytes;		/* their estimated compressed size */
	uint64_t first_ms;	/* clock at the first of them */
	uint64_t last_ms;	/* clock at the last of them */
	uint64_t reserved[4];	/* zero; later versions may fill them */
};

/* Fill P with the defaults (5 s, 250 KB, 30 s, the monotonic clock). */
void track_batch_params_init(struct track_batch_params *p);

/* Create a policy. P is copied. */
int track_batch_new(const struct track_batch_params *p,
		    struct track_batch **bp);

/* Free a policy. */
void track_batch_free(struct track_batch *b);

/* An update happened now; COMPRESSED is its estimated compressed size. */
int track_batch_update(struct track_batch *b, uint64_t compressed);

/*
 * An update of LEN bytes at DATA happened now: estimate their compressed
 * size with zlib and count it. Once the counter has reached c the estimate
 * is skipped (the push is due anyway) and LEN is counted. Returns the
 * amount counted, or a negative errno.
 */
int64_t track_batch_add_data(struct track_batch *b, const void *data,
			     size_t len);

/* Whether a push is due now, and why. */
enum track_batch_reason track_batch_due(struct track_batch *b);

/*
 * Milliseconds until a push is due if no update comes: 0 if it is due now,
 * -ENODATA if nothing is pending (negative: poll(2) then waits forever).
 */
int64_t track_batch_wait(struct track_batch *b);

/* The pending updates were pushed: start a new batch. */
void track_batch_pushed(struct track_batch *b);

/* What is pending now. */
void track_batch_pending(const struct track_batch *b,
			 struct track_batch_state *st);

/* A name for a reason: "timer", "counter", "fail-safe" or "none". */
const char *track_batch_reason_name(enum track_batch_reason r);

#ifdef __cplusplus
}
#endif

#endif /* LIBTRACK_BATCH_H */
