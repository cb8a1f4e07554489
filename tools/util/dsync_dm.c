// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The dm-track side of dmextract and dmsync: freeze, list, commit, abort.
 * This is the only file of the tools that calls track_dm_*.
 *
 * The stream cut from a frozen set says base = the committed epoch at the
 * time of the freeze and new = the frozen epoch: the frozen set holds every
 * block written after the last commit (an earlier frozen set that was
 * never committed is merged into it by the kernel).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <libtrack.h>
#include <libtrack/dm.h>

#include "dsync_dm.h"

static const char *dm_hint(int err)
{
	switch (err) {
	case -ENODEV:
		return "no such device-mapper device ('dmsetup ls' lists "
		       "them; is the dm-track module loaded?)";
	case -EMEDIUMTYPE:
		return "not a dm-track device (use --dirty/--device or --all "
		       "--device for other devices)";
	case -EPERM:
	case -EACCES:
		return "permission denied (dm-track needs root)";
	default:
		return strerror(-err);
	}
}

int ds_parse_snapshot(const char *arg, struct ds_opts *o)
{
	uint64_t v = 0;

	if (arg && (ds_parse_u64(arg, true, &v) || !v))
		return -EINVAL;
	o->snapshot = DS_SNAP_ON;
	o->snapshot_limit = v;
	return 0;
}

int ds_dm_probe(const char *name, char *msg, size_t msglen)
{
	struct track_dm_status st;
	struct track_dm *dm;
	int ret;

	ret = track_dm_open(name, &dm);
	if (!ret) {
		ret = track_dm_get_status(dm, &st);
		track_dm_free(dm);
	}
	if (ret)
		snprintf(msg, msglen, "%s: %s", name, dm_hint(ret));
	return ret;
}

int ds_epoch_freeze(const char *name, struct ds_epoch *e, char *msg,
		    size_t msglen)
{
	return ds_epoch_freeze_mode(name, e, DS_SNAP_OFF, 0, NULL, msg,
				    msglen);
}

/*
 * Create the view before the freeze: what probes a new device (udev's
 * blkid) then reads it before there is a snapshot, and marks nothing read.
 * Returns 0 with e->view set, 0 with it empty (AUTO on a kernel without
 * snapshot mode), or -errno with MSG.
 */
static int view_create(struct track_dm *dm, struct ds_epoch *e,
		       enum ds_snapshot mode, char *msg, size_t msglen)
{
	int ret;

	snprintf(e->view, sizeof(e->view), "%.90s-view%ld", e->name,
		 (long)getpid());
	ret = track_dm_view_create(dm, e->view);
	if (!ret) {
		snprintf(e->path, sizeof(e->path), "/dev/mapper/%s", e->view);
		return 0;
	}
	e->view[0] = 0;
	/*
	 * The default falls back to what a sync did before snapshot mode
	 * only where the kernel cannot make the view: no track-view at all
	 * (silently), or a track-view 1.0, which opened the track device
	 * and so failed under a mounted file system (-EBUSY, with a
	 * warning). Any other failure fails the sync, as with --snapshot.
	 */
	if (mode == DS_SNAP_AUTO && ret == -EOPNOTSUPP)
		return 0;
	if (mode == DS_SNAP_AUTO && ret == -EBUSY) {
		ds_err("%s: no snapshot view: this kernel's dm-track (track-view "
		       "1.0) cannot make one of a device a mounted file system "
		       "holds; update dm-track. Copying the live device, as "
		       "with --no-snapshot", e->name);
		return 0;
	}
	if (ret == -EOPNOTSUPP)
		snprintf(msg, msglen, "%s: this kernel's dm-track has no "
			 "snapshot mode (no track-view target); sync "
			 "without --snapshot", e->name);
	else if (ret == -EBUSY)
		snprintf(msg, msglen, "%s: this kernel's dm-track (track-view "
			 "1.0) cannot make a snapshot view of a device a mounted "
			 "file system holds; update dm-track, or sync with "
			 "--no-snapshot", e->name);
	else
		snprintf(msg, msglen, "%s: creating its snapshot view failed: "
			 "%s", e->name, dm_hint(ret));
	return ret;
}

