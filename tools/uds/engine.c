// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The uds-plus event loop: events from both folders, the batching policy,
 * signals, the status file.
 *
 * SAVINGBOX events mark paths pending (with the changed ranges when the
 * kernel reports them) and feed the policy an estimate of the compressed
 * size of the new bytes; the policy says when to push. SYNCFOLDER events
 * only mark paths to look at once the folder has been quiet for
 * --pull-delay: whether a path really changed is decided by comparing it
 * with its baseline, which is how uds-plus's own writes are not echoed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "uds.h"

/* The file most recently read for an estimate, kept open. */
static struct {
	char *path;
	int fd;
} est_cache = { NULL, -1 };

static void est_forget(const char *path)
{
	if (est_cache.path && (!path || !strcmp(path, est_cache.path))) {
		free(est_cache.path);
		est_cache.path = NULL;
		close(est_cache.fd);
		est_cache.fd = -1;
	}
}

static int est_open(struct uds *u, const char *path)
{
	const char *name;
	int pfd, fd;

	if (est_cache.path && !strcmp(est_cache.path, path))
		return est_cache.fd;
	est_forget(NULL);
	pfd = fsx_open_parent(u->sfd, path, &name, false, -1);
	if (pfd < 0)
		return pfd;
	fd = openat(pfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(pfd);
	if (fd < 0)
		return -errno;
	est_cache.path = strdup(path);
	if (!est_cache.path) {
		close(fd);
		return -ENOMEM;
	}
	est_cache.fd = fd;
	return fd;
}

/*
 * Count an update of [off, off + len) of PATH: read the new bytes and let
 * the policy estimate their compressed size. Only as much is read as can
 * still matter: once the counter is full the push is due anyway.
 */
static void estimate_range(struct uds *u, const char *path, uint64_t off,
			   uint64_t len)
{
	struct track_batch_state st;
	size_t want;
	ssize_t n;
	int64_t est;
	int fd;

	track_batch_pending(u->batch, &st);
	if (len == 0 || st.bytes >= u->cfg->counter_bytes) {
		track_batch_update(u->batch, len);
		return;
	}
	fd = est_open(u, path);
	if (fd < 0) {
		track_batch_update(u->batch, len);
		return;
	}
	want = len < u->bufsize ? (size_t)len : u->bufsize;
	n = pread(fd, u->buf, want, (off_t)off);
	if (n <= 0) {
		track_batch_update(u->batch, 0);	/* gone or truncated */
		return;
	}
	u->st.bytes_read += (uint64_t)n;
	est = track_batch_add_data(u->batch, u->buf, (size_t)n);
	if (est >= 0 && (uint64_t)n < len)	/* the rest, by the same ratio */
		track_batch_update(u->batch, (uint64_t)((double)est / n *
							(double)(len - n)));
}

/* Is this event about a write of our own (a pull into SAVINGBOX)? */
static bool own_echo(struct uds *u, const char *path)
{
	struct entry *b = hmap_get(&u->base, path);
	struct snap now;

	if (!b || !b->echo_until || now_ms() > b->echo_until)
		return false;
	if (fsx_snap(u->sfd, path, &now) || !snap_eq(&now, &b->s)) {
		b->echo_until = 0;
		return false;
	}
	return true;
}

/*
 * How long the cloud client alone takes to hash a file of SIZE bytes,
 * at the least: Syncthing (v1.x) and Dropbox (the paper's Fig. 11) read
 * and hash the whole file after a change. A change that comes while
 * they hash would have made their hash fail and start again (Syncthing:
 * "file changed during hashing") or restarted the indexing (the paper's
 * Fig. 3(c)): alone, the client would have made one sync of both. 64 MiB/s
 * is below what Syncthing managed on the 2-CPU development host, loaded
 * (256 MiB in 1.0-1.5 s); a client that hashes faster batches less, so
 * taking it slower only costs a lone change in a large file some delay
 * (never past t), never a sync. With the Syncthing profile the rate is
 * measured from Syncthing's own scans of large pushed files where
 * uds-plus asks for them (client_hash_bps()); 64 MiB/s until then.
 */
#define UDS_CLIENT_HASH_BPS (64ULL << 20)

static uint64_t hash_ms(const struct uds *u, uint64_t size)
{
	uint64_t bps = client_hash_bps(u->cfg);

	if (bps < 1000)
		bps = UDS_CLIENT_HASH_BPS;
	return size / (bps / 1000);
}

/*
 * What a push of a changed file of SIZE bytes is expected to take, in
 * fallback mode, where it reads the file (once with remembered block
 * sums, else both copies) and hashes it: at the rate this process's last
 * push that compared at least 1 MiB read at (its wall time, writes and
 * fsyncs included; do_push()), or UDS_CLIENT_HASH_BPS before there was
 * one. In ranges mode a push reads only the written ranges: 0.
 */
static uint64_t push_cost_ms(const struct uds *u, uint64_t size)
{
	uint64_t rate = u->push_rate ? u->push_rate : UDS_CLIENT_HASH_BPS;

	if (u->mode != TRACK_WATCH_PLAIN || rate < 1000)
		return 0;
	return size / (rate / 1000);
}

/*
 * The delay bound: the far side has a batch no later than with the
 * client alone, within t. The client alone starts on the batch at ALONE
 * (at once for a generic client; at the tick of Syncthing's watcher that
 * would scan it, client_changed()), and hands it on after its own work,
 * which it does after a push too. So a push has to be done by ALONE + t:
 * it starts its expected cost c early, at ALONE + t - c, when that is
 * before the timer (last change + t). The push of a 4 KiB write into a
 * 256 MiB file in fallback mode reads the file, about 1 s: started at
 * the timer, it ended up to 0.25 s past the bound in
 * bench/uds-syncthing.sh (the 5 MB download, the 256 MiB file).
 *
 * Never so early that it splits a batch:
 * - generic: c counts for at most t/2, so changes less than t/2 apart
 *   are still one push;
 * - Syncthing: not before ALONE plus the client's hash time (what the
 *   lone and tick pushes wait, note_update()): a change within that is
 *   one sync for Syncthing alone, and stays one push.
 * Where the two conflict (c + hash time > t), the syncs win.
 */
static void plan_early(struct uds *u, uint64_t now, uint64_t alone)
{
	uint64_t t = u->cfg->timer_ms, c, at, floor;

	u->early_at = 0;
	c = push_cost_ms(u, u->pending_max);
	u->early_cost = c;
	if (!c || !t)
		return;
	if (u->cfg->cl) {
		floor = alone + hash_ms(u, u->pending_max);
		at = alone + t > c ? alone + t - c : 0;
		if (at < floor)
			at = floor;
	} else {
		at = now + t - (c < t / 2 ? c : t / 2);
	}
	if (at < now + t) {
		u->early_at = at;
		u->early_plan = at - now;
	}
}

/*
 * No added delay when there is nothing to batch. A change that comes
 * after at least 2 t of quiet starts a new batch; if nothing else
 * happens in the next --lone-delay (g) plus the time the client would
 * take to hash the largest file changed (hash_ms()), it is pushed then
 * instead of after t. The events one save makes (create, writes, close,
 * rename) come within milliseconds and count as that one change; another
 * event after the first half of g means the writer goes on: a burst,
 * batched as always. With the Syncthing profile g is the watcher delay
 * d: alone, Syncthing's first look at a change after a quiet period
 * comes d after it (its aggregator's timer starts with the change), and
 * takes it only if it has been quiet for d/2; so the lone push is never
 * earlier than Syncthing alone would have synced, and never splits what
 * it would have batched.
 *
 * The cost: a lone change followed by another within t (but after g) is
 * two pushes where the timer would have made one; at most one extra push
 * per 2 t of quiet, which the workloads that need batching (appends, a
 * download: changes closer together than g) never pay. Why 2 t and not
 * t: edits whose gaps straddle t (the paper's collaborative edit, a
 * change every 0-10 s) would otherwise pay it after every gap longer
 * than t, half of them; a gap of 2 t says the writer really stopped.
 *
 * SIZE is that of the file changed (0 if none or unknown).
 */
static void note_update(struct uds *u, uint64_t size)
{
	uint64_t now = now_ms(), g = u->cfg->lone_ms, at, alone;
	struct track_batch_state bs;

	if (g > u->cfg->timer_ms)
		g = u->cfg->timer_ms;
	track_batch_pending(u->batch, &bs);
	if (bs.updates <= 1)
		u->pending_max = 0;
	if (size > u->pending_max)
		u->pending_max = size;
	if (!g) {
		u->lone_at = 0;
	} else if (u->lone_at) {
		if (now > u->lone_first + g / 2) {
			u->lone_at = 0;		/* a burst */
		} else {
			at = u->lone_first + g + hash_ms(u, u->pending_max);
			if (at > u->lone_at)
				u->lone_at = at;
		}
	} else if (bs.updates <= 1 && u->last_update &&
		   now >= u->last_update + 2 * u->cfg->timer_ms) {
		u->lone_first = now;
		u->lone_at = now + g + hash_ms(u, u->pending_max);
	}
	/* When the client alone would have synced, if nothing else comes. */
	at = client_changed(u->cfg, now, &alone);
	u->tick_at = at ? at + hash_ms(u, u->pending_max) : 0;
	plan_early(u, now, alone);
	u->last_update = now;
}

/* The size of PATH in SAVINGBOX, for note_update() (0 if unknown). */
static uint64_t file_size(struct uds *u, const char *path)
{
	struct snap s;

	if (!u->cfg->lone_ms && !u->cfg->cl)
		return 0;
	if (fsx_snap(u->sfd, path, &s) || s.type != 'f')
		return 0;
	return s.size;
}

static void local_event(struct uds *u, const struct track_event *ev)
{
	const char *p = ev->path;
	bool isdir = ev->flags & TRACK_EVENT_DIR;
	struct ldirty *d;
	uint64_t size = 0;

	switch (ev->kind) {
	case TRACK_EVENT_RESCAN:
		notice_("SAVINGBOX: the kernel's event queue overflowed; "
			"rescanning (raise fs.inotify.max_queued_events if "
			"this happens often)");
		u->need_rescan_s = true;
		track_batch_update(u->batch, 0);
		return;
	case TRACK_EVENT_GONE:
		uds_check_roots(u);
		return;
	case TRACK_EVENT_RENAME:
		est_forget(ev->old_path);
		est_forget(p);
		if (uds_ignored(u, ev->old_path) && !uds_ignored(u, p)) {
			/* A temporary renamed into place: a create. */
			if (own_echo(u, p))
				return;
			uds_mark_local(u, p, LD_CHECK | LD_WHOLE);
		} else if (uds_ignored(u, p)) {
			uds_mark_local(u, ev->old_path, LD_CHECK);
		} else {
			/*
			 * Ours only if what was renamed is not something we
			 * had synced: a directory moved over one just pulled
			 * can look like it (type and mode).
			 */
			if (own_echo(u, p) && !hmap_get(&u->base, ev->old_path))
				return;
			uds_local_rename(u, ev->old_path, p, isdir);
		}
		u->st.updates++;
		track_batch_update(u->batch, 0);
		note_update(u, isdir ? 0 : file_size(u, p));
		return;
	default:
		break;
	}
	if (uds_ignored(u, p) || !p[0])
		return;
	if (ev->kind != TRACK_EVENT_MODIFY && own_echo(u, p))
		return;
	switch (ev->kind) {
	case TRACK_EVENT_CREATE:
		est_forget(p);
		d = uds_mark_local(u, p, LD_CHECK | (isdir ? 0 : LD_WHOLE));
		if (d && !isdir) {
			struct snap s;

			if (!fsx_snap(u->sfd, p, &s) && s.type == 'f') {
				d->seen_size = s.size;
				size = s.size;
				track_batch_update(u->batch, s.size);
			} else {
				track_batch_update(u->batch, 0);
			}
		} else {
			track_batch_update(u->batch, 0);
		}
		break;
	case TRACK_EVENT_MODIFY:
		if (own_echo(u, p))
			return;
		if (ev->flags & TRACK_EVENT_RANGE) {
			d = uds_mark_local(u, p, LD_RANGES);
			if (d && track_extents_add(d->ext, ev->offset, ev->length))
				d->flags |= LD_WHOLE;
			estimate_range(u, p, ev->offset, ev->length);
			/* A stat per write only where the size matters. */
			if (u->cfg->cl || u->lone_at ||
			    now_ms() >= u->last_update + 2 * u->cfg->timer_ms)
				size = file_size(u, p);
		} else {
			struct snap s;

			d = uds_mark_local(u, p, LD_WHOLE);
			if (d && !fsx_snap(u->sfd, p, &s) && s.type == 'f') {
				if (s.size > d->seen_size) {
					/* Plain inotify: appends we can see. */
					estimate_range(u, p, d->seen_size,
						       s.size - d->seen_size);
				} else {
					track_batch_update(u->batch, 0);
				}
				d->seen_size = s.size;
				size = s.size;
			} else {
				track_batch_update(u->batch, 0);
			}
		}
		break;
	case TRACK_EVENT_ATTRIB:
		uds_mark_local(u, p, LD_ATTR);
		track_batch_update(u->batch, 0);
		break;
	case TRACK_EVENT_DELETE:
		est_forget(p);
		uds_mark_local(u, p, LD_CHECK);
		track_batch_update(u->batch, 0);
		break;
	default:
		return;
	}
	u->st.updates++;
	note_update(u, size);
}

static void remote_event(struct uds *u, const struct track_event *ev)
{
	switch (ev->kind) {
	case TRACK_EVENT_RESCAN:
		notice_("SYNCFOLDER: the kernel's event queue overflowed; "
			"rescanning");
		u->need_rescan_d = true;
		return;
	case TRACK_EVENT_GONE:
		uds_check_roots(u);
		return;
	case TRACK_EVENT_RENAME:
		if (uds_ignored(u, ev->old_path)) {
			if (!uds_ignored(u, ev->path))
				uds_mark_remote(u, ev->path);
		} else if (uds_ignored(u, ev->path)) {
			uds_mark_remote(u, ev->old_path);
		} else {
			uds_remote_rename(u, ev->old_path, ev->path);
		}
		return;
	case TRACK_EVENT_CLOSE_WRITE:
		return;
	default:
		if (ev->path[0] && !uds_ignored(u, ev->path))
			uds_mark_remote(u, ev->path);
	}
}

static void drain(struct uds *u, struct track_watch *w, bool local)
{
	struct track_event ev;
	int n;

	while ((n = track_watch_next(w, &ev, 0)) != 0) {
		if (n < 0) {
			if (n == -ENOSPC) {
				if (!u->degraded)
					uds_set_error(u, "%s; until then "
						      "uds-plus compares the "
						      "folders every 30 s",
						      track_watch_error(w));
				u->degraded = true;
				if (!u->next_rescan ||
				    u->next_rescan > now_ms() + 30000)
					u->next_rescan = now_ms() + 30000;
			} else {
				warn_("%s", track_watch_error(w));
			}
			if (local)
				u->need_rescan_s = true;
			else
				u->need_rescan_d = true;
			continue;
		}
		if (local)
			local_event(u, &ev);
		else
			remote_event(u, &ev);
	}
}

/* --- statistics ------------------------------------------------------- */

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

void uds_write_status(struct uds *u, int fd)
{
	struct track_batch_state bs;
	const struct stats *s = &u->st;
	FILE *f = fdopen(dup(fd), "w");

	if (!f)
		return;
	track_batch_pending(u->batch, &bs);
	fprintf(f, "mode=%s\n", u->mode != TRACK_WATCH_PLAIN ? "ranges" :
		"fallback");
	fprintf(f, "state=%s\n", u->broken ? "waiting" :
		u->last_error[0] ? "error" : "ok");
	fprintf(f, "savingbox=%s\nsyncfolder=%s\n", log_path(u->cfg->savingbox),
		log_path(u->cfg->syncfolder));
	fprintf(f, "pushes=%" PRIu64 "\n", s->pushes);
	fprintf(f, "pushes_timer=%" PRIu64 "\npushes_counter=%" PRIu64
		"\npushes_failsafe=%" PRIu64 "\npushes_other=%" PRIu64 "\n",
		s->reasons[TRACK_BATCH_TIMER], s->reasons[TRACK_BATCH_COUNTER],
		s->reasons[TRACK_BATCH_FAILSAFE], s->reasons[TRACK_BATCH_NONE]);
	fprintf(f, "pushes_lone=%" PRIu64 "\n", s->pushes_lone);
	fprintf(f, "pushes_tick=%" PRIu64 "\n", s->pushes_tick);
	fprintf(f, "push_cycles=%" PRIu64 "\n", s->push_cycles);
	fprintf(f, "push_rate=%" PRIu64 "\n", u->push_rate);
	fprintf(f, "client_hash_rate=%" PRIu64 "\n", client_hash_bps(u->cfg));
	fprintf(f, "last_push_quiet_ms=%" PRIu64 "\nlast_push_plan_ms=%" PRIu64
		"\nlast_push_cost_ms=%" PRIu64 "\nlast_push_took_ms=%" PRIu64
		"\n", s->last_quiet_ms, s->last_plan_ms, s->last_cost_ms,
		s->last_took_ms);
	fprintf(f, "updates=%" PRIu64 "\n", s->updates);
	fprintf(f, "files_pushed=%" PRIu64 "\n", s->files_pushed);
	fprintf(f, "bytes_pushed=%" PRIu64 "\n", s->bytes_pushed);
	fprintf(f, "bytes_read=%" PRIu64 "\n", s->bytes_read);
	fprintf(f, "pulls=%" PRIu64 "\n", s->pulls);
	fprintf(f, "files_pulled=%" PRIu64 "\n", s->files_pulled);
	fprintf(f, "bytes_pulled=%" PRIu64 "\n", s->bytes_pulled);
	fprintf(f, "conflicts=%" PRIu64 "\n", s->conflicts);
	fprintf(f, "rescans=%" PRIu64 "\n", s->rescans);
	fprintf(f, "errors=%" PRIu64 "\n", s->errors);
	fprintf(f, "pending_files=%zu\n", u->ldirty.len);
	fprintf(f, "pending_bytes=%" PRIu64 "\n", bs.bytes);
	fprintf(f, "pending_updates=%" PRIu64 "\n", bs.updates);
	fprintf(f, "pending_remote=%zu\n", u->rdirty.len);
	fprintf(f, "watches=%u\n", track_watch_count(u->ws) +
		track_watch_count(u->wd));
	fprintf(f, "cpu_seconds=%.3f\n", cpu_seconds());
	fprintf(f, "last_push=%lld\n", (long long)s->last_push);
	fprintf(f, "last_error=%s\n", u->last_error);
	fclose(f);
}

static void status_file(struct uds *u)
{
	char *tmp;
	int fd;

	if (!u->cfg->status_file)
		return;
	if (asprintf(&tmp, "%s.tmp", u->cfg->status_file) < 0)
		return;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		uds_write_status(u, fd);
		close(fd);
		if (rename(tmp, u->cfg->status_file))
			unlink(tmp);
	} else {
		warn_("cannot write the status file %s: %s",
		      u->cfg->status_file, strerror(errno));
	}
	free(tmp);
}

