// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The UDS batching policy (see <libtrack/batch.h>). Everything is a
 * comparison of the injected clock against three deadlines:
 *
 *   timer     last update + t
 *   fail-safe first pending update + f
 *   counter   pending compressed bytes >= c (due at once)
 *
 * so a stream of updates faster than t, which keeps pushing the timer back
 * forever (the paper's pathological case), still pushes every f.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "internal.h"

#define BATCH_CHUNK (64 * 1024)

struct track_batch {
	struct track_batch_params p;
	struct track_batch_state st;
	z_stream z;
	bool z_ready;
	unsigned char *scratch;
};

static uint64_t monotonic_ms(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t clock_now(const struct track_batch *b)
{
	return b->p.clock(b->p.clock_arg);
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

TRACK_EXPORT void track_batch_params_init(struct track_batch_params *p)
{
	memset(p, 0, sizeof(*p));
	p->timer_ms = TRACK_BATCH_DEFAULT_TIMER_MS;
	p->counter_bytes = TRACK_BATCH_DEFAULT_COUNTER;
	p->failsafe_ms = TRACK_BATCH_DEFAULT_FAILSAFE_MS;
}

TRACK_EXPORT int track_batch_new(const struct track_batch_params *p,
				 struct track_batch **bp)
{
	struct track_batch *b;

	if (!p || !bp || p->zlib_level < 0 || p->zlib_level > 9 ||
	    p->reserved0 || !trk_all_zero(p->reserved, sizeof(p->reserved)))
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->p = *p;
	if (!b->p.clock) {
		b->p.clock = monotonic_ms;
		b->p.clock_arg = NULL;
	}
	if (!b->p.zlib_level)
		b->p.zlib_level = 1;
	*bp = b;
	return 0;
}

TRACK_EXPORT void track_batch_free(struct track_batch *b)
{
	if (!b)
		return;
	if (b->z_ready)
		deflateEnd(&b->z);
	free(b->scratch);
	free(b);
}

TRACK_EXPORT int track_batch_update(struct track_batch *b,
				    uint64_t compressed)
{
	uint64_t now = clock_now(b);

	if (b->st.updates == 0)
		b->st.first_ms = now;
	b->st.last_ms = now;
	b->st.updates++;
	b->st.bytes = add_sat(b->st.bytes, compressed);
	return 0;
}

/* Compressed size of DATA, stopping early once the counter would be full. */
static int64_t estimate(struct track_batch *b, const unsigned char *data,
			size_t len)
{
	uint64_t room = b->p.counter_bytes - b->st.bytes;
	size_t done = 0;

	if (!b->z_ready) {
		b->scratch = malloc(BATCH_CHUNK);
		if (!b->scratch)
			return -ENOMEM;
		if (deflateInit(&b->z, b->p.zlib_level) != Z_OK) {
			free(b->scratch);
			b->scratch = NULL;
			return -ENOMEM;
		}
		b->z_ready = true;
	} else {
		deflateReset(&b->z);
	}
	while (done < len) {
		size_t n = len - done < BATCH_CHUNK ? len - done : BATCH_CHUNK;
		int flush = done + n == len ? Z_FINISH : Z_SYNC_FLUSH;
		int ret;

		b->z.next_in = (unsigned char *)data + done;
		b->z.avail_in = (uInt)n;
		do {
			b->z.next_out = b->scratch;
			b->z.avail_out = BATCH_CHUNK;
			ret = deflate(&b->z, flush);
			if (ret == Z_STREAM_ERROR)
				return -EIO;
		} while (b->z.avail_out == 0);
		done += n;
		if (b->z.total_out >= room && done < len)
			/* Full: count the rest as it is. */
			return (int64_t)(b->z.total_out + (len - done));
	}
	return (int64_t)b->z.total_out;
}

TRACK_EXPORT int64_t track_batch_add_data(struct track_batch *b,
					  const void *data, size_t len)
{
	int64_t est;

	if (len > INT64_MAX)
		return -EINVAL;
	if (len == 0 || b->st.bytes >= b->p.counter_bytes) {
		est = (int64_t)len;
	} else {
		est = estimate(b, data, len);
		if (est < 0)
			return est;
	}
	track_batch_update(b, (uint64_t)est);
	return est;
}

TRACK_EXPORT enum track_batch_reason track_batch_due(struct track_batch *b)
{
	uint64_t now;

	if (b->st.updates == 0)
		return TRACK_BATCH_NONE;
	if (b->st.bytes >= b->p.counter_bytes)
		return TRACK_BATCH_COUNTER;
	now = clock_now(b);
	if (now >= add_sat(b->st.first_ms, b->p.failsafe_ms))
		return TRACK_BATCH_FAILSAFE;
	if (now >= add_sat(b->st.last_ms, b->p.timer_ms))
		return TRACK_BATCH_TIMER;
	return TRACK_BATCH_NONE;
}

TRACK_EXPORT int64_t track_batch_wait(struct track_batch *b)
{
	uint64_t now, due;

	if (b->st.updates == 0)
		return -ENODATA;
	if (track_batch_due(b) != TRACK_BATCH_NONE)
		return 0;
	now = clock_now(b);
	due = add_sat(b->st.last_ms, b->p.timer_ms);
	if (add_sat(b->st.first_ms, b->p.failsafe_ms) < due)
		due = add_sat(b->st.first_ms, b->p.failsafe_ms);
	if (due == UINT64_MAX)
		return INT64_MAX;	/* both triggers off: only the counter */
	return (int64_t)(due - now);
}

TRACK_EXPORT void track_batch_pushed(struct track_batch *b)
{
	memset(&b->st, 0, sizeof(b->st));
}

TRACK_EXPORT void track_batch_pending(const struct track_batch *b,
				      struct track_batch_state *st)
{
	*st = b->st;
}

TRACK_EXPORT const char *track_batch_reason_name(enum track_batch_reason r)
{
	switch (r) {
	case TRACK_BATCH_TIMER:
		return "timer";
	case TRACK_BATCH_COUNTER:
		return "counter";
	case TRACK_BATCH_FAILSAFE:
		return "fail-safe";
	default:
		return "none";
	}
}