int ds_epoch_freeze_mode(const char *name, struct ds_epoch *e,
			 enum ds_snapshot mode, uint64_t limit,
			 const char *fsfreeze, char *msg, size_t msglen)
{
	struct track_dm_status st;
	struct track_dm *dm;
	char tmsg[512];
	int ret, fs = -1, tret;

	memset(e, 0, sizeof(*e));
	e->lock_fd = -1;
	if (fsfreeze) {
		fs = ds_fs_check(fsfreeze, msg, msglen);
		if (fs < 0)
			return fs;
	}
	ret = track_dm_open(name, &dm);
	if (ret) {
		snprintf(msg, msglen, "%s: %s", name, dm_hint(ret));
		if (fs >= 0)
			close(fs);
		return ret;
	}
	snprintf(e->name, sizeof(e->name), "%s", track_dm_name(dm));
	snprintf(e->path, sizeof(e->path), "%s", track_dm_path(dm));

	/* One extraction per device at a time: a second one would merge
	 * into our frozen epoch and make our commit fail. */
	e->lock_fd = open(e->path, O_RDONLY | O_CLOEXEC);
	if (e->lock_fd < 0) {
		ret = -errno;
		snprintf(msg, msglen, "cannot open %s: %s", e->path,
			 strerror(errno));
		goto fail;
	}
	if (flock(e->lock_fd, LOCK_EX | LOCK_NB)) {
		ret = -EBUSY;
		snprintf(msg, msglen, "%s: another dmextract or dmsync is "
			 "running on it", e->name);
		goto fail;
	}

	if (mode != DS_SNAP_OFF) {
		ret = view_create(dm, e, mode, msg, msglen);
		if (ret)
			goto fail;
	}
	/*
	 * The file-system freeze window holds the dm-track freeze message
	 * and nothing else: every write the file system has acknowledged is
	 * in the frozen set, and the view's image is a clean file system.
	 */
	if (fs >= 0) {
		ret = ds_fs_freeze(fs, fsfreeze, msg, msglen);
		if (ret)
			goto fail;
	}
	if (e->view[0])
		ret = track_dm_freeze_snapshot(dm, limit, &e->epoch);
	else
		ret = track_dm_freeze(dm, &e->epoch);
	if (fs >= 0) {
		tret = ds_fs_thaw(fs, fsfreeze, tmsg, sizeof(tmsg));
		close(fs);
		fs = -1;
		if (tret) {
			/* Fail loudly even if the freeze worked: the
			 * caller aborts the epoch (e->dm is set). */
			if (!ret) {
				e->dm = dm;
				snprintf(msg, msglen, "%s", tmsg);
				return tret;
			}
			ds_err("%s", tmsg);
		}
	}
	if (ret) {
		snprintf(msg, msglen, "%s: freezing the dirty set failed: %s",
			 e->name, dm_hint(ret));
		goto fail;
	}
	e->dm = dm;	/* from here on the caller commits or aborts */
	ret = track_dm_get_status(dm, &st);
	if (ret) {
		snprintf(msg, msglen, "%s: reading its status failed: %s",
			 e->name, dm_hint(ret));
		return ret;
	}
	if (st.frozen_epoch != e->epoch) {
		snprintf(msg, msglen, "%s: froze epoch %" PRIu64 " but the "
			 "device reports %" PRIu64 " (did something else "
			 "freeze, commit or abort it?)", e->name, e->epoch,
			 st.frozen_epoch);
		return -ESTALE;
	}
	e->base = st.committed_epoch;
	e->block_size = st.block_size;
	e->nr_blocks = st.nr_blocks;
	e->dirty_blocks = st.dirty_frozen;
	/*
	 * The tracking id names the epoch sequence: a tracker set up again
	 * starts new epochs and gets a new id, so a replica's state file
	 * cannot mistake its epoch 3 for the old one's.
	 */
	snprintf(e->source_id, sizeof(e->source_id), "%s",
		 st.track_id[0] ? st.track_id : track_dm_uuid(dm)[0] ?
		 track_dm_uuid(dm) : e->name);
	return 0;
fail:
	if (fs >= 0)
		close(fs);
	if (e->view[0])
		track_dm_remove(e->view);
	e->view[0] = 0;
	if (e->lock_fd >= 0)
		close(e->lock_fd);
	e->lock_fd = -1;
	track_dm_free(dm);
	return ret;
}

int ds_epoch_for_each(struct ds_epoch *e,
		      int (*fn)(uint64_t first, uint64_t count, void *arg),
		      void *arg, char *msg, size_t msglen)
{
	int ret = track_dm_for_each_extent(e->dm, TRACK_DM_FROZEN, fn, arg);

	if (ret)
		snprintf(msg, msglen, "%s: reading the frozen set failed: %s",
			 e->name, dm_hint(ret));
	return ret;
}

void ds_epoch_explain(struct ds_epoch *e)
{
	struct track_dm_status st;
	char a[32];

	if (!e->dm || !e->view[0] || track_dm_get_status(e->dm, &st) ||
	    st.snapshot != TRACK_DM_SNAP_FAILED)
		return;
	ds_err("%s: the snapshot of epoch %" PRIu64 " failed (the data "
	       "preserved for it reached its limit of %s, or see the kernel "
	       "log): the copy is not an image of the freeze; aborting, the "
	       "blocks stay dirty (raise --snapshot=LIMIT, or sync when "
	       "fewer writes come)", e->name, e->epoch,
	       ds_human(st.snap_limit, a, sizeof(a)));
}

int ds_epoch_commit(struct ds_epoch *e)
{
	int ret = track_dm_commit(e->dm, e->epoch);

	if (ret == -EIO && e->view[0]) {
		ds_epoch_explain(e);
		return ret;
	}
	if (ret)
		ds_err("%s: committing epoch %" PRIu64 " failed: %s; the "
		       "replica has the blocks, the next sync sends them "
		       "again", e->name, e->epoch, ret == -ESTALE ?
		       "it is no longer the frozen epoch" : dm_hint(ret));
	return ret;
}

int ds_epoch_abort(struct ds_epoch *e)
{
	int ret = track_dm_abort(e->dm, e->epoch);

	if (ret == -ESTALE)
		ds_err("%s: epoch %" PRIu64 " was no longer frozen; nothing "
		       "to abort", e->name, e->epoch);
	else if (ret)
		ds_err("%s: aborting epoch %" PRIu64 " failed: %s; it stays "
		       "frozen and the next extraction merges it", e->name,
		       e->epoch, dm_hint(ret));
	return ret;
}

void ds_epoch_close(struct ds_epoch *e)
{
	if (e->view[0])
		track_dm_remove(e->view);
	e->view[0] = 0;
	if (e->dm)
		track_dm_free(e->dm);
	e->dm = NULL;
	if (e->lock_fd >= 0)
		close(e->lock_fd);
	e->lock_fd = -1;
}