static void log_stats(struct uds *u)
{
	struct track_batch_state bs;

	track_batch_pending(u->batch, &bs);
	notice_("stats: mode %s, %" PRIu64 " pushes, %" PRIu64 " files and %"
		PRIu64 " bytes pushed, %" PRIu64 " bytes read, %" PRIu64
		" pulls, %" PRIu64 " conflicts, %zu files pending (%" PRIu64
		" bytes compressed), %.2f s CPU",
		u->mode != TRACK_WATCH_PLAIN ? "ranges" : "fallback",
		u->st.pushes, u->st.files_pushed, u->st.bytes_pushed,
		u->st.bytes_read, u->st.pulls, u->st.conflicts, u->ldirty.len,
		bs.bytes, cpu_seconds());
}

/* --- the loop ----------------------------------------------------------- */

static void ensure_push_pending(struct uds *u)
{
	struct track_batch_state bs;

	/* Pending paths the policy has not heard of (from a rescan). */
	track_batch_pending(u->batch, &bs);
	if ((u->ldirty.len || u->nr_lren) && !bs.updates)
		track_batch_update(u->batch, 0);
}

static void do_push(struct uds *u, enum track_batch_reason why)
{
	struct track_batch_state bs;
	uint64_t start = now_ms(), read = u->st.bytes_read, pushes, took;
	uint64_t wrote = u->st.bytes_pushed;
	int err;

	if (u->broken)
		return;
	track_batch_pending(u->batch, &bs);
	pushes = u->st.pushes;
	u->push_max = 0;
	err = uds_push(u, why);
	took = now_ms() - start;
	/*
	 * The rate of a push that compared (wrote less than half what it
	 * read): a copy reads and writes without hashing, faster per byte,
	 * and the next push of the file is a comparison.
	 */
	read = u->st.bytes_read - read;
	wrote = u->st.bytes_pushed - wrote;
	if (read >= (1 << 20) && wrote < read / 2)
		u->push_rate = read * 1000 / (took ? took : 1);
	if (u->st.pushes != pushes && bs.updates && why != TRACK_BATCH_NONE) {
		/* When it went, against the plan: the delay bound's record. */
		u->st.last_quiet_ms = start - bs.last_ms;
		u->st.last_plan_ms = u->early_at ? u->early_plan :
				     u->cfg->timer_ms;
		u->st.last_cost_ms = u->early_cost;
		u->st.last_took_ms = took;
		info_("push %llu started %llu ms after the last change "
		      "(planned %llu: t %llu ms less the expected cost %llu ms "
		      "of %llu bytes, or the batching floor), took %llu ms",
		      (unsigned long long)u->st.pushes,
		      (unsigned long long)u->st.last_quiet_ms,
		      (unsigned long long)u->st.last_plan_ms,
		      (unsigned long long)u->cfg->timer_ms,
		      (unsigned long long)u->early_cost,
		      (unsigned long long)u->pending_max,
		      (unsigned long long)took);
	}
	u->lone_at = 0;
	u->tick_at = 0;
	u->early_at = 0;
	client_pushed(u->cfg, u->push_max);
	if (!err) {
		track_batch_pushed(u->batch);
		u->retry_ms = 0;
		u->retry_at = 0;
		ensure_push_pending(u);
	} else {
		u->retry_ms = u->retry_ms ? u->retry_ms * 2 : 1000;
		if (u->retry_ms > 60000)
			u->retry_ms = 60000;
		u->retry_at = now_ms() + u->retry_ms;
		notice_("push failed; trying again in %llu s with everything "
			"still pending", (unsigned long long)u->retry_ms / 1000);
	}
	status_file(u);
}

