// SPDX-License-Identifier: LGPL-2.1-or-later
/* Running an extraction for dmextract and dmsync; see dsync_dm.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsync_dm.h"

void ds_print_totals(const struct track_stream_totals *t, double secs)
{
	char a[32], b[32], c[32];

	fprintf(stderr, "%s: %" PRIu64 " data blocks (%s), %" PRIu64
		" zero blocks, %" PRIu64 " records, stream %s, %.1f s, %s/s\n",
		ds_prog, t->data_blocks, ds_human(t->data_bytes, a, sizeof(a)),
		t->zero_blocks, t->records,
		ds_human(t->stream_bytes, b, sizeof(b)), secs,
		ds_human(secs > 0 ? (uint64_t)(t->stream_bytes / secs) : 0, c,
			 sizeof(c)));
}

static int feed(uint64_t first, uint64_t count, void *arg)
{
	return track_extract_add(arg, first, count);
}

/* The stream goes to the descriptor (intptr_t)ARG: a signal that sets
 * ds_stop makes the write fail (see ds_write_all()). */
static ssize_t write_cb(void *arg, const void *buf, size_t len)
{
	return ds_write_all((int)(intptr_t)arg, buf, len);
}

/* The engine asks between windows whether to go on. */
static int progress_cb(void *arg, uint64_t bytes, int final)
{
	if (ds_stop && !final)
		return -EINTR;
	ds_progress_update(arg, bytes, final);
	return 0;
}

/* The engine's message, or the signal that stopped it. */
static void extract_err(struct track_extract *x, int ret)
{
	if (ret == -EINTR && ds_stop)
		ds_err("interrupted by signal %d", (int)ds_stop);
	else
		ds_err("%s", track_extract_error(x));
}

int ds_run_extract(const struct ds_opts *o, int out, struct ds_epoch *ep,
		   struct track_stream_totals *t)
{
	struct track_stream_info info;
	struct track_stream_writer *w = NULL;
	struct track_extract *x = NULL;
	struct ds_extent *ext = NULL;
	struct ds_progress prog;
	const char *path = o->device;
	uint32_t bs = o->block_size;
	char msg[512], *real;
	uint64_t total = 0, size, nr_blocks;
	size_t n = 0, i;
	double t0 = ds_now();
	int ret;

	memset(&info, 0, sizeof(info));
	memset(ep, 0, sizeof(*ep));
	ep->lock_fd = -1;
	if (o->name) {
		ret = ds_epoch_freeze_mode(o->name, ep, o->snapshot,
					   o->snapshot_limit, o->fsfreeze, msg,
					   sizeof(msg));
		if (ret) {
			ds_err("%s", msg);
			return ret;
		}
		path = ep->path;
		bs = ep->block_size;
		info.base_epoch = ep->base;
		info.new_epoch = ep->epoch;
		snprintf(info.source_id, sizeof(info.source_id), "%s",
			 ep->source_id);
	} else {
		info.base_epoch = o->base_epoch;
		info.new_epoch = o->new_epoch;
	}

	ret = track_extract_new(path, bs, &x);
	if (ret) {
		if (x)
			ds_err("%s", track_extract_error(x));
		else
			ds_err("%s", strerror(-ret));
		goto out;
	}
	size = track_extract_size(x);
	nr_blocks = track_extract_block_count(x);
	if (o->name && nr_blocks != ep->nr_blocks) {
		ds_err("%s has %" PRIu64 " blocks of %" PRIu32 " bytes, but "
		       "dm-track counts %" PRIu64 ": was it resized? reload "
		       "its table", path, nr_blocks, bs, ep->nr_blocks);
		ret = -EINVAL;
		goto out;
	}
	if (o->dirty) {
		ret = ds_read_dirty_list(o->dirty, nr_blocks, &ext, &n, msg,
					 sizeof(msg));
		if (ret) {
			ds_err("%s", msg);
			goto out;
		}
		for (i = 0; i < n; i++)
			total += ext[i].count * (uint64_t)bs;
	} else if (o->all) {
		total = size;
	} else {
		total = ep->dirty_blocks * bs;
	}
	if (total > size)
		total = size;

	info.flags = (o->all ? TRACK_STREAM_FULL : 0) |
		     (o->level ? TRACK_STREAM_ZLIB : 0);
	info.block_size = bs;
	info.device_size = size;
	info.created = time(NULL);
	if (o->source_id) {
		snprintf(info.source_id, sizeof(info.source_id), "%s",
			 o->source_id);
	} else if (!o->name) {
		real = realpath(path, NULL);
		snprintf(info.source_id, sizeof(info.source_id), "path:%.*s",
			 TRACK_STREAM_ID_MAX - 5, real ? real : path);
		free(real);
	}

	ret = track_stream_writer_new(&info, write_cb,
				      (void *)(intptr_t)out, &w);
	if (!ret && o->level)
		ret = track_stream_writer_set_level(w, o->level);
	if (ret) {
		ds_err("starting the stream: %s", ret == -EPIPE ?
		       "the receiving side closed it (see its messages)" :
		       strerror(-ret));
		goto out;
	}
	ds_progress_init(&prog, o->progress, total);
	ret = track_extract_set_progress(x, progress_cb, &prog);
	if (!ret)
		ret = track_extract_start(x, w);
	if (ret) {
		ds_err("%s", strerror(-ret));
		goto out;
	}
	/* The writing thread takes the signals (so that a signal interrupts
	 * a write blocked on a full pipe); this thread blocks them. */
	ds_block_signals(true);
	if (o->all) {
		ret = track_extract_add(x, 0, nr_blocks);
	} else if (o->dirty) {
		for (i = 0; i < n && !ret; i++)
			ret = track_extract_add(x, ext[i].first, ext[i].count);
	} else {
		ret = ds_epoch_for_each(ep, feed, x, msg, sizeof(msg));
		if (ret && ret != -EINTR && ret != -EPIPE &&
		    !*track_extract_error(x))
			ds_err("%s", msg);
	}
	ret = ret ? track_extract_abort(x) : track_extract_finish(x, t);
	ds_block_signals(false);
	if (ret) {
		if (ret != -ECANCELED)
			extract_err(x, ret);
		goto out;
	}
	if (o->verbose)
		ds_print_totals(t, ds_now() - t0);
out:
	track_extract_free(x);
	track_stream_writer_free(w);
	free(ext);
	if (ret && o->name)
		ds_epoch_explain(ep);
	return ret;
}
