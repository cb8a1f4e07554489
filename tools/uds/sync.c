// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The sync engine: decide, for one path, what to do from what each side
 * looks like now and what it looked like after the last sync (the
 * baseline), and do it without ever losing either side's data.
 *
 *   S changed, D not      push: D := S (ranges, a block delta, or a copy)
 *   D changed, S not      pull: S := D (a copy, renamed into place)
 *   both changed          equal content: record it; one side deleted: keep
 *                         the other; otherwise keep both, D's version as a
 *                         Dropbox-style conflict copy, S's in the path
 *
 * "Changed" means lstat() differs from the baseline, or an event said so.
 * Deletions only ever remove what matches the baseline: something nobody
 * synced is never deleted. Renames are replayed as renames when both ends
 * check out, and otherwise fall back to the rules above.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "uds.h"

#define ECHO_MS		3000		/* our own S events come within this */
#define RACY_NS		(2LL * 1000000000)

static const struct snap no_snap;

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void uds_set_error(struct uds *u, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(u->last_error, sizeof(u->last_error), fmt, ap);
	va_end(ap);
	u->st.errors++;
	err_("%s", u->last_error);
}

static char *join(const char *dir, const char *name)
{
	char *p;

	if (!dir[0])
		return strdup(name);
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

bool uds_ignored(const struct uds *u, const char *path)
{
	const char *p = path;
	char comp[NAME_MAX + 1];

	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n > NAME_MAX)
			n = NAME_MAX;
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (fsx_is_temp_name(comp))
			return true;
		for (size_t i = 0; i < u->cfg->nr_ignore; i++)
			if (!fnmatch(u->cfg->ignore[i], comp, FNM_PERIOD))
				return true;
		p = e ? e + 1 : p + strlen(p);
	}
	return false;
}

/* --- the three maps --------------------------------------------------- */

static void free_ldirty(void *v)
{
	struct ldirty *d = v;

	if (d) {
		track_extents_free(d->ext);
		free(d);
	}
}

struct ldirty *uds_mark_local(struct uds *u, const char *path,
			      unsigned int flags)
{
	struct ldirty *d = hmap_get(&u->ldirty, path);

	if (!d) {
		struct entry *b = hmap_get(&u->base, path);

		d = calloc(1, sizeof(*d));
		if (!d || track_extents_new(0, &d->ext) ||
		    hmap_put(&u->ldirty, path, d, NULL)) {
			if (d)
				track_extents_free(d->ext);
			free(d);
			err_("out of memory; rescanning later");
			u->need_rescan_s = true;
			return NULL;
		}
		d->seen_size = b ? b->s.size : 0;
	}
	d->flags |= flags;
	return d;
}

void uds_mark_remote(struct uds *u, const char *path)
{
	if (hmap_put(&u->rdirty, path, (void *)1, NULL)) {
		err_("out of memory; rescanning later");
		u->need_rescan_d = true;
	}
	u->rdirty_at = now_ms();
}

/* Mark every entry below directory PATH of one side, for the next pass. */
static void mark_tree(struct uds *u, int rootfd, const char *path, bool local)
{
	int fd = fsx_open_dir(rootfd, path);
	struct dirent *de;
	DIR *d;

	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d))) {
		char *p;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		p = join(path, de->d_name);
		if (!p)
			break;
		if (!uds_ignored(u, p)) {
			if (local)
				uds_mark_local(u, p, LD_CHECK);
			else
				uds_mark_remote(u, p);
			if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN)
				mark_tree(u, rootfd, p, local);
		}
		free(p);
	}
	closedir(d);
}

void uds_mark_local_tree(struct uds *u, const char *path)
{
	uds_mark_local(u, path, LD_CHECK);
	mark_tree(u, u->sfd, path, true);
}

static struct entry *base_get(struct uds *u, const char *p)
{
	return hmap_get(&u->base, p);
}

static void base_set(struct uds *u, const char *p, const struct snap *s,
		     const struct snap *d)
{
	struct entry *e = base_get(u, p);

	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e || hmap_put(&u->base, p, e, NULL)) {
			free(e);
			u->need_rescan_s = u->need_rescan_d = true;
			return;
		}
	}
	e->s = *s;
	e->d = *d;
	e->inflight = false;
	e->racy = s->type == 'f' && s->ctime_ns >= wall_ns() - RACY_NS;
	journal_set(&u->j, p, e);
}

static void base_drop(struct uds *u, const char *p)
{
	if (!base_get(u, p))
		return;
	journal_map_drop(&u->base, p);
	journal_drop(&u->j, p);
}

/* Make the start of an in-place push of P durable before it starts. */
static int base_begin(struct uds *u, const char *p)
{
	struct entry *e = base_get(u, p);

	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e || hmap_put(&u->base, p, e, NULL)) {
			free(e);
			return -ENOMEM;
		}
	}
	e->inflight = true;
	journal_begin(&u->j, p);
	return journal_commit(&u->j);
}

/*
 * A rename replayed on the other side: the baseline follows. Pending
 * changes of the side where the rename happened were moved when its event
 * came; those of the side we just renamed in move now.
 */
static void maps_rename(struct uds *u, const char *from, const char *to,
			bool in_s)
{
	journal_map_rename(&u->base, from, to);
	journal_rename(&u->j, from, to);
	if (in_s) {
		hmap_rename_tree(&u->ldirty, from, to, free_ldirty);
	} else {
		hmap_rename_tree(&u->rdirty, from, to, NULL);
	}
}

/* Only the ctime moved (a rename does that): take the new snap. */
static void refresh_ctime(struct snap *b, const struct snap *now)
{
	if (now->type == b->type && now->ino == b->ino &&
	    now->size == b->size && now->mtime_ns == b->mtime_ns &&
	    now->mode == b->mode)
		*b = *now;
}

/* --- errors ------------------------------------------------------------ */

/* Errors after which this cycle stops and is retried later. */
static bool fatal(int err)
{
	return err == -ENOSPC || err == -EDQUOT || err == -EIO ||
	       err == -EROFS || err == -ENOMEM || err == -EMFILE ||
	       err == -ENFILE || err == -ESTALE || err == -ENOTCONN;
}

static void report(struct uds *u, const char *what, const char *side,
		   const char *p, int err)
{
	const char *hint = "";

	if (err == -ENOSPC || err == -EDQUOT)
		hint = "; the file system is full: free some space, nothing "
		       "is lost meanwhile, pending changes stay pending";
	else if (err == -EROFS)
		hint = "; the file system is read-only";
	else if (err == -EACCES || err == -EPERM)
		hint = "; check the permissions (it is tried again when it "
		       "changes)";
	uds_set_error(u, "%s %s '%s': %s%s", what, side, log_path(p),
		      strerror(-err), hint);
}

/* --- removing trees, carefully ------------------------------------------ */

/*
 * Remove directory P of one side (rootfd) and what is below it, but only
 * entries that match their baseline on that side: anything else was
 * changed by someone after the last sync and is kept (and marked, so it is
 * synced back). Returns 0 if P is gone, 1 if something was kept.
 */