static void do_pull(struct uds *u)
{
	if (u->broken)
		return;
	if (uds_pull(u))
		notice_("bringing back changes from SYNCFOLDER failed; trying "
			"again with the next change");
	client_pushed(u->cfg, 0);	/* conflicts settled write SYNCFOLDER */
	ensure_push_pending(u);
}

static void rescans(struct uds *u)
{
	if (u->need_rescan_s || u->need_rescan_d) {
		uds_rescan(u, u->need_rescan_s, u->need_rescan_d, false);
		ensure_push_pending(u);
	}
}

static int wait_ms(struct uds *u)
{
	uint64_t now = now_ms();
	int64_t best = -1;
	int64_t t;

	t = track_batch_wait(u->batch);
	if (t >= 0 && u->retry_at > now && (uint64_t)t < u->retry_at - now)
		t = (int64_t)(u->retry_at - now);
	best = t;
#define CONSIDER(x) do {						\
		int64_t v_ = (x);					\
		if (v_ >= 0 && (best < 0 || v_ < best))			\
			best = v_;					\
	} while (0)
	if (u->rdirty.len || u->nr_rren)
		CONSIDER(u->rdirty_at + u->cfg->pull_delay_ms > now ?
			 (int64_t)(u->rdirty_at + u->cfg->pull_delay_ms - now) :
			 0);
	CONSIDER(track_watch_timeout(u->ws));
	CONSIDER(track_watch_timeout(u->wd));
	if (u->next_rescan)
		CONSIDER(u->next_rescan > now ? (int64_t)(u->next_rescan - now) :
			 0);
	/* A push planned before a failed push's retry waits for it. */
