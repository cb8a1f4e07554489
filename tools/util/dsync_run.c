// SPDX-License-Identifier: LGPL-2.1-or-later
/* Running an extraction for dmextract and dmsync; see dsync_dm.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsync_dm.h"
#include "dsync_extract.h"

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
	return ds_extract_run(arg, first, count);
}

int ds_run_extract(const struct ds_opts *o, int out, struct ds_epoch *ep,
		   struct track_stream_totals *t)
{
	struct track_stream_info info;
	struct track_stream_writer *w = NULL;
	struct ds_extract *x = NULL;
	struct ds_extent *ext = NULL;
	struct ds_progress prog;
	struct ds_source src = { .fd = -1 };
	const char *path = o->device;
	uint32_t bs = o->block_size;
	char msg[512], *real;
	uint64_t total = 0;
	size_t n = 0, i;
	double t0 = ds_now();
	int ret;

	memset(&info, 0, sizeof(info));
	memset(ep, 0, sizeof(*ep));
	ep->lock_fd = -1;
	if (o->name) {
		ret = ds_epoch_freeze_mode(o->name, ep, o->snapshot,
					   o->snapshot_limit, msg,
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

	ret = ds_source_open(&src, path, bs, msg, sizeof(msg));
	if (ret) {
		ds_err("%s", msg);
		goto out;
	}
	if (o->name && src.nr_blocks != ep->nr_blocks) {
		ds_err("%s has %" PRIu64 " blocks of %" PRIu32 " bytes, but "
		       "dm-track counts %" PRIu64 ": was it resized? reload "
		       "its table", path, src.nr_blocks, bs, ep->nr_blocks);
		ret = -EINVAL;
		goto out;
	}
	if (o->dirty) {
		ret = ds_read_dirty_list(o->dirty, src.nr_blocks, &ext, &n, msg,
					 sizeof(msg));
		if (ret) {
			ds_err("%s", msg);
			goto out;
		}
		for (i = 0; i < n; i++)
			total += ext[i].count * (uint64_t)bs;
	} else if (o->all) {
		total = src.size;
	} else {
		total = ep->dirty_blocks * bs;
	}
	if (total > src.size)
		total = src.size;

	info.flags = (o->all ? TRACK_STREAM_FULL : 0) |
		     (o->level ? TRACK_STREAM_ZLIB : 0);
	info.block_size = bs;
	info.device_size = src.size;
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

	ret = track_stream_writer_new(&info, ds_write_cb,
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
	ret = ds_extract_start(&x, &src, w, &prog);
	if (ret) {
		ds_err("%s", strerror(-ret));
		goto out;
	}
	if (o->all) {
		ret = ds_extract_run(x, 0, src.nr_blocks);
	} else if (o->dirty) {
		for (i = 0; i < n && !ret; i++)
			ret = ds_extract_run(x, ext[i].first, ext[i].count);
	} else {
		ret = ds_epoch_for_each(ep, feed, x, msg, sizeof(msg));
		if (ret && ret != -EINTR && ret != -EPIPE &&
		    !*ds_extract_error(x))
			ds_err("%s", msg);
	}
	ret = ds_extract_finish(x, !ret, t);
	if (ret) {
		if (ret != -ECANCELED)
			ds_err("%s", ds_extract_error(x));
		goto out;
	}
	if (o->verbose)
		ds_print_totals(t, ds_now() - t0);
out:
	ds_extract_free(x);
	track_stream_writer_free(w);
	ds_source_close(&src);
	free(ext);
	if (ret && o->name)
		ds_epoch_explain(ep);
	return ret;
}