static int remove_tree(struct uds *u, bool local, const char *p)
{
	int rootfd = local ? u->sfd : u->dfd;
	int fd = fsx_open_dir(rootfd, p), kept = 0, err;
	struct dirent *de;
	DIR *d;

	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	while ((de = readdir(d))) {
		struct entry *b;
		struct snap cur;
		struct stat st;
		char *c;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		c = join(p, de->d_name);
		if (!c) {
			kept = 1;
			break;
		}
		snap_from_stat(&cur, &st);
		b = base_get(u, c);
		if (fsx_is_temp_name(de->d_name)) {
			unlinkat(dirfd(d), de->d_name, 0);
		} else if (cur.type == 'd') {
			err = remove_tree(u, local, c);
			if (err)
				kept = 1;
		} else if (b && snap_eq(&cur, local ? &b->s : &b->d) &&
			   !(local && hmap_get(&u->ldirty, c))) {
			if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
				base_drop(u, c);
			} else {
				kept = 1;
			}
		} else {
			/* Changed since the last sync: keep it, sync it back. */
			if (!uds_ignored(u, c)) {
				notice_("keeping '%s' in %s: it changed after "
					"the last sync", log_path(c),
					local ? "SAVINGBOX" : "SYNCFOLDER");
				if (local)
					uds_mark_local(u, c, LD_CHECK);
				else
					uds_mark_remote(u, c);
			}
			kept = 1;
		}
		free(c);
	}
	closedir(d);
	if (!kept) {
		err = fsx_remove(rootfd, p, true);
		if (err == -ENOTEMPTY || err == -EEXIST)
			return 1;
		if (err && err != -ENOENT)
			return err;
		base_drop(u, p);
	} else {
		/* Make sure the directory comes back on the other side. */
		if (local)
			uds_mark_local(u, p, LD_CHECK);
		else
			uds_mark_remote(u, p);
	}
	return kept;
}

/* --- pushing (S -> D) --------------------------------------------------- */

struct pass {
	char **dirs;		/* directories to remove at the end */
	size_t nr_dirs;
	bool wrote;		/* something changed in either folder */
	bool wrote_d;		/* ... in SYNCFOLDER: the client sees a sync */
	bool wrote_s;		/* ... in SAVINGBOX */
};

static void pass_wrote(struct uds *u, struct pass *ps, bool into_d,
		       const char *p)
{
	ps->wrote = true;
	if (into_d) {
		ps->wrote_d = true;
		client_wrote(u->cfg, p);
	} else {
		ps->wrote_s = true;
	}
}

static void defer_dir(struct pass *ps, const char *p)
{
	char **v = realloc(ps->dirs, (ps->nr_dirs + 1) * sizeof(*v));

	if (!v)
		return;
	ps->dirs = v;
	v[ps->nr_dirs] = strdup(p);
	if (v[ps->nr_dirs])
		ps->nr_dirs++;
}

static int cmp_rev(const void *a, const void *b)
{
	return strcmp(*(char *const *)b, *(char *const *)a);
}

static int finish_pass(struct uds *u, struct pass *ps)
{
	int ret = 0;

	/* Children before parents. */
	qsort(ps->dirs, ps->nr_dirs, sizeof(*ps->dirs), cmp_rev);
	for (size_t i = 0; i < ps->nr_dirs; i++) {
		/* The side is decided again: the target is where it exists. */
		struct snap ls, rs;
		int err;

		fsx_snap(u->sfd, ps->dirs[i], &ls);
		fsx_snap(u->dfd, ps->dirs[i], &rs);
		bool in_d = ls.type == 0 && rs.type == 'd';

		if (in_d)
			err = remove_tree(u, false, ps->dirs[i]);
		else if (rs.type == 0 && ls.type == 'd')
			err = remove_tree(u, true, ps->dirs[i]);
		else
			err = 1;
		if (err < 0 && !ret) {
			report(u, "cannot remove", "directory", ps->dirs[i],
			       err);
			ret = err;
		}
		if (err == 0)
			pass_wrote(u, ps, in_d, ps->dirs[i]);
		free(ps->dirs[i]);
	}
	free(ps->dirs);
	ps->dirs = NULL;
	ps->nr_dirs = 0;
	return ret;
}

static int set_attrs(int fd, const struct stat *want, const struct stat *have)
{
	mode_t mode = want->st_mode & 01777;	/* never set-id bits */

	if ((have->st_mode & 07777) != mode && fchmod(fd, mode))
		return -errno;
	if (have->st_mtim.tv_sec != want->st_mtim.tv_sec ||
	    have->st_mtim.tv_nsec != want->st_mtim.tv_nsec) {
		struct timespec ts[2] = {
			{ .tv_nsec = UTIME_OMIT },
			want->st_mtim,
		};

		if (futimens(fd, ts))
			return -errno;
	}
	return 0;
}

enum content { C_NONE, C_RANGES, C_WHOLE };

/*
 * An in-place push into DF failed (a full disk, most often, while the file
 * grew): cut DF back to the size it had, BEFORE, so that the cloud client
 * never uploads a copy with a torn tail. What grew is pushed again later.
 */
static void untear(int df, const struct stat *before, const char *p)
{
	struct stat now;

	if (fstat(df, &now) || now.st_size <= before->st_size)
		return;
	if (ftruncate(df, before->st_size))
		warn_("cannot cut '%s' in SYNCFOLDER back to %lld bytes after a failed push: %s; it is pushed whole once there is space",
		      log_path(p), (long long)before->st_size,
		      strerror(errno));
}

/*
 * Before an in-place push that grows DF from its size in BEFORE to SIZE:
 * reserve the blocks of the growth without changing DF's size. On a full
 * disk the push then fails here, before a byte is written, instead of
 * half-way, when the file would have a torn tail until untear() cut it
 * back: a window in which the cloud client could upload it (a test under
 * load saw the torn file there). A file system that cannot reserve
 * (EOPNOTSUPP) gets the old way: write, and untear() on failure.
 */
static int reserve_growth(int df, const struct stat *before, off_t size)
{
	if (size <= before->st_size)
		return 0;
	if (!fallocate(df, FALLOC_FL_KEEP_SIZE, before->st_size,
		       size - before->st_size))
		return 0;
	if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)
		return 0;
	return -errno;
}

/*
 * Copy regular file P from one side to the other. FROM_S: S -> D (a push)
 * or D -> S (a pull). TO is what the target side has (absent, or matching
 * its baseline). Pushes into an existing file write in place (ranges or a
 * block delta); everything else goes through a temporary and a rename.
 */
/*
 * Fallback mode knows that a file changed, not where: a push compares it
 * with SYNCFOLDER's copy. For files of SUMS_MIN and more, uds-plus keeps
 * the hashes of the blocks it pushed (with what SYNCFOLDER's file looked
 * like right after), so the next push reads SAVINGBOX's copy and, of
 * SYNCFOLDER's, only the blocks whose hash changed. Kept in memory only
 * (the first push after a start reads both, unless the start copied the
 * file), up to SUMS_BUDGET in all
 * (16 bytes per 4 KiB: 64 MiB covers 16 GiB of large files).
 */
#define SUMS_MIN	(4u << 20)
#define SUMS_BUDGET	(64ull << 20)

struct pushed_sums {
	struct snap d;		/* SYNCFOLDER's file when they were taken */
	struct blocksums bs;
};

static void free_sums(void *v)
{
	struct pushed_sums *ps = v;

	if (ps)
		fsx_sums_free(&ps->bs);
	free(ps);
}

static void drop_sums(struct uds *u, const char *p)
{
	struct pushed_sums *ps = hmap_del(&u->sums, p);

	if (ps) {
		u->sums_bytes -= ps->bs.n * sizeof(*ps->bs.h);
		free_sums(ps);
	}
}

/* In-place push of a whole file: with the sums when it is large. */
static int push_whole(struct uds *u, const char *p, int sf, int df,
		      const struct stat *sst, const struct stat *dst,
		      struct copy_stats *cs)
{
	struct pushed_sums *ps = hmap_get(&u->sums, p);
	struct snap now;
	bool valid;
	int err;