#define CONSIDER_PUSH(at) do {						\
		uint64_t a_ = (at) > u->retry_at ? (at) : u->retry_at;	\
		CONSIDER(a_ > now ? (int64_t)(a_ - now) : 0);		\
	} while (0)
	if (u->lone_at)
		CONSIDER_PUSH(u->lone_at);
	if (u->tick_at)
		CONSIDER_PUSH(u->tick_at);
	if (u->early_at)
		CONSIDER_PUSH(u->early_at);
#undef CONSIDER_PUSH
	if (u->broken)
		CONSIDER(2000);
#undef CONSIDER
	if (best > INT_MAX)
		best = INT_MAX;
	return (int)best;
}

static void recover(struct uds *u)
{
	if (uds_reattach(u))
		return;
	notice_("both folders are back; comparing them");
	u->last_error[0] = '\0';
	u->need_rescan_s = u->need_rescan_d = true;
	rescans(u);
}

static void tick(struct uds *u)
{
	uint64_t now;

	drain(u, u->ws, true);
	drain(u, u->wd, false);
	rescans(u);
	now = now_ms();
	if (u->broken) {
		recover(u);
		return;
	}
	if ((u->rdirty.len || u->nr_rren) &&
	    now >= u->rdirty_at + u->cfg->pull_delay_ms)
		do_pull(u);
	if (now >= u->retry_at) {
		enum track_batch_reason why = track_batch_due(u->batch);

		if (why == TRACK_BATCH_NONE && u->lone_at && now >= u->lone_at) {
			uint64_t pushes = u->st.pushes;

			do_push(u, TRACK_BATCH_TIMER);
			if (u->st.pushes != pushes)
				u->st.pushes_lone++;
		} else if (why == TRACK_BATCH_NONE && u->tick_at &&
			   now >= u->tick_at) {
			uint64_t pushes = u->st.pushes;

			do_push(u, TRACK_BATCH_TIMER);
			if (u->st.pushes != pushes)
				u->st.pushes_tick++;
		} else if (why == TRACK_BATCH_NONE && u->early_at &&
			   now >= u->early_at) {
			do_push(u, TRACK_BATCH_TIMER);
		} else if (why != TRACK_BATCH_NONE) {
			do_push(u, why);
		}
	}
	if (u->next_rescan && now >= u->next_rescan) {
		u->need_rescan_s = u->need_rescan_d = true;
		rescans(u);
		u->next_rescan = u->cfg->rescan_ms ? now + u->cfg->rescan_ms :
				 0;
		if (u->degraded)
			u->next_rescan = now + 30000;
	}
}

