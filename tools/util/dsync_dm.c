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

/* The name view_create() gives the views of NAME, without the pid. */
static void view_prefix(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%.90s-view", name);
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
	char prefix[96];	/* "%.90s-view" */
	int ret;

	view_prefix(e->name, prefix, sizeof(prefix));
	snprintf(e->view, sizeof(e->view), "%s%ld", prefix, (long)getpid());
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

struct stale_views {
	const char *prefix;
	struct track_dm *dm;
	char removed[1024];	/* "a-view1, a-view2" */
	char busy[512];		/* the first one that could not go */
	int busy_err;
	int count;
};

/* Remove VIEW if view_create() named it: "<name>-view<pid>". */
static int stale_view(const char *view, void *arg)
{
	struct stale_views *s = arg;
	size_t n = strlen(s->prefix), len;
	const char *p = view + n;
	int i, ret;

	if (strncmp(view, s->prefix, n) || !*p || strspn(p, "0123456789") !=
	    strlen(p))
		return 0;	/* somebody else's view: not ours to remove */
	/*
	 * The reads a killed run had in flight (an io_uring's) hold the view
	 * open for a moment after its lock is gone: give them 2 s.
	 */
	for (i = 0; i < 20; i++) {
		ret = track_dm_view_remove(s->dm, view);
		if (ret != -EBUSY)
			break;
		usleep(100000);
	}
	if (ret == -ENODEV)
		return 0;	/* gone meanwhile */
	if (ret) {
		if (!s->busy[0]) {
			snprintf(s->busy, sizeof(s->busy), "%s", view);
			s->busy_err = ret;
		}
		return 0;
	}
	len = strlen(s->removed);
	if (len + strlen(view) + 3 < sizeof(s->removed))
		snprintf(s->removed + len, sizeof(s->removed) - len, "%s%s",
			 len ? ", " : "", view);
	s->count++;
	return 0;
}

/*
 * Called with the device's lock held, so no other dmextract or dmsync
 * runs on it: a view of it named as view_create() names them was left by
 * one that was killed (SIGKILL) before it could remove it; a crash leaves
 * none, device-mapper devices do not outlive a reboot. Such
 * a view holds the track device's data device open, and a read of it
 * during our snapshot would mark frozen blocks read that our copy has not
 * read (dm-track.rst, "Snapshot mode"): remove it. Only a view that is
 * still open cannot go; that fails a snapshot sync (MODE not OFF).
 */
static int views_clean(struct track_dm *dm, const char *name,
		       enum ds_snapshot mode, char *msg, size_t msglen)
{
	struct stale_views s = { .dm = dm };
	char prefix[96];	/* "%.90s-view" */
	const char *why;
	int ret;

	view_prefix(name, prefix, sizeof(prefix));
	s.prefix = prefix;
	ret = track_dm_for_each_view(dm, stale_view, &s);
	if (s.count)
		ds_err("%s: removed %s: %s left by a dmextract or dmsync "
		       "that was killed before it could remove %s", name,
		       s.removed, s.count > 1 ? "snapshot views" :
		       "a snapshot view", s.count > 1 ? "them" : "it");
	if (ret) {
		/* Listing failed (EACCES, ...): the freeze will say more. */
		ds_err("%s: looking for snapshot views left by a killed "
		       "dmextract or dmsync failed: %s", name, dm_hint(ret));
		return 0;
	}
	if (!s.busy[0])
		return 0;
	why = s.busy_err == -EBUSY ? "it is open" : dm_hint(s.busy_err);
	if (mode == DS_SNAP_OFF) {
		ds_err("%s: %s, a snapshot view left by a killed dmextract or "
		       "dmsync, cannot be removed: %s; close what has it open "
		       "and run 'dmsetup remove %s'", name, s.busy, why,
		       s.busy);
		return 0;
	}
	snprintf(msg, msglen, "%s: %s, a snapshot view left by a killed "
		 "dmextract or dmsync, cannot be removed: %s; a read of it "
		 "would spoil this sync's snapshot. Close what has it open "
		 "and run 'dmsetup remove %s', or sync with --no-snapshot",
		 name, s.busy, why, s.busy);
	return s.busy_err;
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
	ret = views_clean(dm, e->name, mode, msg, msglen);
	if (ret)
		goto fail;

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
	char a[32], b[32];

	if (!e->dm || !e->view[0] || track_dm_get_status(e->dm, &st) ||
	    st.snapshot != TRACK_DM_SNAP_FAILED)
		return;
	if (st.snap_cow_size)
		ds_err("%s: the snapshot of epoch %" PRIu64 " failed (the "
		       "data preserved for it filled its limit of %s in "
		       "memory and the COW device of %s, or see the kernel "
		       "log): the copy is not an image of the freeze; "
		       "aborting, the blocks stay dirty (give the table a "
		       "larger cow_dev, raise --snapshot=LIMIT, or sync when "
		       "fewer writes come)", e->name, e->epoch,
		       ds_human(st.snap_limit, a, sizeof(a)),
		       ds_human(st.snap_cow_size, b, sizeof(b)));
	else
		ds_err("%s: the snapshot of epoch %" PRIu64 " failed (the "
		       "data preserved for it reached its limit of %s, or "
		       "see the kernel log): the copy is not an image of the "
		       "freeze; aborting, the blocks stay dirty (raise "
		       "--snapshot=LIMIT, give the table a cow_dev, or sync "
		       "when fewer writes come)", e->name, e->epoch,
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