	if ((uint64_t)sst->st_size < SUMS_MIN && !ps)
		return fsx_delta(sf, df, (uint64_t)sst->st_size, NULL, cs);
	if (!ps) {
		if (u->sums_bytes + ((uint64_t)sst->st_size / 4096 + 1) * 16 >
		    SUMS_BUDGET)
			return fsx_delta(sf, df, (uint64_t)sst->st_size, NULL,
					 cs);
		ps = calloc(1, sizeof(*ps));
		if (!ps || hmap_put(&u->sums, p, ps, NULL)) {
			free(ps);
			return fsx_delta(sf, df, (uint64_t)sst->st_size, NULL,
					 cs);
		}
	}
	snap_from_stat(&now, dst);
	/* Valid only for the very file, untouched since (ctime too). */
	valid = ps->bs.h && now.ino == ps->d.ino && now.size == ps->d.size &&
		now.mtime_ns == ps->d.mtime_ns && now.ctime_ns == ps->d.ctime_ns;
	u->sums_bytes -= ps->bs.n * sizeof(*ps->bs.h);
	err = fsx_delta_sums(sf, df, (uint64_t)sst->st_size, &ps->bs, valid,
			     cs);
	u->sums_bytes += ps->bs.n * sizeof(*ps->bs.h);
	ps->d.ino = 0;		/* set once the push is complete */
	if (err)
		drop_sums(u, p);
	return err;
}

/* The push of P is complete and SYNCFOLDER's file is D: sums are valid. */
static void sums_done(struct uds *u, const char *p, const struct snap *d)
{
	struct pushed_sums *ps = hmap_get(&u->sums, p);

	if (ps)
		ps->d = *d;
}