/* Push and pull everything now (at start, on SIGHUP and at exit). */
static void flush(struct uds *u)
{
	drain(u, u->ws, true);
	drain(u, u->wd, false);
	rescans(u);
	do_pull(u);
	if (u->ldirty.len || u->nr_lren || u->rdirty.len)
		do_push(u, TRACK_BATCH_NONE);
}

int uds_start(struct uds *u, struct config *cfg)
{
	if (client_setup(cfg))
		return -1;
	if (uds_open(u, cfg)) {
		client_close(cfg);
		return -1;
	}
	if (client_start(cfg)) {
		uds_close(u);
		client_close(cfg);
		return -1;
	}
	notice_("syncing SAVINGBOX %s -> SYNCFOLDER %s; mode %s; timer %.3g s, "
		"counter %" PRIu64 " bytes, fail-safe %.3g s; state in %s",
		cfg->savingbox, cfg->syncfolder,
		u->mode != TRACK_WATCH_PLAIN ? "ranges (the kernel reports "
		"write ranges)" : "fallback (block delta; this kernel has no "
		"IN_REPORT_RANGE)", cfg->timer_ms / 1000.0, cfg->counter_bytes,
		cfg->failsafe_ms / 1000.0, cfg->state_dir);

	/* Start: compare everything with the journal, then settle it. */
	u->startup = true;
	if (uds_rescan(u, true, true, true) == 0) {
		do_pull(u);
		if (u->ldirty.len || u->nr_lren || u->rdirty.len)
			do_push(u, TRACK_BATCH_NONE);
	}
	u->startup = false;
	u->last_update = now_ms();
	if (cfg->rescan_ms)
		u->next_rescan = now_ms() + cfg->rescan_ms;
	status_file(u);
	return 0;
}

int uds_step(struct uds *u, int extra_fd, int max_ms)
{
	struct pollfd pfd[3] = {
		{ .fd = track_watch_fd(u->ws), .events = POLLIN },
		{ .fd = track_watch_fd(u->wd), .events = POLLIN },
		{ .fd = extra_fd, .events = POLLIN },
	};
	int wait = wait_ms(u);

	if (max_ms >= 0 && (wait < 0 || wait > max_ms))
		wait = max_ms;
	if (poll(pfd, extra_fd >= 0 ? 3 : 2, wait) < 0 && errno != EINTR) {
		err_("poll: %s", strerror(errno));
		return -errno;
	}
	tick(u);
	return extra_fd >= 0 && (pfd[2].revents & POLLIN);
}

int uds_finish(struct uds *u)
{
	struct config *cfg;

	if (!u->cfg->once)
		flush(u);
	if (u->ldirty.len && !u->broken)
		warn_("exiting with %zu paths not pushed (they are pushed at "
		      "the next start)", u->ldirty.len);
	log_stats(u);
	status_file(u);
	if (u->cfg->stats) {
		fflush(stdout);
		uds_write_status(u, STDOUT_FILENO);
	}
	est_forget(NULL);
	cfg = u->cfg;
	uds_close(u);
	client_close(cfg);
	return 0;
}

int uds_run(struct config *cfg)
{
	struct uds u;
	sigset_t mask;
	int sfd, ret = 0;
	bool stop = false;

	log_setup("uds-plus", cfg->use_syslog, cfg->log_level);
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		err_("signalfd: %s", strerror(errno));
		return 1;
	}
	if (uds_start(&u, cfg)) {
		close(sfd);
		return 1;
	}
	if (cfg->once) {
		flush(&u);
		if (u.ldirty.len || u.rdirty.len || u.broken)
			ret = 1;
		stop = true;
	}
	while (!stop) {
		struct signalfd_siginfo si;
		int n = uds_step(&u, sfd, -1);

		if (n < 0) {
			ret = 1;
			break;
		}
		while (n && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			switch (si.ssi_signo) {
			case SIGUSR1:
				log_stats(&u);
				status_file(&u);
				break;
			case SIGHUP:
				info_("SIGHUP: pushing now");
				flush(&u);
				break;
			default:
				info_("signal %u: pushing what is pending, "
				      "then exiting", si.ssi_signo);
				stop = true;
			}
		}
	}
	uds_finish(&u);
	close(sfd);
	return ret;
}