static int copy_file(struct uds *u, const char *p, bool from_s,
		     const struct snap *to, enum content how,
		     const struct track_extents *ext, struct pass *ps)
{
	int src_root = from_s ? u->sfd : u->dfd;
	int dst_root = from_s ? u->dfd : u->sfd;
	struct copy_stats cs = { 0 };
	struct stat sst, dst;
	struct snap ssnap, dsnap;
	const char *sname, *dname;
	char tmpname[64] = "";
	int spfd, dpfd = -1, sf = -1, df = -1, err;
	bool in_place = from_s && to->type == 'f';
	bool changed = false;

	spfd = fsx_open_parent(src_root, p, &sname, false, -1);
	if (spfd < 0)
		return spfd == -ENOENT || spfd == -ENOTDIR ? 0 : spfd;
	sf = openat(spfd, sname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
		    O_CLOEXEC);
	close(spfd);
	if (sf < 0)
		return errno == ENOENT || errno == ELOOP ? 0 : -errno;
	if (fstat(sf, &sst)) {
		err = -errno;
		goto out;
	}
	if (!S_ISREG(sst.st_mode)) {
		err = 0;	/* replaced meanwhile: the next event tells */
		goto out;
	}
	snap_from_stat(&ssnap, &sst);
	dpfd = fsx_open_parent(dst_root, p, &dname, true, src_root);
	if (dpfd < 0) {
		err = dpfd;
		goto out;
	}

	if (in_place) {
		df = openat(dpfd, dname, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (df < 0) {
			err = -errno;
			goto out;
		}
		if (fstat(df, &dst)) {
			err = -errno;
			goto out;
		}
		if (dst.st_ino != to->ino) {
			/* Replaced since we looked: decide again later. */
			uds_mark_remote(u, p);
			err = 0;
			goto out;
		}
		err = base_begin(u, p);
		if (err)
			goto out;
		if (how != C_NONE)
			err = reserve_growth(df, &dst, sst.st_size);
		if (err)
			goto out;
		if (how == C_RANGES) {
			struct track_extents *grow;

			/* Cover any growth too, whatever the events said. */
			err = track_extents_new(0, &grow);
			if (err)
				goto out;
			err = track_extents_merge(grow, ext);
			if (!err &&
			    (uint64_t)sst.st_size > (uint64_t)dst.st_size)
				err = track_extents_add(grow,
					(uint64_t)dst.st_size,
					(uint64_t)(sst.st_size - dst.st_size));
			if (!err)
				err = fsx_delta(sf, df, (uint64_t)sst.st_size,
						grow, &cs);
			track_extents_free(grow);
		} else if (how == C_WHOLE) {
			err = push_whole(u, p, sf, df, &sst, &dst, &cs);
		} else if (sst.st_size != dst.st_size) {
			err = ftruncate(df, sst.st_size) ? -errno : 0;
		}
		if (err) {
			untear(df, &dst, p);
			goto out;
		}
		changed = cs.written || sst.st_size != dst.st_size;
		err = set_attrs(df, &sst, &dst);
		if (err)
			goto out;
		changed |= (dst.st_mode & 07777) != (sst.st_mode & 01777) ||
			   dst.st_mtim.tv_sec != sst.st_mtim.tv_sec ||
			   dst.st_mtim.tv_nsec != sst.st_mtim.tv_nsec;
		if (changed && u->cfg->fsync && fdatasync(df)) {
			err = -errno;
			goto out;
		}
	} else {
		struct stat empty;

		if (from_s) {
			err = base_begin(u, p);
			if (err)
				goto out;
		}
		df = fsx_tmpfile(dpfd, tmpname);
		if (df < 0) {
			err = df;
			df = -1;
			goto out;
		}
		if (from_s && (uint64_t)sst.st_size >= SUMS_MIN) {
			/*
			 * A large new file: keep the hashes of what was
			 * copied, so that its next push reads it once, not
			 * both copies whole.
			 */
			err = fstat(df, &empty) ? -errno :
			      push_whole(u, p, sf, df, &sst, &empty, &cs);
		} else {
			err = fsx_copy_all(sf, df, (uint64_t)sst.st_size, &cs);
		}
		if (!err && fstat(df, &empty))
			err = -errno;
		if (!err)
			err = set_attrs(df, &sst, &empty);
		if (!err && u->cfg->fsync && fdatasync(df))
			err = -errno;
		if (!err && !from_s) {
			/* Last look: did the user touch it meanwhile? */
			struct snap now;

			fsx_snap(dst_root, p, &now);
			if (!snap_eq(&now, to)) {
				fsx_discard(dpfd, tmpname);
				uds_mark_local(u, p, LD_CHECK);
				uds_mark_remote(u, p);
				err = 0;
				goto out;
			}
		}
		if (!err)
			err = fsx_publish(dpfd, df, tmpname, dname,
					  to->type != 0);
		if (err == -EEXIST) {
			/* Something appeared there: decide again. */
			fsx_discard(dpfd, tmpname);
			uds_mark_remote(u, p);
			uds_mark_local(u, p, LD_CHECK);
			err = 0;
			goto out;
		}
		if (err) {
			fsx_discard(dpfd, tmpname);
			goto out;
		}
		changed = true;
	}
	if (fstat(df, &dst)) {
		err = -errno;
		goto out;
	}
	snap_from_stat(&dsnap, &dst);
	if (from_s) {
		sums_done(u, p, &dsnap);
		base_set(u, p, &ssnap, &dsnap);
		if (changed) {
			u->st.files_pushed++;
			u->st.bytes_pushed += cs.written;
			if ((uint64_t)dsnap.size > u->push_max)
				u->push_max = (uint64_t)dsnap.size;
			pass_wrote(u, ps, true, p);
		}
	} else {
		struct entry *e;

		base_set(u, p, &dsnap, &ssnap);
		e = base_get(u, p);
		if (e)
			e->echo_until = now_ms() + ECHO_MS;
		u->st.files_pulled++;
		u->st.bytes_pulled += cs.written;
		pass_wrote(u, ps, false, p);
	}
	u->st.bytes_read += cs.read;
	debug_("%s '%s': %llu bytes read, %llu written (%s)",
	       from_s ? "pushed" : "pulled", log_path(p),
	       (unsigned long long)cs.read, (unsigned long long)cs.written,
	       how == C_RANGES ? "ranges" : how == C_WHOLE ?
	       (in_place ? "block delta" : "copy") : "attributes");
	err = 0;
out:
	if (err)
		u->st.bytes_read += cs.read;
	if (sf >= 0)
		close(sf);
	if (df >= 0)
		close(df);
	if (dpfd >= 0)
		close(dpfd);
	return err;
}

/* Mirror symlink P (the link itself, never what it points to). */
static int copy_link(struct uds *u, const char *p, bool from_s,
		     struct pass *ps)
{
	int src_root = from_s ? u->sfd : u->dfd;
	int dst_root = from_s ? u->dfd : u->sfd;
	char target[PATH_MAX + 1], have[PATH_MAX + 1];
	struct snap s, d;
	const char *sname, *dname;
	ssize_t n, m;
	int spfd, dpfd, err = 0;

	spfd = fsx_open_parent(src_root, p, &sname, false, -1);
	if (spfd < 0)
		return spfd == -ENOENT ? 0 : spfd;
	n = readlinkat(spfd, sname, target, sizeof(target) - 1);
	close(spfd);
	if (n < 0)
		return errno == ENOENT || errno == EINVAL ? 0 : -errno;
	target[n] = '\0';
	dpfd = fsx_open_parent(dst_root, p, &dname, true, src_root);
	if (dpfd < 0)
		return dpfd;
	m = readlinkat(dpfd, dname, have, sizeof(have) - 1);
	if (m != n || memcmp(have, target, (size_t)n))
		err = fsx_symlink(dpfd, dname, target);
	close(dpfd);
	if (err)
		return err;
	fsx_snap(src_root, p, &s);
	fsx_snap(dst_root, p, &d);
	if (from_s) {
		base_set(u, p, &s, &d);
		u->st.files_pushed++;
		pass_wrote(u, ps, true, p);
	} else {
		struct entry *e;

		base_set(u, p, &d, &s);
		e = base_get(u, p);
		if (e)
			e->echo_until = now_ms() + ECHO_MS;
		u->st.files_pulled++;
		pass_wrote(u, ps, false, p);
	}
	return 0;
}

/* Make directory P exist on the target side with the source's mode. */
static int copy_dir(struct uds *u, const char *p, bool from_s,
		    const struct snap *src, const struct snap *to,
		    struct pass *ps)
{
	int dst_root = from_s ? u->dfd : u->sfd;
	int src_root = from_s ? u->sfd : u->dfd;
	const char *name;
	struct snap now;
	int pfd, err = 0;

	pfd = fsx_open_parent(dst_root, p, &name, true, src_root);
	if (pfd < 0)
		return pfd;
	if (to->type == 0) {
		if (mkdirat(pfd, name, src->mode & 01777) && errno != EEXIST)
			err = -errno;
		else
			pass_wrote(u, ps, from_s, p);
	} else if (to->mode != (src->mode & 01777)) {
		if (fchmodat(pfd, name, src->mode & 01777, 0))
			err = -errno;
		else
			pass_wrote(u, ps, from_s, p);
	}
	close(pfd);
	if (err)
		return err;
	fsx_snap(dst_root, p, &now);
	if (from_s) {
		base_set(u, p, src, &now);
	} else {
		struct entry *e;

		base_set(u, p, &now, src);
		e = base_get(u, p);
		if (e)
			e->echo_until = now_ms() + ECHO_MS;
	}
	if (to->type == 0)	/* new: everything below it, too */
		mark_tree(u, src_root, p, from_s);
	return 0;
}

/* Remove P on the target side (it matches its baseline there). */
static int remove_path(struct uds *u, const char *p, bool local,
		       const struct snap *cur, struct pass *ps)
{
	int err;

	if (cur->type == 'd') {
		defer_dir(ps, p);
		return 0;
	}
	err = fsx_remove(local ? u->sfd : u->dfd, p, false);
	if (err && err != -ENOENT)
		return err;
	base_drop(u, p);
	if (!local)
		drop_sums(u, p);
	pass_wrote(u, ps, !local, p);
	info_("removed '%s' from %s", log_path(p),
	      local ? "SAVINGBOX" : "SYNCFOLDER");
	return 0;
}

static int conflict(struct uds *u, const char *p, struct snap *rs);

/*
 * Make the target side of P like the source side. SRC is the source's
 * snap, TO the target's (absent, or matching the baseline).
 */
static int transfer(struct uds *u, const char *p, bool from_s,
		    const struct snap *src, struct snap *to,
		    enum content how, const struct track_extents *ext,
		    struct pass *ps)
{
	int err;

	if (src->type == 0)
		return to->type ? remove_path(u, p, !from_s, to, ps) : 0;
	if (src->type == 'o') {
		debug_("skipping '%s': not a file, directory or symlink",
		       log_path(p));
		return 0;
	}
	if (!from_s && to->type == 'd' && src->type == 'l') {
		/*
		 * A collaborator replaced a directory with a symlink. Taken
		 * as it is, every path below it in SAVINGBOX would lead
		 * wherever the link points (outside both folders, perhaps),
		 * and the user's programs follow links even if uds-plus
		 * does not. The directory stays; the link is kept beside
		 * it as a conflict copy, and the directory goes back.
		 */
		struct snap aside = *src;

		err = conflict(u, p, &aside);
		if (err)
			return err;
		/* SYNCFOLDER has nothing there now: a first sync of it. */
		base_drop(u, p);
		uds_mark_local_tree(u, p);
		return 0;
	}
	if (to->type && to->type != src->type) {
		/* A type change: what is there matches the baseline. */
		if (to->type == 'd') {
			err = remove_tree(u, !from_s, p);
			if (err < 0)
				return err;
			if (err > 0) {
				/*
				 * Something below the directory changed on
				 * its side since: keep both. SYNCFOLDER's
				 * version goes aside as a conflict copy.
				 */
				struct snap aside = from_s ? *to : *src;

				err = conflict(u, p, &aside);
				if (err)
					return err;
				if (!from_s) {
					uds_mark_local_tree(u, p);
					return 0;
				}
			}
		} else {
			err = fsx_remove(from_s ? u->dfd : u->sfd, p, false);
			if (err && err != -ENOENT)
				return err;
		}
		*to = no_snap;
		how = C_WHOLE;
	}
	switch (src->type) {
	case 'd':
		return copy_dir(u, p, from_s, src, to, ps);
	case 'l':
		return copy_link(u, p, from_s, ps);
	default:
		return copy_file(u, p, from_s, to, how, ext, ps);
	}
}

/* The remote copy of P goes aside as a conflict copy; both are kept. */
static int conflict(struct uds *u, const char *p, struct snap *rs)
{
	char cname[NAME_MAX + 1], *cpath, *dir;
	const char *name;
	int spfd, dpfd, err;

	dpfd = fsx_open_parent(u->dfd, p, &name, false, -1);
	if (dpfd < 0)
		return dpfd;
	spfd = fsx_open_parent(u->sfd, p, &name, true, u->dfd);
	if (spfd < 0) {
		close(dpfd);
		return spfd;
	}
	err = fsx_conflict_name(dpfd, spfd, name, u->cfg->hostname,
				time(NULL), cname, sizeof(cname));
	if (!err && renameat(dpfd, name, dpfd, cname))
		err = -errno;
	close(spfd);
	close(dpfd);
	if (err)
		return err;
	dir = strdup(p);
	if (!dir)
		return -ENOMEM;
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	else
		dir[0] = '\0';
	cpath = join(dir, cname);
	free(dir);
	if (!cpath)
		return -ENOMEM;
	client_wrote(u->cfg, p);
	client_wrote(u->cfg, cpath);
	/* The conflict copy comes back into SAVINGBOX like any new file. */
	uds_mark_remote(u, cpath);
	if (rs->type == 'd')
		mark_tree(u, u->dfd, cpath, false);
	u->st.conflicts++;
	warn_("conflict: '%s' changed in both folders; SAVINGBOX's version "
	      "stays, SYNCFOLDER's is kept as '%s'", log_path(p),
	      log_path(cpath));
	free(cpath);
	*rs = no_snap;
	return 0;
}

static bool same_content(struct uds *u, const char *p, const struct snap *a,
			 const struct snap *b)
{
	struct copy_stats cs = { 0 };
	const char *name;
	int pa, pb, fa, fb, r = 0;

	if (a->type != b->type)
		return false;
	if (a->type == 'd')
		return true;
	if (a->type == 'l') {
		char ta[PATH_MAX + 1], tb[PATH_MAX + 1];
		ssize_t na, nb;

		pa = fsx_open_parent(u->sfd, p, &name, false, -1);
		if (pa < 0)
			return false;
		na = readlinkat(pa, name, ta, sizeof(ta));
		close(pa);
		pb = fsx_open_parent(u->dfd, p, &name, false, -1);
		if (pb < 0)
			return false;
		nb = readlinkat(pb, name, tb, sizeof(tb));
		close(pb);
		return na >= 0 && na == nb && !memcmp(ta, tb, (size_t)na);
	}
	if (a->type != 'f' || a->size != b->size)
		return false;
	pa = fsx_open_parent(u->sfd, p, &name, false, -1);
	if (pa < 0)
		return false;
	fa = openat(pa, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(pa);
	pb = fsx_open_parent(u->dfd, p, &name, false, -1);
	if (pb < 0) {
		if (fa >= 0)
			close(fa);
		return false;
	}
	fb = openat(pb, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(pb);
	if (fa >= 0 && fb >= 0)
		r = fsx_same_content(fa, fb, &cs);
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	u->st.bytes_read += cs.read;
	return r == 1;
}

#define ALLOW_PUSH 1

/*
 * Put back what sync_path() took for a path it did not finish: its pending
 * changes (merged with any that came meanwhile) and its remote mark.
 */
static void restore_marks(struct uds *u, const char *p, struct ldirty *ld,
			  bool remote)
{
	if (ld) {
		struct ldirty *now = hmap_get(&u->ldirty, p);

		if (!now && !hmap_put(&u->ldirty, p, ld, NULL)) {
			ld = NULL;
		} else if (now) {
			/* Both: the ranges cannot be merged cheaply. */
			now->flags |= ld->flags | (ld->flags & LD_RANGES ?
						   LD_WHOLE : 0);
		} else {
			u->need_rescan_s = true;
		}
		free_ldirty(ld);
	}
	if (remote)
		uds_mark_remote(u, p);
}

/*
 * Bring path P in line. Its marks are taken out of the maps first, so
 * whatever the transfer marks again (something changed under it) stays
 * for the next round. Returns 0 or a negative errno (marks restored).
 */
static int sync_path(struct uds *u, const char *p, int allow,
		     struct pass *ps)
{
	struct entry *b = base_get(u, p);
	struct ldirty *ld = hmap_del(&u->ldirty, p);
	bool remote = hmap_del(&u->rdirty, p) != NULL;
	const struct snap *bs = b ? &b->s : &no_snap;
	const struct snap *bd = b ? &b->d : &no_snap;
	unsigned int flags = ld ? ld->flags : 0;
	struct snap ls, rs;
	bool lchg, rchg;
	enum content how;
	int err;

	if (uds_ignored(u, p))
		goto done;
	err = fsx_snap(u->sfd, p, &ls);
	if (!err)
		err = fsx_snap(u->dfd, p, &rs);
	if (err)
		goto fail;
	lchg = !snap_eq(&ls, bs) || (flags & (LD_WHOLE | LD_RANGES | LD_ATTR));
	rchg = !snap_eq(&rs, bd);
	if (b && b->inflight && rchg) {
		/* Our own push into D was cut short: finish it. */
		rchg = false;
		lchg = true;
		flags |= LD_WHOLE;
	}

	if (!lchg && !rchg)
		goto done;

	if (lchg && !rchg) {
		if (!(allow & ALLOW_PUSH)) {
			/* Not now: it waits for the next push. */
			restore_marks(u, p, ld, false);
			uds_mark_local(u, p, LD_CHECK);
			return 0;
		}
		if (ls.type != 'f' || !b || b->s.ino != ls.ino ||
		    (flags & LD_WHOLE) || !(flags & (LD_RANGES | LD_ATTR)))
			how = C_WHOLE;
		else if (flags & LD_RANGES)	/* another name written too? */
			how = ls.nlink > 1 ? C_WHOLE : C_RANGES;
		else if (ls.size == bs->size && ls.mtime_ns == bs->mtime_ns)
			how = C_NONE;	/* chmod, chown, link count */
		else
			how = C_WHOLE;	/* touch, or data we were not told */
		err = transfer(u, p, true, &ls, &rs, how,
			       ld ? ld->ext : NULL, ps);
		if (err)
			goto fail;
		goto done;
	}

	if (!lchg && rchg) {
		err = transfer(u, p, false, &rs, &ls, C_WHOLE, NULL, ps);
		if (err)
			goto fail;
		goto done;
	}

	/* Both changed. */
	if (ls.type == 0 && rs.type == 0) {
		base_drop(u, p);
		goto done;
	}
	if (ls.type == rs.type && ls.type != 'o' && same_content(u, p, &ls,
								  &rs)) {
		/* Same data: attributes from SAVINGBOX, nothing else. */
		err = transfer(u, p, true, &ls, &rs, C_NONE, NULL, ps);
		if (err)
			goto fail;
		goto done;
	}
	if (ls.type == 0) {
		/* Deleted here, changed there: the change wins. */
		notice_("'%s' was deleted in SAVINGBOX but changed in "
			"SYNCFOLDER: keeping the changed one", log_path(p));
		err = transfer(u, p, false, &rs, &ls, C_WHOLE, NULL, ps);
		if (err)
			goto fail;
		goto done;
	}
	if (rs.type != 0) {
		err = conflict(u, p, &rs);
		if (err)
			goto fail;
	} else {
		notice_("'%s' was deleted in SYNCFOLDER but changed in "
			"SAVINGBOX: keeping the changed one", log_path(p));
	}
	err = transfer(u, p, true, &ls, &rs, C_WHOLE, NULL, ps);
	if (err)
		goto fail;
done:
	free_ldirty(ld);
	return 0;
fail:
	restore_marks(u, p, ld, remote);
	return err;
}

/* --- renames --------------------------------------------------------- */

static void add_op(struct rename_op **v, size_t *n, const char *from,
		   const char *to)
{
	struct rename_op *nv = realloc(*v, (*n + 1) * sizeof(*nv));

	if (!nv)
		return;
	*v = nv;
	nv[*n].from = strdup(from);
	nv[*n].to = strdup(to);
	if (nv[*n].from && nv[*n].to)
		(*n)++;
}

void uds_local_rename(struct uds *u, const char *from, const char *to,
		      bool isdir)
{
	/* Pending changes move with the file; the rename is replayed. */
	hmap_del_tree(&u->ldirty, to, free_ldirty);
	hmap_rename_tree(&u->ldirty, from, to, free_ldirty);
	if (base_get(u, from))
		add_op(&u->lren, &u->nr_lren, from, to);
	uds_mark_local(u, from, LD_CHECK);
	uds_mark_local(u, to, LD_CHECK);
	if (isdir && !base_get(u, from))
		uds_mark_local_tree(u, to);
}

void uds_remote_rename(struct uds *u, const char *from, const char *to)
{
	hmap_rename_tree(&u->rdirty, from, to, NULL);
	add_op(&u->rren, &u->nr_rren, from, to);
	uds_mark_remote(u, from);
	uds_mark_remote(u, to);
}

/*
 * Replay a rename done on one side (SRC_LOCAL: in S) on the other side,
 * if the other side still has the object as last synced. Otherwise do
 * nothing: both paths are marked, and sync_path() sorts them out.
 */
static int replay_rename(struct uds *u, const struct rename_op *op,
			 bool src_local)
{
	int src_root = src_local ? u->sfd : u->dfd;
	int dst_root = src_local ? u->dfd : u->sfd;
	struct entry *b = base_get(u, op->from), *bt;
	struct snap at_from, at_to, src_to;
	const char *fname, *tname;
	int fpfd, tpfd, err;

	if (!b || uds_ignored(u, op->to) || uds_ignored(u, op->from))
		return 0;
	fsx_snap(dst_root, op->from, &at_from);
	fsx_snap(dst_root, op->to, &at_to);
	fsx_snap(src_root, op->from, &src_to);
	if (src_to.type != 0)
		return 0;	/* the source path is back: no plain rename */
	if (!snap_eq(&at_from, src_local ? &b->d : &b->s))
		return 0;	/* changed on the target side since */
	if (!src_local) {
		struct snap d_to;

		fsx_snap(u->dfd, op->to, &d_to);
		if (d_to.ino != b->d.ino || d_to.type != b->d.type)
			return 0;
		if (hmap_get(&u->ldirty, op->from) && b->s.type != 'd')
			return 0;	/* local edits: sync_path decides */
	}
	bt = base_get(u, op->to);
	if (at_to.type != 0) {
		if (!bt || !snap_eq(&at_to, src_local ? &bt->d : &bt->s) ||
		    at_to.type == 'd')
			return 0;	/* not ours to replace */
	}
	fpfd = fsx_open_parent(dst_root, op->from, &fname, false, -1);
	if (fpfd < 0)
		return 0;
	tpfd = fsx_open_parent(dst_root, op->to, &tname, true, src_root);
	if (tpfd < 0) {
		close(fpfd);
		return tpfd;
	}
	err = renameat(fpfd, fname, tpfd, tname) ? -errno : 0;
	close(fpfd);
	close(tpfd);
	if (err)
		return err == -ENOENT || err == -ENOTEMPTY || err == -EEXIST ||
		       err == -EISDIR || err == -ENOTDIR ? 0 : err;
	maps_rename(u, op->from, op->to, !src_local);
	b = base_get(u, op->to);
	if (b) {
		struct snap s, d;

		/* A rename changes the ctime of what it moves. */
		fsx_snap(u->sfd, op->to, &s);
		fsx_snap(u->dfd, op->to, &d);
		refresh_ctime(&b->s, &s);
		refresh_ctime(&b->d, &d);
		if (!src_local)
			b->echo_until = now_ms() + ECHO_MS;
		journal_set(&u->j, op->to, b);
	}
	info_("renamed '%s' to '%s' in %s", log_path(op->from),
	      log_path(op->to), src_local ? "SYNCFOLDER" : "SAVINGBOX");
	return 1;
}

static int replay_renames(struct uds *u, bool local, struct pass *ps)
{
	struct rename_op *v = local ? u->lren : u->rren;
	size_t n = local ? u->nr_lren : u->nr_rren;
	int err = 0;

	for (size_t i = 0; i < n; i++) {
		if (!err) {
			err = replay_rename(u, &v[i], local);
			if (err > 0) {
				pass_wrote(u, ps, local, v[i].from);
				pass_wrote(u, ps, local, v[i].to);
				err = 0;
			} else if (!err) {
				/*
				 * Not replayed (say, moved over a directory
				 * the other side has): what the moved tree
				 * holds must be synced one by one.
				 */
				mark_tree(u, local ? u->sfd : u->dfd, v[i].to,
					  local);
			}
		}
		free(v[i].from);
		free(v[i].to);
	}
	free(v);
	if (local) {
		u->lren = NULL;
		u->nr_lren = 0;
	} else {
		u->rren = NULL;
		u->nr_rren = 0;
	}
	return err;
}

/* --- push, pull, rescan ------------------------------------------------- */

int uds_check_roots(struct uds *u)
{
	struct stat st;
	const char *which = NULL, *path = NULL;

	if (stat(u->cfg->syncfolder, &st) || st.st_ino != u->dino ||
	    st.st_dev != u->ddev) {
		which = "SYNCFOLDER";
		path = u->cfg->syncfolder;
	} else if (stat(u->cfg->savingbox, &st) || st.st_ino != u->sino ||
		   st.st_dev != u->sdev) {
		which = "SAVINGBOX";
		path = u->cfg->savingbox;
	}
	if (!which) {
		u->broken = false;
		return 0;
	}
	if (!u->broken)
		uds_set_error(u, "%s %s vanished (deleted, moved or "
			      "unmounted): syncing stops, pending changes are "
			      "kept; uds-plus waits for it to come back", which,
			      path);
	u->broken = true;
	return -ENOENT;
}

/*
 * Process every key of MAP with sync_path(), in sorted order (parents
 * before children); keys added meanwhile (the contents of a new directory)
 * are processed in the next round. Every processed key leaves the map.
 */
static int run_passes(struct uds *u, struct hmap *map, int allow,
		      struct pass *ps)
{
	int ret = 0;

	for (int round = 0; round < 64 && map->len && !ret; round++) {
		size_t n;
		char **keys = hmap_sorted_keys(map, &n);

		if (!keys)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++) {
			int err = sync_path(u, keys[i], allow, ps);

			if (err) {
				report(u, "cannot sync", "path", keys[i], err);
				if (fatal(err)) {
					ret = err;
					break;
				}
				/* Tried again when it changes again. */
				free_ldirty(hmap_del(&u->ldirty, keys[i]));
				hmap_del(&u->rdirty, keys[i]);
			}
		}
		hmap_free_keys(keys, n);
		if (!ret)
			ret = finish_pass(u, ps);
	}
	return ret;
}

/* A cycle that changed SYNCFOLDER: one sync for the cloud client. */
static void count_push(struct uds *u, enum track_batch_reason why,
		       uint64_t before)
{
	u->st.pushes++;
	u->st.reasons[why]++;
	u->st.last_push = time(NULL);
	info_("push %llu (%s): %llu bytes into SYNCFOLDER",
	      (unsigned long long)u->st.pushes, track_batch_reason_name(why),
	      (unsigned long long)(u->st.bytes_pushed - before));
}

int uds_pull(struct uds *u)
{
	struct pass ps = { 0 };
	uint64_t files = u->st.files_pulled, before = u->st.bytes_pushed;
	int err;

	if (!u->rdirty.len && !u->nr_rren)
		return 0;
	if (uds_check_roots(u))
		return -ENOENT;
	err = replay_renames(u, false, &ps);
	if (!err)
		err = run_passes(u, &u->rdirty, 0, &ps);
	if (!err)
		err = journal_commit(&u->j);
	if (ps.wrote_s) {
		u->st.pulls++;
		info_("pull %llu: %llu files from SYNCFOLDER",
		      (unsigned long long)u->st.pulls,
		      (unsigned long long)(u->st.files_pulled - files));
	}
	/*
	 * A conflict settled while pulling writes SAVINGBOX's version (and
	 * moves the other aside) in SYNCFOLDER: the client syncs that like
	 * any push, so it counts as one.
	 */
	if (ps.wrote_d)
		count_push(u, TRACK_BATCH_NONE, before);
	if (err)
		finish_pass(u, &ps);
	return err;
}

int uds_push(struct uds *u, enum track_batch_reason why)
{
	struct pass ps = { 0 };
	uint64_t before = u->st.bytes_pushed, errors = u->st.errors;
	int err;

	if (uds_check_roots(u))
		return -ENOENT;
	u->st.push_cycles++;
	err = replay_renames(u, true, &ps);
	if (!err)
		err = run_passes(u, &u->ldirty, ALLOW_PUSH, &ps);
	if (!err && u->rdirty.len)
		err = run_passes(u, &u->rdirty, ALLOW_PUSH, &ps);
	if (err)
		finish_pass(u, &ps);
	if (!err || ps.wrote) {
		int jerr = journal_commit(&u->j);

		if (jerr && !err) {
			uds_set_error(u, "cannot write the journal %s: %s",
				      u->j.path, strerror(-jerr));
			err = jerr;
		}
	}
	if (ps.wrote_d)
		count_push(u, why, before);
	if (!err) {
		/* A clean push clears the last error; one with errors not. */
		if (u->st.errors == errors)
			u->last_error[0] = '\0';
		journal_maybe_compact(&u->j, &u->base, u->cfg->savingbox,
				      u->cfg->syncfolder);
	}
	return err;
}

/* One directory level of the rescan: names of both sides, sorted, unique. */
static int list_names(int fd, char ***names, size_t *n)
{
	struct dirent *de;
	DIR *d;
	int dfd;

	if (fd < 0)
		return 0;
	/* A new open file description: a dup would share the offset. */
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	while ((de = readdir(d))) {
		char **v;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		v = realloc(*names, (*n + 1) * sizeof(*v));
		if (!v)
			break;
		*names = v;
		v[*n] = strdup(de->d_name);
		if (v[*n])
			(*n)++;
	}
	closedir(d);
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct scan {
	struct uds *u;
	bool local, remote, startup;
	struct hmap seen;
};

static void scan_dir(struct scan *sc, const char *rel, int sdir, int ddir)
{
	struct uds *u = sc->u;
	char **names = NULL;
	size_t n = 0;

	list_names(sdir, &names, &n);
	list_names(ddir, &names, &n);
	qsort(names, n, sizeof(*names), cmp_name);
	for (size_t i = 0; i < n; i++) {
		struct snap ls = no_snap, rs = no_snap;
		struct entry *b;
		struct stat st;
		char *p;

		if (i && !strcmp(names[i], names[i - 1]))
			continue;
		if (fsx_is_temp_name(names[i])) {
			/* Left by an interrupted run (ours): remove. */
			if (sc->startup) {
				if (sdir >= 0)
					unlinkat(sdir, names[i], 0);
				if (ddir >= 0)
					unlinkat(ddir, names[i], 0);
			}
			continue;
		}
		p = join(rel, names[i]);
		if (!p)
			break;
		if (uds_ignored(u, p)) {
			free(p);
			continue;
		}
		hmap_put(&sc->seen, p, (void *)1, NULL);
		if (sdir >= 0 && !fstatat(sdir, names[i], &st,
					  AT_SYMLINK_NOFOLLOW))
			snap_from_stat(&ls, &st);
		if (ddir >= 0 && !fstatat(ddir, names[i], &st,
					  AT_SYMLINK_NOFOLLOW))
			snap_from_stat(&rs, &st);
		b = base_get(u, p);
		/*
		 * A file that differs from what was last pushed: its pending
		 * ranges, if any, may not be all that changed (an event lost
		 * in an overflow, a store through mmap): compare it whole.
		 */
		if (sc->local && !snap_eq(&ls, b ? &b->s : &no_snap))
			uds_mark_local(u, p, ls.type == 'f' ? LD_CHECK | LD_WHOLE :
				       LD_CHECK);
		if (sc->remote && !snap_eq(&rs, b ? &b->d : &no_snap))
			uds_mark_remote(u, p);
		if (sc->startup && b && b->racy && ls.type == 'f' &&
		    snap_eq(&ls, &b->s) && snap_eq(&rs, &b->d) &&
		    !same_content(u, p, &ls, &rs)) {
			/*
			 * Written in the same clock tick as our last look
			 * and then we stopped: stat cannot tell, the
			 * content does. SAVINGBOX has the newer data.
			 */
			notice_("'%s' changed just before the last stop; "
				"pushing it", log_path(p));
			uds_mark_local(u, p, LD_WHOLE);
		}
		if (ls.type == 'd' || rs.type == 'd') {
			int s2 = ls.type == 'd' ? openat(sdir, names[i],
				O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				O_CLOEXEC) : -1;
			int d2 = rs.type == 'd' ? openat(ddir, names[i],
				O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				O_CLOEXEC) : -1;

			scan_dir(sc, p, s2, d2);
			if (s2 >= 0)
				close(s2);
			if (d2 >= 0)
				close(d2);
		}
		free(p);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int uds_rescan(struct uds *u, bool local, bool remote, bool startup)
{
	struct scan sc = { .u = u, .local = local, .remote = remote,
			   .startup = startup };
	struct hmap_item *it;
	size_t pos = 0;

	if (uds_check_roots(u))
		return -ENOENT;
	u->st.rescans++;
	hmap_init(&sc.seen);
	scan_dir(&sc, "", u->sfd, u->dfd);
	/* Synced paths that are now on neither side. */
	while ((it = hmap_next(&u->base, &pos))) {
		if (hmap_get(&sc.seen, it->key))
			continue;
		if (local)
			uds_mark_local(u, it->key, LD_CHECK);
		if (remote)
			uds_mark_remote(u, it->key);
	}
	hmap_clear(&sc.seen, NULL);
	if (local)
		u->need_rescan_s = false;
	if (remote)
		u->need_rescan_d = false;
	info_("rescan: %zu paths to push, %zu to bring back",
	      u->ldirty.len, u->rdirty.len);
	return 0;
}

/* --- setup -------------------------------------------------------------- */

static bool nested(const char *a, const char *b)
{
	size_t n = strlen(a);

	return !strncmp(a, b, n) && (b[n] == '/' || b[n] == '\0' ||
				     !strcmp(a, "/"));
}

static char *default_state_dir(const char *s, const char *d)
{
	const char *base = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	uint64_t h = 1469598103934665603ULL;
	char *dir;

	for (const char *p = s; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	h = (h ^ '\n') * 1099511628211ULL;
	for (const char *p = d; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ULL;
	if (base && base[0] == '/') {
		if (asprintf(&dir, "%s/uds-plus/%016llx", base,
			     (unsigned long long)h) < 0)
			return NULL;
	} else if (home && home[0] == '/') {
		if (asprintf(&dir, "%s/.local/state/uds-plus/%016llx", home,
			     (unsigned long long)h) < 0)
			return NULL;
	} else if (asprintf(&dir, "/var/lib/uds-plus/%016llx",
			    (unsigned long long)h) < 0) {
		return NULL;
	}
	return dir;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char *p = strdup(path);
	int err = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) && errno != EEXIST) {
			err = -errno;
			break;
		}
		*s = '/';
	}
	if (!err && mkdir(p, mode) && errno != EEXIST)
		err = -errno;
	free(p);
	return err;
}

static int open_root(const char *what, const char *path, char **real, int *fd,
		     dev_t *dev, ino_t *ino)
{
	struct stat st;

	*real = realpath(path, NULL);
	if (!*real) {
		err_("%s %s: %s%s", what, path, strerror(errno),
		     errno == ENOENT ? " (create it first)" : "");
		return -1;
	}
	*fd = open(*real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0 || fstat(*fd, &st)) {
		err_("%s %s: %s", what, *real, strerror(errno));
		return -1;
	}
	*dev = st.st_dev;
	*ino = st.st_ino;
	return 0;
}

static int open_watch(struct uds *u, const char *what, const char *path,
		      struct track_watch **w)
{
	unsigned int flags = u->cfg->no_ranges ? TRACK_WATCH_NO_RANGES : 0;
	int err = track_watch_new(flags, w);

	if (err) {
		err_("cannot watch %s: %s%s", what, strerror(-err),
		     err == -EMFILE ? " (raise fs.inotify.max_user_instances)"
				    : "");
		return err;
	}
	err = track_watch_add(*w, path);
	if (err < 0) {
		err_("%s: %s", what, track_watch_error(*w));
		return err;
	}
	return 0;
}

static void free_entry(void *e)
{
	free(e);
}

/*
 * The baseline belongs to two particular directories. If either is not
 * the one it was (re-created empty, another disk mounted there), every
 * difference would look like a deletion on that side: forget the
 * baseline instead and compare as on a first run, which never deletes.
 */
static int check_identity(struct uds *u)
{
	uint64_t ids[4] = { u->sdev, u->sino, u->ddev, u->dino };

	if (u->j.has_ids && memcmp(u->j.ids, ids, sizeof(ids))) {
		warn_("%s is not the directory it was when uds-plus last ran "
		      "(re-created, or another file system mounted there): "
		      "comparing both folders as on a first run; nothing is "
		      "deleted, differences are kept as conflict copies",
		      u->j.ids[0] != ids[0] || u->j.ids[1] != ids[1] ?
		      "SAVINGBOX" : "SYNCFOLDER");
		hmap_clear(&u->base, free_entry);
	}
	journal_set_ids(&u->j, ids);
	return journal_compact(&u->j, &u->base, u->cfg->savingbox,
			       u->cfg->syncfolder);
}

/*
 * One uds-plus per folder, whatever its state directory: two daemons
 * pushing into one SYNCFOLDER, or pulling into one SAVINGBOX, would each
 * read the other's writes as a collaborator's and merge them forever. The
 * lock is on the directory itself (flock on its descriptor), so it holds
 * across state directories and users, and goes away with the process.
 */
static int lock_root(int fd, const char *what, const char *path)
{
	/* A descriptor of our own: the root's is replaced on re-attach. */
	int lfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);

	if (lfd < 0) {
		err_("%s %s: %s", what, path, strerror(errno));
		return -1;
	}
	if (flock(lfd, LOCK_EX | LOCK_NB)) {
		if (errno == EWOULDBLOCK)
			err_("another uds-plus already syncs %s %s (it holds "
			     "a lock on the folder): stop that one first, or "
			     "give this one other folders", what, path);
		else
			err_("cannot lock %s %s: %s", what, path,
			     strerror(errno));
		close(lfd);
		return -1;
	}
	/* Held until exit; the descriptor is deliberately not closed. */
	return 0;
}

int uds_reattach(struct uds *u)
{
	struct stat ss, ds;

	if (stat(u->cfg->savingbox, &ss) || !S_ISDIR(ss.st_mode) ||
	    stat(u->cfg->syncfolder, &ds) || !S_ISDIR(ds.st_mode))
		return -ENOENT;
	if (ss.st_ino == u->sino && ss.st_dev == u->sdev &&
	    ds.st_ino == u->dino && ds.st_dev == u->ddev) {
		u->broken = false;
		return 0;
	}
	if (ss.st_ino != u->sino || ss.st_dev != u->sdev) {
		int fd = open(u->cfg->savingbox, O_RDONLY | O_DIRECTORY |
			      O_CLOEXEC);
		struct track_watch *w;

		if (fd < 0)
			return -errno;
		if (open_watch(u, "SAVINGBOX", u->cfg->savingbox, &w)) {
			close(fd);
			return -ENOSPC;
		}
		close(u->sfd);
		track_watch_free(u->ws);
		u->sfd = fd;
		u->ws = w;
		u->sdev = ss.st_dev;
		u->sino = ss.st_ino;
	}
	if (ds.st_ino != u->dino || ds.st_dev != u->ddev) {
		int fd = open(u->cfg->syncfolder, O_RDONLY | O_DIRECTORY |
			      O_CLOEXEC);
		struct track_watch *w;

		if (fd < 0)
			return -errno;
		if (open_watch(u, "SYNCFOLDER", u->cfg->syncfolder, &w)) {
			close(fd);
			return -ENOSPC;
		}
		close(u->dfd);
		track_watch_free(u->wd);
		u->dfd = fd;
		u->wd = w;
		u->ddev = ds.st_dev;
		u->dino = ds.st_ino;
	}
	u->broken = false;
	/* Renames recorded against the old directories mean nothing now. */
	for (size_t i = 0; i < u->nr_rren; i++) {
		free(u->rren[i].from);
		free(u->rren[i].to);
	}
	u->nr_rren = 0;
	return check_identity(u);
}

int uds_open(struct uds *u, struct config *cfg)
{
	struct track_batch_params bp;
	char *s = NULL, *d = NULL, *lock;
	int fd, err;

	memset(u, 0, sizeof(*u));
	u->cfg = cfg;
	u->sfd = u->dfd = -1;
	u->j.fd = -1;
	hmap_init(&u->base);
	hmap_init(&u->ldirty);
	hmap_init(&u->rdirty);
	hmap_init(&u->sums);

	if (open_root("SAVINGBOX", cfg->savingbox, &s, &u->sfd, &u->sdev,
		      &u->sino) ||
	    open_root("SYNCFOLDER", cfg->syncfolder, &d, &u->dfd, &u->ddev,
		      &u->dino))
		goto fail;
	if (nested(s, d) || nested(d, s)) {
		err_("SAVINGBOX %s and SYNCFOLDER %s must be separate "
		     "folders, neither inside the other", s, d);
		goto fail;
	}
	free(cfg->savingbox);
	free(cfg->syncfolder);
	cfg->savingbox = s;
	cfg->syncfolder = d;
	s = d = NULL;

	if (!cfg->state_dir)
		cfg->state_dir = default_state_dir(cfg->savingbox,
						   cfg->syncfolder);
	if (!cfg->state_dir)
		goto fail;
	if (nested(cfg->savingbox, cfg->state_dir) ||
	    nested(cfg->syncfolder, cfg->state_dir)) {
		err_("the state directory %s must not be inside SAVINGBOX "
		     "or SYNCFOLDER", cfg->state_dir);
		goto fail;
	}
	err = mkdir_p(cfg->state_dir, 0700);
	if (err) {
		err_("cannot create the state directory %s: %s",
		     cfg->state_dir, strerror(-err));
		goto fail;
	}
	if (asprintf(&lock, "%s/lock", cfg->state_dir) < 0)
		goto fail;
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB)) {
		err_("another uds-plus already syncs %s and %s (the lock %s "
		     "is held)", cfg->savingbox, cfg->syncfolder, lock);
		free(lock);
		goto fail;
	}
	free(lock);
	/* Held until exit; the descriptor is deliberately not closed. */
	if (lock_root(u->sfd, "SAVINGBOX", cfg->savingbox) ||
	    lock_root(u->dfd, "SYNCFOLDER", cfg->syncfolder))
		goto fail;

	/* Watch first, then look: nothing slips between the two. */
	if (open_watch(u, "SAVINGBOX", cfg->savingbox, &u->ws) ||
	    open_watch(u, "SYNCFOLDER", cfg->syncfolder, &u->wd))
		goto fail;
	u->mode = track_watch_get_mode(u->ws);

	track_batch_params_init(&bp);
	bp.timer_ms = cfg->timer_ms;
	bp.counter_bytes = cfg->counter_bytes;
	bp.failsafe_ms = cfg->failsafe_ms;
	if (track_batch_new(&bp, &u->batch))
		goto fail;

	err = journal_open(&u->j, cfg->state_dir, cfg->savingbox,
			   cfg->syncfolder, &u->base, cfg->fsync);
	if (err)
		goto fail;
	if (check_identity(u))
		goto fail;
	u->bufsize = 256 * 1024;
	u->buf = malloc(u->bufsize);
	if (!u->buf)
		goto fail;
	return 0;
fail:
	free(s);
	free(d);
	uds_close(u);
	return -1;
}

void uds_close(struct uds *u)
{
	if (u->j.path)
		journal_close(&u->j);
	track_watch_free(u->ws);
	track_watch_free(u->wd);
	track_batch_free(u->batch);
	hmap_clear(&u->base, free_entry);
	hmap_clear(&u->ldirty, free_ldirty);
	hmap_clear(&u->rdirty, NULL);
	hmap_clear(&u->sums, free_sums);
	for (size_t i = 0; i < u->nr_lren; i++) {
		free(u->lren[i].from);
		free(u->lren[i].to);
	}
	for (size_t i = 0; i < u->nr_rren; i++) {
		free(u->rren[i].from);
		free(u->rren[i].to);
	}
	free(u->lren);
	free(u->rren);
	if (u->sfd >= 0)
		close(u->sfd);
	if (u->dfd >= 0)
		close(u->dfd);
	free(u->buf);
	memset(u, 0, sizeof(*u));
	u->sfd = u->dfd = -1;
}
