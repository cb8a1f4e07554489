// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The watcher: recursive fanotify or inotify, with ranges when the kernel
 * has them.
 *
 * Records read from the inotify descriptor go into a FIFO of raw events. The
 * head of the FIFO is turned into zero or more output events, in order; a
 * rename's first half (IN_MOVED_FROM) stays at the head until its second
 * half arrives (a RENAME) or the rename timeout passes (a DELETE: moved out
 * of the tree), and everything behind it waits, so the caller never sees an
 * event on a new name before the rename that made it.
 *
 * Watches are kept in an array sorted by watch descriptor; each knows its
 * root and its path relative to the root. A directory rename rewrites the
 * paths under it; a move out of the tree removes the watches under it.
 * Directories are opened one component at a time with O_NOFOLLOW, and their
 * watch is added through /proc/self/fd, so a directory swapped for a symlink
 * is never followed and paths of any length work.
 *
 * The fanotify backend (a kernel with FAN_REPORT_RANGE) feeds the same FIFO.
 * Its group reports directory file handles with names and the object's file
 * handle (FAN_REPORT_DFID_NAME | FAN_REPORT_FID), which needs no privilege
 * since Linux 5.13; every directory of the tree gets an inode mark with
 * FAN_EVENT_ON_CHILD and FAN_ONDIR, exactly where inotify would have a
 * watch, and each mark gets a watch descriptor of our own, found again from
 * the handle an event carries. Renames come as one FAN_RENAME event with
 * both directories and names, so no cookie has to be matched and no half
 * waits. fanotify merges a new event into any queued one of the same object
 * and name, which can put a later unlink before an earlier rename: every
 * event that ends with a name existing or not (a merged create and delete,
 * a rename) is checked against the file system, and what the queue order
 * got wrong is reported again. A directory mark the kernel drops (the
 * directory was deleted) gives no IN_IGNORED; FAN_DELETE_SELF stands in.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define WATCH_BUF_SIZE		(64 * 1024)
#define WATCH_RENAME_MS		50
#define WATCH_MASK_COMMON	(IN_CREATE | IN_MODIFY | IN_ATTRIB |	\
				 IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE | \
				 IN_DELETE_SELF | IN_MOVE_SELF | IN_EXCL_UNLINK)

/* The fanotify interface of the range patch; older headers lack it. */
#ifndef FAN_REPORT_RANGE
#define FAN_REPORT_RANGE		0x00800000
#endif
#ifndef FAN_EVENT_INFO_TYPE_RANGE
#define FAN_EVENT_INFO_TYPE_RANGE	6
#endif

#define FAN_GROUP_FLAGS		(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | \
				 FAN_REPORT_FID | FAN_NONBLOCK | FAN_CLOEXEC)
#define FAN_MASK_FILE		(FAN_MODIFY | FAN_ATTRIB | FAN_DELETE_SELF | \
				 FAN_MOVE_SELF)
#define FAN_MASK_DIR		(FAN_MASK_FILE | FAN_CREATE | FAN_DELETE | \
				 FAN_RENAME | FAN_ONDIR | FAN_EVENT_ON_CHILD)
/* fsid, handle type, handle: what identifies a marked object. */
#define FAN_KEY_MAX		(8 + 4 + MAX_HANDLE_SZ)

/* Which backend LIBTRACK_WATCH_BACKEND asks for. */
enum { BACKEND_AUTO, BACKEND_INOTIFY, BACKEND_FANOTIFY };

struct wnode {
	int wd;
	int root;
	unsigned int gen;	/* rescan generation that last saw it */
	char *path;		/* relative to the root; "" is the root */
	unsigned char *key;	/* fanotify: the object's fsid and handle */
	size_t key_len;
	uint64_t hash;
};

/* fanotify: the handle index, sorted by (hash, wd). */
struct fhent {
	uint64_t hash;
	int wd;
};

struct raw {
	int wd;
	uint32_t mask;
	uint32_t cookie;
	uint64_t offset;
	uint64_t length;
	uint64_t when;		/* ms, CLOCK_MONOTONIC, when it was read */
	char *name;		/* NULL if none */
	bool alone;		/* a rename half that has no other half */
};

struct out {
	enum track_event_kind kind;
	unsigned int flags;
	int root;
	int err;		/* != 0: return this error instead */
	uint64_t offset;
	uint64_t length;
	char *path;
	char *old_path;
};

struct wroot {
	char *path;		/* as given to track_watch_add(); NULL: free id */
	bool gone;
	bool file;		/* a single file, not a tree */
	dev_t dev;		/* file roots: the file now watched */
	ino_t ino;
};

struct track_watch {
	int fd;
	bool fan;		/* fanotify, else inotify */
	int probe;		/* fanotify: learns handles (key_of()) */
	unsigned int flags;
	enum track_watch_mode mode;
	int rename_ms;
	unsigned int gen;

	struct wnode *nodes;	/* sorted by wd */
	size_t nr_nodes, cap_nodes;

	struct fhent *fh;	/* fanotify: handle -> wd */
	size_t nr_fh, cap_fh;
	int next_wd;		/* fanotify: our own watch descriptors */
	uint32_t next_cookie;	/* fanotify: pairs a rename's halves */

	struct wroot *roots;
	size_t nr_roots;

	struct raw *raw;	/* ring buffer */
	size_t raw_head, raw_len, raw_cap;

	struct out *out;	/* ring buffer */
	size_t out_head, out_len, out_cap;

	char *cur_path, *cur_old;	/* strings of the last returned event */
	bool proc_fd;			/* /proc/self/fd works */
	char errmsg[512];
	unsigned char *buf;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

__attribute__((format(printf, 2, 3)))
static void set_error(struct track_watch *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->errmsg, sizeof(w->errmsg), fmt, ap);
	va_end(ap);
}

static char *join(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);
	char *p = malloc(dl + nl + 2);

	if (!p)
		return NULL;
	if (dl == 0) {
		memcpy(p, name, nl + 1);
	} else {
		memcpy(p, dir, dl);
		p[dl] = '/';
		memcpy(p + dl + 1, name, nl + 1);
	}
	return p;
}

/* Is PATH equal to PREFIX or below it? */
static bool under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	if (n == 0)
		return true;
	return strncmp(path, prefix, n) == 0 &&
	       (path[n] == '\0' || path[n] == '/');
}

/* --- watch descriptors ---------------------------------------------- */

static size_t node_pos(const struct track_watch *w, int wd)
{
	size_t lo = 0, hi = w->nr_nodes;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (w->nodes[mid].wd < wd)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct wnode *node_find(struct track_watch *w, int wd)
{
	size_t i = node_pos(w, wd);

	if (i < w->nr_nodes && w->nodes[i].wd == wd)
		return &w->nodes[i];
	return NULL;
}

/* Insert or update the node for WD. Takes ownership of PATH. */
static int node_set(struct track_watch *w, int wd, int root, char *path)
{
	size_t i = node_pos(w, wd);

	if (i < w->nr_nodes && w->nodes[i].wd == wd) {
		free(w->nodes[i].path);
		w->nodes[i].path = path;
		w->nodes[i].root = root;
		w->nodes[i].gen = w->gen;
		return 0;
	}
	if (w->nr_nodes == w->cap_nodes) {
		size_t cap = w->cap_nodes ? w->cap_nodes * 2 : 64;
		struct wnode *n = realloc(w->nodes, cap * sizeof(*n));

		if (!n) {
			free(path);
			return -ENOMEM;
		}
		w->nodes = n;
		w->cap_nodes = cap;
	}
	memmove(&w->nodes[i + 1], &w->nodes[i],
		(w->nr_nodes - i) * sizeof(*w->nodes));
	w->nodes[i] = (struct wnode){ .wd = wd, .root = root, .gen = w->gen,
				      .path = path };
	w->nr_nodes++;
	return 0;
}

/* --- fanotify: handles ---------------------------------------------- */

static uint64_t key_hash(const unsigned char *key, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;	/* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ key[i]) * 0x100000001b3ULL;
	return h;
}

/* KEY: fsid, handle type, handle bytes. Returns its length. */
static size_t key_make(unsigned char *key, const void *fsid, int type,
		       const void *handle, size_t handle_len)
{
	memcpy(key, fsid, 8);
	memcpy(key + 8, &type, 4);
	memcpy(key + 12, handle, handle_len);
	return 12 + handle_len;
}

/*
 * The key of an object as fanotify reports it, learnt from fanotify itself
 * rather than from name_to_handle_at(2), which needs CONFIG_FHANDLE and may
 * encode differently: the probe group (FAN_REPORT_FID) marks the object
 * for FAN_OPEN, we open it once more, and its event carries the fsid and
 * handle. DIRFD and PATH name the object as for fanotify_mark(2) (PATH NULL:
 * DIRFD itself, a directory). A file is opened O_NONBLOCK | O_NOCTTY, so a
 * FIFO or terminal does not block or become ours.
 */
static int key_of(struct track_watch *w, int dirfd, const char *path,
		  unsigned char *key, size_t *len)
{
	unsigned char buf[4096] __attribute__((aligned(8)));
	struct fanotify_event_metadata md;
	int err = -ENODATA, fd;
	size_t at;
	ssize_t n;

	if (fanotify_mark(w->probe, FAN_MARK_ADD, FAN_OPEN | FAN_ONDIR, dirfd,
			  path))
		return -errno;
	if (path)
		fd = openat(dirfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY |
			    O_CLOEXEC);
	else
		fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		err = -errno;
	else
		close(fd);
	/* The event was queued while openat() ran; take the first. */
	while ((n = read(w->probe, buf, sizeof(buf))) > 0) {
		if (err != -ENODATA || (size_t)n < sizeof(md))
			continue;
		memcpy(&md, buf, sizeof(md));
		if (md.vers != FANOTIFY_METADATA_VERSION ||
		    md.event_len > (size_t)n || md.metadata_len > md.event_len)
			continue;
		for (at = md.metadata_len; at + 20 <= md.event_len;) {
			struct fanotify_event_info_header h;
			uint32_t hb;
			int32_t type;

			memcpy(&h, buf + at, sizeof(h));
			if (h.len < sizeof(h) || h.len > md.event_len - at)
				break;
			memcpy(&hb, buf + at + 12, 4);
			memcpy(&type, buf + at + 16, 4);
			if (h.info_type == FAN_EVENT_INFO_TYPE_FID &&
			    h.len >= 20 && hb <= MAX_HANDLE_SZ &&
			    20 + (size_t)hb <= h.len) {
				*len = key_make(key, buf + at + 4, type,
						buf + at + 20, hb);
				err = 0;
				break;
			}
			at += h.len;
		}
	}
	/* Drop the probe's mark, whatever the object is now. */
	fanotify_mark(w->probe, FAN_MARK_FLUSH, 0, AT_FDCWD, NULL);
	while (read(w->probe, buf, sizeof(buf)) > 0)
		;
	return err;
}

static size_t fh_pos(const struct track_watch *w, uint64_t hash, int wd)
{
	size_t lo = 0, hi = w->nr_fh;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct fhent *e = &w->fh[mid];

		if (e->hash < hash || (e->hash == hash && e->wd < wd))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct wnode *node_find(struct track_watch *w, int wd);

/* The watch descriptor of the object KEY, or -1. */
static int fh_find(struct track_watch *w, const unsigned char *key,
		   size_t len)
{
	uint64_t hash = key_hash(key, len);

	for (size_t i = fh_pos(w, hash, INT_MIN);
	     i < w->nr_fh && w->fh[i].hash == hash; i++) {
		struct wnode *n = node_find(w, w->fh[i].wd);

		if (n && n->key_len == len && !memcmp(n->key, key, len))
			return n->wd;
	}
	return -1;
}

static void fh_del(struct track_watch *w, const struct wnode *n)
{
	size_t i = fh_pos(w, n->hash, n->wd);

	if (i < w->nr_fh && w->fh[i].wd == n->wd) {
		memmove(&w->fh[i], &w->fh[i + 1],
			(w->nr_fh - i - 1) * sizeof(*w->fh));
		w->nr_fh--;
	}
}

/* Give node WD its key (a copy of KEY) unless it has one. */
static int fh_add(struct track_watch *w, int wd, const unsigned char *key,
		  size_t len)
{
	struct wnode *n = node_find(w, wd);
	size_t i;

	if (!n || n->key)
		return 0;
	if (w->nr_fh == w->cap_fh) {
		size_t cap = w->cap_fh ? w->cap_fh * 2 : 64;
		struct fhent *f = realloc(w->fh, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		w->fh = f;
		w->cap_fh = cap;
	}
	n->key = malloc(len);
	if (!n->key)
		return -ENOMEM;
	memcpy(n->key, key, len);
	n->key_len = len;
	n->hash = key_hash(key, len);
	i = fh_pos(w, n->hash, wd);
	memmove(&w->fh[i + 1], &w->fh[i], (w->nr_fh - i) * sizeof(*w->fh));
	w->fh[i] = (struct fhent){ .hash = n->hash, .wd = wd };
	w->nr_fh++;
	return 0;
}

static void node_del_at(struct track_watch *w, size_t i)
{
	if (w->nodes[i].key) {
		fh_del(w, &w->nodes[i]);
		free(w->nodes[i].key);
	}
	free(w->nodes[i].path);
	memmove(&w->nodes[i], &w->nodes[i + 1],
		(w->nr_nodes - i - 1) * sizeof(*w->nodes));
	w->nr_nodes--;
}

static int open_rel_dir(struct track_watch *w, int root, const char *rel);

/*
 * Remove the kernel's watch (inotify) or mark (fanotify) of node N; the
 * table is the caller's. A mark can only be named through a path to its
 * object, and the object may have moved out of the tree: it is removed only
 * where the path still leads to the same object. A mark left behind pins
 * its inode until the watcher is freed or the object is deleted; its events
 * carry a handle we no longer know and are dropped.
 */
static void rm_watch(struct track_watch *w, const struct wnode *n)
{
	uint64_t mask = FAN_MASK_DIR | FAN_CLOSE_WRITE;
	unsigned char key[FAN_KEY_MAX];
	const struct wroot *r;
	size_t len;
	int fd;

	if (!w->fan) {
		inotify_rm_watch(w->fd, n->wd);
		return;
	}
	if (!n->key || n->root < 0 || (size_t)n->root >= w->nr_roots)
		return;
	r = &w->roots[n->root];
	if (!r->path)
		return;
	if (r->file) {
		if (key_of(w, AT_FDCWD, r->path, key, &len) == 0 &&
		    len == n->key_len &&
		    !memcmp(key, n->key, len))
			fanotify_mark(w->fd, FAN_MARK_REMOVE, mask, AT_FDCWD,
				      r->path);
		return;
	}
	fd = open_rel_dir(w, n->root, n->path);
	if (fd < 0)
		return;
	if (key_of(w, fd, NULL, key, &len) == 0 &&
	    len == n->key_len && !memcmp(key, n->key, len))
		fanotify_mark(w->fd, FAN_MARK_REMOVE, mask, fd, NULL);
	close(fd);
}

/* Stop watching every directory of ROOT at or below PREFIX. */
static void nodes_remove_under(struct track_watch *w, int root,
			       const char *prefix)
{
	size_t i = 0;

	while (i < w->nr_nodes) {
		struct wnode *n = &w->nodes[i];

		if (n->root == root && under(n->path, prefix)) {
			rm_watch(w, n);
			node_del_at(w, i);
		} else {
			i++;
		}
	}
}

/* A directory of ROOT moved from OLD to NEW: rewrite the paths below it. */
static int nodes_rename(struct track_watch *w, int root, const char *old,
			const char *new)
{
	size_t ol = strlen(old), nl = strlen(new);

	for (size_t i = 0; i < w->nr_nodes; i++) {
		struct wnode *n = &w->nodes[i];
		size_t rest;
		char *p;

		if (n->root != root || !under(n->path, old))
			continue;
		rest = strlen(n->path) - ol;
		p = malloc(nl + rest + 1);
		if (!p)
			return -ENOMEM;
		memcpy(p, new, nl);
		memcpy(p + nl, n->path + ol, rest + 1);
		free(n->path);
		n->path = p;
	}
	return 0;
}

/* --- queues --------------------------------------------------------- */

static int grow_ring(void **ring, size_t *head, size_t len, size_t *cap,
		     size_t size)
{
	size_t ncap = *cap ? *cap * 2 : 64;
	unsigned char *n = malloc(ncap * size);

	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		memcpy(n + i * size,
		       (unsigned char *)*ring + ((*head + i) % *cap) * size,
		       size);
	free(*ring);
	*ring = n;
	*head = 0;
	*cap = ncap;
	return 0;
}

static struct raw *raw_at(struct track_watch *w, size_t i)
{
	return &w->raw[(w->raw_head + i) % w->raw_cap];
}

static void raw_drop(struct track_watch *w, size_t i)
{
	/* Remove element I, keeping the order of the rest. */
	free(raw_at(w, i)->name);
	for (; i + 1 < w->raw_len; i++)
		*raw_at(w, i) = *raw_at(w, i + 1);
	w->raw_len--;
	if (w->raw_len == 0)
		w->raw_head = 0;
}

static void raw_pop(struct track_watch *w)
{
	free(raw_at(w, 0)->name);
	w->raw_head = (w->raw_head + 1) % w->raw_cap;
	w->raw_len--;
}

static int raw_push(struct track_watch *w, const struct track_inotify_event *e,
		    uint64_t when)
{
	struct raw *r;

	if (w->raw_len == w->raw_cap) {
		void *ring = w->raw;
		int err = grow_ring(&ring, &w->raw_head, w->raw_len,
				    &w->raw_cap, sizeof(*w->raw));

		if (err)
			return err;
		w->raw = ring;
	}
	r = raw_at(w, w->raw_len);
	*r = (struct raw){ .wd = e->wd, .mask = e->mask, .cookie = e->cookie,
			   .offset = e->offset, .length = e->length,
			   .when = when };
	if (e->name_len) {
		r->name = strndup(e->name, e->name_len);
		if (!r->name)
			return -ENOMEM;
	}
	w->raw_len++;
	return 0;
}

/* Queue an output event. Takes ownership of PATH and OLD (may be NULL). */
static int out_push(struct track_watch *w, enum track_event_kind kind,
		    unsigned int flags, int root, char *path, char *old)
{
	struct out *o;

	if (w->out_len == w->out_cap) {
		void *ring = w->out;
		int err = grow_ring(&ring, &w->out_head, w->out_len,
				    &w->out_cap, sizeof(*w->out));

		if (err) {
			free(path);
			free(old);
			return err;
		}
		w->out = ring;
	}
	o = &w->out[(w->out_head + w->out_len) % w->out_cap];
	*o = (struct out){ .kind = kind, .flags = flags, .root = root,
			   .path = path, .old_path = old, .offset = 0,
			   .length = TRACK_WHOLE_FILE };
	w->out_len++;
	return 0;
}

static struct out *out_last(struct track_watch *w)
{
	return &w->out[(w->out_head + w->out_len - 1) % w->out_cap];
}

/* Queue an error for the caller; the message is already in errmsg. */
static void out_error(struct track_watch *w, int err)
{
	if (out_push(w, TRACK_EVENT_RESCAN, 0, -1, NULL, NULL) == 0)
		out_last(w)->err = err;
}

/* --- adding watches ------------------------------------------------- */

static int read_int_file(const char *path, long *val)
{
	char buf[32];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	*val = strtol(buf, NULL, 10);
	return 0;
}

static void explain_add_error(struct track_watch *w, int err, int root,
			      const char *rel)
{
	const char *r = w->roots[root].path;
	const char *sep = rel[0] ? "/" : "";
	long max = 0;

	if (err == -ENOSPC && w->fan) {
		read_int_file("/proc/sys/fs/fanotify/max_user_marks", &max);
		set_error(w, "cannot watch '%s%s%s': the fanotify mark limit is "
			  "reached (fs.fanotify.max_user_marks = %ld, this "
			  "watcher holds %zu); raise it, e.g. 'sysctl "
			  "fs.fanotify.max_user_marks=%ld'", r, sep, rel, max,
			  w->nr_nodes, max > 0 ? max * 2 : 524288);
	} else if (w->fan && (err == -EOPNOTSUPP || err == -EXDEV ||
			      err == -ENODEV || err == -EOVERFLOW)) {
		set_error(w, "cannot watch '%s%s%s' with fanotify: its file "
			  "system gives no file handles (%s); watch it with "
			  "inotify instead (LIBTRACK_WATCH_BACKEND=inotify)",
			  r, sep, rel, strerror(-err));
	} else if (err == -ENOSPC) {
		read_int_file("/proc/sys/fs/inotify/max_user_watches", &max);
		set_error(w, "cannot watch '%s%s%s': the inotify watch limit is "
			  "reached (fs.inotify.max_user_watches = %ld, this "
			  "watcher holds %zu); raise it, e.g. 'sysctl "
			  "fs.inotify.max_user_watches=%ld'", r, sep, rel, max,
			  w->nr_nodes, max > 0 ? max * 2 : 524288);
	} else {
		set_error(w, "cannot watch '%s%s%s': %s", r, sep, rel,
			  strerror(-err));
	}
}

/* Add (or refresh) the watch on the directory open at DFD. */
static int add_dir_watch(struct track_watch *w, int dfd, int root,
			 const char *rel)
{
	uint32_t mask = WATCH_MASK_COMMON | IN_ONLYDIR;
	char proc[64];
	char *copy;
	int wd;

	if (w->fan) {
		uint64_t fmask = FAN_MASK_DIR;
		unsigned char key[FAN_KEY_MAX];
		size_t len;
		int err;

		if (w->flags & TRACK_WATCH_CLOSE_WRITE)
			fmask |= FAN_CLOSE_WRITE;
		if (fanotify_mark(w->fd, FAN_MARK_ADD | FAN_MARK_ONLYDIR, fmask,
				  dfd, NULL))
			return -errno;
		err = key_of(w, dfd, NULL, key, &len);
		if (err)
			return err;
		wd = fh_find(w, key, len);
		if (wd < 0)
			wd = w->next_wd++;
		copy = strdup(rel);
		if (!copy)
			return -ENOMEM;
		err = node_set(w, wd, root, copy);
		return err ? err : fh_add(w, wd, key, len);
	}
	if (w->flags & TRACK_WATCH_CLOSE_WRITE)
		mask |= IN_CLOSE_WRITE;
	if (w->proc_fd) {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dfd);
		wd = inotify_add_watch(w->fd, proc, mask);
	} else {
		char *full = join(w->roots[root].path, rel);

		if (!full)
			return -ENOMEM;
		wd = inotify_add_watch(w->fd, full, mask | IN_DONT_FOLLOW);
		free(full);
	}
	if (wd < 0)
		return -errno;
	copy = strdup(rel);
	if (!copy)
		return -ENOMEM;
	return node_set(w, wd, root, copy);
}

/* Watch the single file PATH, the whole of root ROOT. */
static int watch_file(struct track_watch *w, int root, const char *path)
{
	unsigned char key[FAN_KEY_MAX];
	size_t len = 0;
	char *rel;
	int wd, err;

	if (w->fan) {
		uint64_t mask = FAN_MASK_FILE;

		if (w->flags & TRACK_WATCH_CLOSE_WRITE)
			mask |= FAN_CLOSE_WRITE;
		if (fanotify_mark(w->fd, FAN_MARK_ADD, mask, AT_FDCWD, path))
			return -errno;
		err = key_of(w, AT_FDCWD, path, key, &len);
		if (err)
			return err;
		wd = fh_find(w, key, len);
		if (wd < 0)
			wd = w->next_wd++;
	} else {
		uint32_t mask = WATCH_MASK_COMMON;

		if (w->flags & TRACK_WATCH_CLOSE_WRITE)
			mask |= IN_CLOSE_WRITE;
		wd = inotify_add_watch(w->fd, path, mask);
		if (wd < 0)
			return -errno;
	}
	rel = strdup("");
	if (!rel)
		return -ENOMEM;
	err = node_set(w, wd, root, rel);
	if (!err && w->fan)
		err = fh_add(w, wd, key, len);
	return err;
}

/*
 * Watch the directory open at DFD (path REL of ROOT) and everything below
 * it. With EMIT, report every entry found as created. Closes DFD.
 * Directories that vanish while we look are skipped: their deletion is
 * reported by the kernel.
 */
static int add_tree(struct track_watch *w, int dfd, int root, const char *rel,
		    bool emit)
{
	struct dirent *de;
	DIR *d;
	int err;

	err = add_dir_watch(w, dfd, root, rel);
	if (err) {
		close(dfd);
		return err;
	}
	d = fdopendir(dfd);
	if (!d) {
		err = -errno;
		close(dfd);
		return err;
	}
	while ((de = readdir(d))) {
		bool isdir;
		char *path;
		int cfd = -1;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		isdir = de->d_type == DT_DIR;
		if (de->d_type == DT_UNKNOWN) {
			struct stat st;

			if (fstatat(dirfd(d), de->d_name, &st,
				    AT_SYMLINK_NOFOLLOW))
				continue;
			isdir = S_ISDIR(st.st_mode);
		}
		path = join(rel, de->d_name);
		if (!path) {
			err = -ENOMEM;
			break;
		}
		if (emit) {
			char *copy = strdup(path);

			if (!copy) {
				free(path);
				err = -ENOMEM;
				break;
			}
			err = out_push(w, TRACK_EVENT_CREATE,
				       TRACK_EVENT_SCANNED |
				       (isdir ? TRACK_EVENT_DIR : 0), root,
				       copy, NULL);
			if (err) {
				free(path);
				break;
			}
		}
		if (isdir)
			cfd = openat(dirfd(d), de->d_name, O_RDONLY |
				     O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd >= 0) {
			err = add_tree(w, cfd, root, path, emit);
			if (err == -ENOENT || err == -ENOTDIR)
				err = 0;
		}
		free(path);
		if (err)
			break;
	}
	closedir(d);
	return err;
}

/* Open directory REL of ROOT without following any symlink inside. */
static int open_rel_dir(struct track_watch *w, int root, const char *rel)
{
	char *copy, *comp, *save = NULL;
	int fd, nfd;

	fd = open(w->roots[root].path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!rel[0])
		return fd;
	copy = strdup(rel);
	if (!copy) {
		close(fd);
		return -ENOMEM;
	}
	for (comp = strtok_r(copy, "/", &save); comp;
	     comp = strtok_r(NULL, "/", &save)) {
		nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			     O_CLOEXEC);
		close(fd);
		if (nfd < 0) {
			fd = -errno;
			break;
		}
		fd = nfd;
	}
	free(copy);
	return fd;
}

/* A directory appeared at REL: watch it and report what is inside. */
static void add_new_dir(struct track_watch *w, int root, const char *rel)
{
	int fd = open_rel_dir(w, root, rel);
	int err;

	if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP)
		return;		/* gone or replaced: the kernel tells */
	if (fd < 0) {
		explain_add_error(w, fd, root, rel);
		out_error(w, fd);
		return;
	}
	err = add_tree(w, fd, root, rel, true);
	if (err && err != -ENOENT && err != -ENOTDIR) {
		explain_add_error(w, err, root, rel);
		out_error(w, err);
	}
}

/* --- public: setup -------------------------------------------------- */

TRACK_EXPORT int track_watch_new(unsigned int flags, struct track_watch **wp)
{
	struct track_watch *w;
	int err;

	const char *env = getenv("LIBTRACK_WATCH_BACKEND");
	int backend = BACKEND_AUTO;

	if (flags & ~(TRACK_WATCH_NO_RANGES | TRACK_WATCH_CLOSE_WRITE |
		      TRACK_WATCH_INOTIFY))
		return -EINVAL;
	if (env && !strcmp(env, "inotify"))
		backend = BACKEND_INOTIFY;
	else if (env && !strcmp(env, "fanotify"))
		backend = BACKEND_FANOTIFY;
	if (flags & TRACK_WATCH_INOTIFY)
		backend = BACKEND_INOTIFY;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->flags = flags;
	w->rename_ms = WATCH_RENAME_MS;
	w->buf = aligned_alloc(__alignof__(struct fanotify_event_metadata),
			       WATCH_BUF_SIZE);
	if (!w->buf) {
		free(w);
		return -ENOMEM;
	}
	w->fd = -1;
	w->probe = -1;
	w->next_wd = 1;
	/*
	 * fanotify when it reports ranges; the environment may force it
	 * without them (whole-file events), which is how its event handling
	 * is tested on stock kernels.
	 */
	if (backend != BACKEND_INOTIFY && !(flags & TRACK_WATCH_NO_RANGES)) {
		w->fd = fanotify_init(FAN_GROUP_FLAGS | FAN_REPORT_RANGE,
				      O_RDONLY | O_LARGEFILE | O_CLOEXEC);
		if (w->fd >= 0) {
			w->fan = true;
			w->mode = TRACK_WATCH_FANOTIFY;
		}
	}
	if (w->fd < 0 && backend == BACKEND_FANOTIFY) {
		w->fd = fanotify_init(FAN_GROUP_FLAGS, O_RDONLY | O_LARGEFILE |
				      O_CLOEXEC);
		if (w->fd >= 0) {
			w->fan = true;
			w->mode = TRACK_WATCH_PLAIN;
		}
	}
	if (w->fan) {
		/* The probe group that learns handles: see key_of(). */
		w->probe = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_FID |
					 FAN_NONBLOCK | FAN_CLOEXEC, O_RDONLY);
		if (w->probe < 0) {
			close(w->fd);
			w->fd = -1;
			w->fan = false;
		}
	}
	if (w->fd < 0 && !(flags & TRACK_WATCH_NO_RANGES)) {
		w->fd = inotify_init1(IN_REPORT_RANGE | IN_NONBLOCK |
				      IN_CLOEXEC);
		if (w->fd >= 0)
			w->mode = TRACK_WATCH_RANGES;
	}
	if (w->fd < 0) {
		w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		w->mode = TRACK_WATCH_PLAIN;
	}
	if (w->fd < 0) {
		err = -errno;
		free(w->buf);
		free(w);
		return err;
	}
	w->proc_fd = access("/proc/self/fd", X_OK) == 0;
	*wp = w;
	return 0;
}

TRACK_EXPORT void track_watch_free(struct track_watch *w)
{
	if (!w)
		return;
	close(w->fd);
	if (w->probe >= 0)
		close(w->probe);
	for (size_t i = 0; i < w->nr_nodes; i++) {
		free(w->nodes[i].path);
		free(w->nodes[i].key);
	}
	free(w->nodes);
	free(w->fh);
	for (size_t i = 0; i < w->nr_roots; i++)
		free(w->roots[i].path);
	free(w->roots);
	while (w->raw_len)
		raw_pop(w);
	free(w->raw);
	for (size_t i = 0; i < w->out_len; i++) {
		struct out *o = &w->out[(w->out_head + i) % w->out_cap];

		free(o->path);
		free(o->old_path);
	}
	free(w->out);
	free(w->cur_path);
	free(w->cur_old);
	free(w->buf);
	free(w);
}

TRACK_EXPORT enum track_watch_mode track_watch_get_mode(const struct track_watch *w)
{
	return w->mode;
}

TRACK_EXPORT int track_watch_fd(const struct track_watch *w)
{
	return w->fd;
}

TRACK_EXPORT unsigned int track_watch_count(const struct track_watch *w)
{
	return (unsigned int)w->nr_nodes;
}

TRACK_EXPORT const char *track_watch_root(const struct track_watch *w,
					  int root)
{
	if (root < 0 || (size_t)root >= w->nr_roots)
		return NULL;
	return w->roots[root].path;
}

TRACK_EXPORT const char *track_watch_error(const struct track_watch *w)
{
	return w->errmsg[0] ? w->errmsg : "no error";
}

TRACK_EXPORT int track_watch_set_rename_timeout(struct track_watch *w, int ms)
{
	if (ms < 0)
		return -EINVAL;
	w->rename_ms = ms;
	return 0;
}

/* Drop queued output events of ROOT. */
static void out_drop_root(struct track_watch *w, int root)
{
	size_t keep = 0;

	for (size_t i = 0; i < w->out_len; i++) {
		struct out *o = &w->out[(w->out_head + i) % w->out_cap];

		if (o->root == root && !o->err) {
			free(o->path);
			free(o->old_path);
			continue;
		}
		w->out[(w->out_head + keep++) % w->out_cap] = *o;
	}
	w->out_len = keep;
}

/* Release root id ROOT; the last one shrinks the table. */
static void root_release(struct track_watch *w, int root)
{
	free(w->roots[root].path);
	w->roots[root] = (struct wroot){ .gone = true };
	while (w->nr_roots && !w->roots[w->nr_roots - 1].path)
		w->nr_roots--;
}

TRACK_EXPORT int track_watch_remove(struct track_watch *w, int root)
{
	if (root < 0 || (size_t)root >= w->nr_roots || !w->roots[root].path)
		return -ENOENT;
	nodes_remove_under(w, root, "");
	out_drop_root(w, root);
	root_release(w, root);
	return 0;
}

TRACK_EXPORT int track_watch_add(struct track_watch *w, const char *path)
{
	struct wroot *roots;
	struct stat st;
	int root, fd, err;
	char *copy;

	if (!path || !path[0]) {
		set_error(w, "an empty path cannot be watched");
		return -EINVAL;
	}
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	/* The lowest free id, or a new one. */
	for (root = 0; (size_t)root < w->nr_roots; root++)
		if (!w->roots[root].path)
			break;
	if ((size_t)root == w->nr_roots) {
		roots = realloc(w->roots, (w->nr_roots + 1) * sizeof(*roots));
		if (!roots) {
			free(copy);
			return -ENOMEM;
		}
		w->roots = roots;
		w->nr_roots++;
	}
	w->roots[root] = (struct wroot){ .path = copy };

	if (stat(path, &st)) {
		err = -errno;
		set_error(w, "cannot watch '%s': %s", path, strerror(-err));
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			err = -errno;
		} else {
			w->gen++;
			err = add_tree(w, fd, root, "", false);
		}
	} else {
		w->roots[root].file = true;
		w->roots[root].dev = st.st_dev;
		w->roots[root].ino = st.st_ino;
		err = watch_file(w, root, path);
	}
	if (err) {
		explain_add_error(w, err, root, "");
		goto fail;
	}
	return root;

fail:
	/* Nothing of a failed add stays: no watch, no id, no path. */
	nodes_remove_under(w, root, "");
	root_release(w, root);
	return err;
}

/* --- turning raw events into output events -------------------------- */

/* Full path of the raw event R (relative to its root), or NULL. */
static char *raw_path(const struct wnode *n, const struct raw *r)
{
	return r->name ? join(n->path, r->name) : strdup(n->path);
}

static bool file_root_check(struct track_watch *w, int root, bool lost);

/* Events were lost: re-add every watch, then tell the caller. */
static void overflow(struct track_watch *w)
{
	w->gen++;
	for (size_t r = 0; r < w->nr_roots; r++) {
		struct stat st;
		int fd, err;

		if (w->roots[r].gone)
			continue;
		fd = open(w->roots[r].path, O_RDONLY | O_DIRECTORY |
			  O_CLOEXEC);
		if (fd < 0) {
			if (stat(w->roots[r].path, &st) == 0 &&
			    !S_ISDIR(st.st_mode)) {
				/* A file root keeps its single watch ... */
				for (size_t i = 0; i < w->nr_nodes; i++)
					if (w->nodes[i].root == (int)r)
						w->nodes[i].gen = w->gen;
				/* ... unless its file was replaced while
				 * events were lost. */
				if (w->roots[r].file)
					file_root_check(w, (int)r, false);
			}
			continue;
		}
		err = add_tree(w, fd, (int)r, "", false);
		if (err) {
			explain_add_error(w, err, (int)r, "");
			out_error(w, err);
		}
	}
	/* Watches not seen again belong to directories gone from the tree. */
	for (size_t i = 0; i < w->nr_nodes;) {
		if (w->nodes[i].gen != w->gen) {
			rm_watch(w, &w->nodes[i]);
			node_del_at(w, i);
		} else {
			i++;
		}
	}
	for (size_t r = 0; r < w->nr_roots; r++) {
		char *p = strdup("");

		if (!w->roots[r].gone && p)
			out_push(w, TRACK_EVENT_RESCAN, 0, (int)r, p, NULL);
		else
			free(p);
	}
}

static void root_gone(struct track_watch *w, int root)
{
	char *p = strdup("");

	if (w->roots[root].gone) {
		free(p);
		return;
	}
	w->roots[root].gone = true;
	nodes_remove_under(w, root, "");
	if (p)
		out_push(w, TRACK_EVENT_GONE,
			 w->roots[root].file ? 0 : TRACK_EVENT_DIR, root, p,
			 NULL);
}

/*
 * Something happened to the file of a single-file root (its link count
 * changed, it was deleted or moved, its watch went away). If the path now
 * names another file, as after an editor's "write a temporary, rename it
 * over", watch that one and report a whole-file MODIFY; if nothing is
 * there, the root is GONE. Returns true when the event was consumed.
 */
static bool file_root_check(struct track_watch *w, int root, bool lost)
{
	struct wroot *wr = &w->roots[root];
	struct stat st;
	char *p;
	int err;

	if (stat(wr->path, &st) || S_ISDIR(st.st_mode)) {
		root_gone(w, root);
		return true;
	}
	if (st.st_dev == wr->dev && st.st_ino == wr->ino && !lost)
		return false;	/* the same file: an ordinary event */
	nodes_remove_under(w, root, "");
	err = watch_file(w, root, wr->path);
	if (err) {
		nodes_remove_under(w, root, "");
		explain_add_error(w, err, root, "");
		root_gone(w, root);
		return true;
	}
	wr->dev = st.st_dev;
	wr->ino = st.st_ino;
	p = strdup("");
	if (p)	/* the whole file: its offset and length say so */
		out_push(w, TRACK_EVENT_MODIFY, 0, root, p, NULL);
	return true;
}

/* Does REL of ROOT exist now? *ISDIR says whether it is a directory. */
static bool path_exists(struct track_watch *w, int root, const char *rel,
			bool *isdir)
{
	char *full = join(w->roots[root].path, rel);
	struct stat st;
	bool ret;

	if (!full)
		return false;
	ret = lstat(full, &st) == 0;
	free(full);
	if (isdir)
		*isdir = ret && S_ISDIR(st.st_mode);
	return ret;
}

static void moved_in(struct track_watch *w, int root, char *path, bool isdir);
static void moved_out(struct track_watch *w, int root, char *path,
		      bool isdir);

/*
 * fanotify only: after a rename, the old name should be gone and the new
 * one there. When not, a later event on that name was merged into an
 * earlier one, ahead of the rename: report the name's present state again.
 */
static void rename_check(struct track_watch *w, int root, const char *path,
			 bool want, bool wasdir)
{
	bool isdir = false;
	char *p;

	if (!w->fan || root < 0 || path_exists(w, root, path, &isdir) == want)
		return;
	p = strdup(path);
	if (!p)
		return;
	if (want)
		moved_out(w, root, p, wasdir);
	else
		moved_in(w, root, p, isdir);
}

/* Something moved out of the tree: a delete, and no more watches there. */
static void moved_out(struct track_watch *w, int root, char *path, bool isdir)
{
	if (isdir)
		nodes_remove_under(w, root, path);
	out_push(w, TRACK_EVENT_DELETE, isdir ? TRACK_EVENT_DIR : 0, root,
		 path, NULL);
}

/* Something moved into the tree: a create, and watches if a directory. */
static void moved_in(struct track_watch *w, int root, char *path, bool isdir)
{
	char *copy = isdir ? strdup(path) : NULL;

	out_push(w, TRACK_EVENT_CREATE, isdir ? TRACK_EVENT_DIR : 0, root,
		 path, NULL);
	if (copy) {
		add_new_dir(w, root, copy);
		free(copy);
	}
}

/* A matched IN_MOVED_FROM / IN_MOVED_TO pair. */
static void renamed(struct track_watch *w, const struct raw *from,
		    const struct raw *to)
{
	struct wnode *nf = node_find(w, from->wd), *nt;
	bool isdir = from->mask & IN_ISDIR;
	char *old = NULL, *new = NULL;
	int rf = -1, rt = -1;

	if (nf) {
		rf = nf->root;
		old = raw_path(nf, from);
	}
	nt = node_find(w, to->wd);
	if (nt) {
		rt = nt->root;
		new = raw_path(nt, to);
	}
	char *oc = w->fan && old ? strdup(old) : NULL;
	char *nc = w->fan && new ? strdup(new) : NULL;

	if (old && new && rf == rt) {
		if (isdir)
			nodes_rename(w, rf, old, new);
		out_push(w, TRACK_EVENT_RENAME, isdir ? TRACK_EVENT_DIR : 0,
			 rf, new, old);
	} else {
		/* Between two roots, or one side unknown: delete, create. */
		if (old)
			moved_out(w, rf, old, isdir);
		if (new)
			moved_in(w, rt, new, isdir);
	}
	if (oc)
		rename_check(w, rf, oc, false, isdir);
	if (nc)
		rename_check(w, rt, nc, true, isdir);
	free(oc);
	free(nc);
}

/* One bit of raw event R, on PATH (taken over). */
static void cook_bit(struct track_watch *w, const struct raw *r, uint32_t bit,
		     int root, char *path)
{
	bool isdir = r->mask & IN_ISDIR;
	unsigned int fl = isdir ? TRACK_EVENT_DIR : 0;

	if (bit == IN_CREATE) {
		char *copy = isdir ? strdup(path) : NULL;

		out_push(w, TRACK_EVENT_CREATE, fl, root, path, NULL);
		if (copy) {
			add_new_dir(w, root, copy);
			free(copy);
		}
	} else if (bit == IN_MODIFY) {
		if (out_push(w, TRACK_EVENT_MODIFY, fl, root, path, NULL))
			return;
		if (r->mask & IN_RANGE) {
			struct out *o = out_last(w);

			o->flags |= TRACK_EVENT_RANGE;
			o->offset = r->offset;
			o->length = r->length;
		}
	} else if (bit == IN_ATTRIB) {
		out_push(w, TRACK_EVENT_ATTRIB, fl, root, path, NULL);
	} else if (bit == IN_CLOSE_WRITE) {
		out_push(w, TRACK_EVENT_CLOSE_WRITE, fl, root, path, NULL);
	} else if (bit == IN_DELETE) {
		out_push(w, TRACK_EVENT_DELETE, fl, root, path, NULL);
	} else if (bit == IN_MOVED_TO) {
		moved_in(w, root, path, isdir);
	} else if (bit == IN_MOVED_FROM) {
		moved_out(w, root, path, isdir);
	} else {
		free(path);
	}
}

/*
 * Raw event R on PATH (taken over). An inotify event has one of these
 * bits; a fanotify event may have several, merged from events on the same
 * object and name in any order. They are reported created first, deleted
 * last, unless the name exists now: then it was deleted and made again.
 */
static void cook_path(struct track_watch *w, const struct raw *r, int root,
		      char *path)
{
	static const uint32_t order[] = {
		IN_CREATE, IN_MOVED_TO, IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE,
		IN_DELETE, IN_MOVED_FROM,
	};
	static const uint32_t again[] = {
		IN_DELETE, IN_CREATE, IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE,
	};
	const uint32_t *seq = order;
	size_t nr = TRACK_ARRAY_SIZE(order);

	if ((r->mask & (IN_CREATE | IN_DELETE)) == (IN_CREATE | IN_DELETE) &&
	    path_exists(w, root, path, NULL)) {
		seq = again;
		nr = TRACK_ARRAY_SIZE(again);
	}
	for (size_t i = 0; i < nr; i++) {
		char *p;

		if (!(r->mask & seq[i]))
			continue;
		p = strdup(path);
		if (!p)
			break;
		cook_bit(w, r, seq[i], root, p);
	}
	/* A rename with one side outside the tree: see renamed(). */
	if (r->mask & IN_MOVED_FROM)
		rename_check(w, root, path, false, r->mask & IN_ISDIR);
	if (r->mask & IN_MOVED_TO)
		rename_check(w, root, path, true, r->mask & IN_ISDIR);
	free(path);
}

/* Turn one raw event (not a rename half) into output events. */
static void cook(struct track_watch *w, const struct raw *r)
{
	struct wnode *n;
	char *path;
	int root;

	if (r->mask & IN_Q_OVERFLOW) {
		overflow(w);
		return;
	}
	n = node_find(w, r->wd);
	if (!n)
		return;		/* a watch we already removed */
	root = n->root;
	if (r->mask & IN_IGNORED) {
		bool was_root = !n->path[0];

		node_del_at(w, (size_t)(n - w->nodes));
		if (was_root && w->roots[root].file)
			file_root_check(w, root, true);
		else if (was_root)
			root_gone(w, root);
		return;
	}
	if (w->roots[root].file && !r->name &&
	    (r->mask & (IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)) &&
	    file_root_check(w, root, false))
		return;
	if (!r->name) {
		/*
		 * An event on the watched object itself. For a directory
		 * below the root its parent reports the same thing with a
		 * name; only the root's own events matter.
		 */
		if (n->path[0])
			return;
		if (r->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT)) {
			root_gone(w, root);
			return;
		}
	}
	path = raw_path(n, r);
	if (!path)
		return;
	cook_path(w, r, root, path);
}

/*
 * Cook raw events from the head of the FIFO until it is empty or blocked
 * by a rename half that may still get its partner.
 */
static void cook_all(struct track_watch *w, uint64_t now)
{
	while (w->raw_len) {
		struct raw *r = raw_at(w, 0);
		size_t i;

		if (!(r->mask & IN_MOVED_FROM) || r->alone) {
			cook(w, r);
			raw_pop(w);
			continue;
		}
		for (i = 1; i < w->raw_len; i++) {
			struct raw *t = raw_at(w, i);

			if ((t->mask & IN_MOVED_TO) && t->cookie == r->cookie)
				break;
		}
		if (i < w->raw_len) {
			renamed(w, r, raw_at(w, i));
			raw_drop(w, i);
			raw_pop(w);
			continue;
		}
		if (now - r->when < (uint64_t)w->rename_ms)
			return;		/* wait for the other half */
		cook(w, r);		/* moved out of the tree */
		raw_pop(w);
	}
}

/* An object a fanotify event names: a watch and maybe a name. */
struct fan_obj {
	int type;		/* FAN_EVENT_INFO_TYPE_* */
	int wd;			/* -1: not one of ours */
	const char *name;	/* NULL or "" when none */
};

/*
 * Parse the info record of type (D)FID(_NAME) REC, LEN bytes: its handle,
 * looked up, and its name. -EBADMSG if it is malformed.
 */
static int fan_parse_fid(struct track_watch *w, const unsigned char *rec,
			 size_t len, struct fan_obj *o)
{
	unsigned char key[FAN_KEY_MAX];
	uint32_t hb;
	int32_t type;
	size_t end;

	/* header 4, fsid 8, handle_bytes 4, handle_type 4, f_handle[] */
	if (len < 20)
		return -EBADMSG;
	memcpy(&hb, rec + 12, 4);
	memcpy(&type, rec + 16, 4);
	if (hb > MAX_HANDLE_SZ || 20 + (size_t)hb > len)
		return -EBADMSG;
	o->wd = fh_find(w, key, key_make(key, rec + 4, type, rec + 20, hb));
	o->name = NULL;
	end = 20 + hb;
	if (o->type == FAN_EVENT_INFO_TYPE_DFID_NAME ||
	    o->type == FAN_EVENT_INFO_TYPE_OLD_DFID_NAME ||
	    o->type == FAN_EVENT_INFO_TYPE_NEW_DFID_NAME) {
		if (end >= len || !memchr(rec + end, '\0', len - end))
			return -EBADMSG;
		o->name = (const char *)rec + end;
	}
	return 0;
}

static int raw_push_fan(struct track_watch *w, int wd, uint32_t mask,
			const char *name, uint32_t cookie, bool alone,
			uint64_t when)
{
	struct track_inotify_event e = {
		.wd = wd, .mask = mask, .cookie = cookie,
		.name = name ? name : "", .name_len = name ? strlen(name) : 0,
	};
	int err = raw_push(w, &e, when);

	if (!err)
		raw_at(w, w->raw_len - 1)->alone = alone;
	return err;
}

/* Turn the fanotify event at EV (checked: EVENT_LEN fits) into raw ones. */
static int fan_event(struct track_watch *w, const unsigned char *ev,
		     const struct fanotify_event_metadata *md, uint64_t when)
{
	uint32_t mask = (uint32_t)md->mask & (IN_MODIFY | IN_ATTRIB |
		IN_CLOSE_WRITE | IN_CREATE | IN_DELETE | IN_DELETE_SELF |
		IN_MOVE_SELF | IN_ISDIR);
	struct fan_obj obj[4], *from = NULL, *to = NULL;
	size_t pos = md->metadata_len, nr = 0;
	uint64_t offset = 0, count = 0;
	bool range = false;
	int err;

	if (md->mask & FAN_Q_OVERFLOW)
		return raw_push_fan(w, -1, IN_Q_OVERFLOW, NULL, 0, false, when);
	while (pos < md->event_len) {
		struct fanotify_event_info_header h;
		const unsigned char *rec = ev + pos;

		if (md->event_len - pos < sizeof(h))
			return -EBADMSG;
		memcpy(&h, rec, sizeof(h));
		if (h.len < sizeof(h) || h.len > md->event_len - pos)
			return -EBADMSG;
		switch (h.info_type) {
		case FAN_EVENT_INFO_TYPE_FID:
		case FAN_EVENT_INFO_TYPE_DFID:
		case FAN_EVENT_INFO_TYPE_DFID_NAME:
		case FAN_EVENT_INFO_TYPE_OLD_DFID_NAME:
		case FAN_EVENT_INFO_TYPE_NEW_DFID_NAME:
			if (nr == TRACK_ARRAY_SIZE(obj))
				return -EBADMSG;
			obj[nr].type = h.info_type;
			err = fan_parse_fid(w, rec, h.len, &obj[nr]);
			if (err)
				return err;
			if (h.info_type == FAN_EVENT_INFO_TYPE_OLD_DFID_NAME)
				from = &obj[nr];
			if (h.info_type == FAN_EVENT_INFO_TYPE_NEW_DFID_NAME)
				to = &obj[nr];
			nr++;
			break;
		case FAN_EVENT_INFO_TYPE_RANGE:
			/* header, pad, __u64 offset, __u64 count */
			if (h.len < 24)
				return -EBADMSG;
			memcpy(&offset, rec + 8, 8);
			memcpy(&count, rec + 16, 8);
			if (offset + count < offset)
				return -EBADMSG;
			range = true;
			break;
		default:
			break;	/* records added later: not ours to read */
		}
		pos += h.len;
	}

	if (md->mask & FAN_RENAME) {
		uint32_t dir = mask & IN_ISDIR, cookie;
		bool f = from && from->wd >= 0 && from->name[0];
		bool t = to && to->wd >= 0 && to->name[0];

		if (++w->next_cookie == 0)
			++w->next_cookie;
		cookie = w->next_cookie;
		if (f) {
			err = raw_push_fan(w, from->wd, IN_MOVED_FROM | dir,
					   from->name, cookie, !t, when);
			if (err)
				return err;
		}
		if (t)
			return raw_push_fan(w, to->wd, IN_MOVED_TO | dir,
					    to->name, cookie, false, when);
		return 0;
	}

	/*
	 * The event once for every object of ours it names: a directory with
	 * a name, and the object itself (a single-file root, or a directory
	 * whose own events matter only for a root), as inotify would.
	 */
	for (size_t i = 0; i < nr; i++) {
		const char *name = obj[i].name;
		struct raw *r;
		bool dup = false;

		if (obj[i].wd < 0 || (name && !strcmp(name, ".")))
			name = NULL;
		if (name && !name[0])
			name = NULL;
		if (obj[i].wd < 0)
			continue;
		for (size_t j = 0; j < i; j++)
			if (obj[j].wd == obj[i].wd)
				dup = true;
		if (dup)
			continue;
		err = raw_push_fan(w, obj[i].wd, mask, name, 0, false, when);
		if (err)
			return err;
		r = raw_at(w, w->raw_len - 1);
		if (range && (mask & IN_MODIFY)) {
			r->mask |= IN_RANGE;
			r->offset = offset;
			r->length = count;
		}
		/* The kernel dropped the mark of a deleted object. */
		if (!name && (mask & IN_DELETE_SELF)) {
			err = raw_push_fan(w, obj[i].wd, IN_IGNORED, NULL, 0,
					   false, when);
			if (err)
				return err;
		}
	}
	return 0;
}

/* Read what fanotify has; returns the number of events, 0, or -errno. */
static int read_fan(struct track_watch *w)
{
	uint64_t when = now_ms();
	ssize_t n = read(w->fd, w->buf, WATCH_BUF_SIZE);
	size_t off = 0;
	int count = 0;

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	while (off < (size_t)n) {
		struct fanotify_event_metadata md;
		int err = -EBADMSG;

		if ((size_t)n - off >= sizeof(md)) {
			memcpy(&md, w->buf + off, sizeof(md));
			if (md.vers == FANOTIFY_METADATA_VERSION &&
			    md.event_len >= sizeof(md) &&
			    md.event_len <= (size_t)n - off &&
			    md.metadata_len >= sizeof(md) &&
			    md.metadata_len <= md.event_len)
				err = 0;
			if (!err && md.fd >= 0)
				close(md.fd);	/* not asked for */
		}
		if (!err)
			err = fan_event(w, w->buf + off, &md, when);
		if (err == -ENOMEM)
			return err;
		if (err) {
			/* Never seen from a sane kernel: rescan to be safe. */
			set_error(w, "malformed fanotify event (%s); rescanning",
				  strerror(-err));
			err = raw_push_fan(w, -1, IN_Q_OVERFLOW, NULL, 0, false,
					   when);
			return err ? err : count + 1;
		}
		off += md.event_len;
		count++;
	}
	return count;
}

/* Read what the kernel has; returns the number of records, 0, or -errno. */
static int read_fd(struct track_watch *w)
{
	uint64_t when;
	ssize_t n;
	size_t off = 0;
	int count = 0;

	if (w->fan)
		return read_fan(w);
	when = now_ms();
	n = read(w->fd, w->buf, WATCH_BUF_SIZE);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	while (off < (size_t)n) {
		struct track_inotify_event e;
		int len = track_watch_parse(w->buf + off, (size_t)n - off, &e);
		int err;

		if (len <= 0) {
			/* Never seen from a sane kernel: rescan to be safe. */
			set_error(w, "malformed inotify record (%s); rescanning",
				  strerror(len ? -len : EBADMSG));
			e = (struct track_inotify_event){ .wd = -1,
				.mask = IN_Q_OVERFLOW, .name = "" };
			len = (int)((size_t)n - off);
		}
		err = raw_push(w, &e, when);
		if (err)
			return err;
		off += (size_t)len;
		count++;
	}
	return count;
}

TRACK_EXPORT int track_watch_timeout(const struct track_watch *w)
{
	uint64_t now, due;

	if (w->out_len)
		return 0;
	if (!w->raw_len)
		return -ENODATA;
	/* Only a held rename half can leave raw events uncooked. */
	now = now_ms();
	due = w->raw[w->raw_head].when + (uint64_t)w->rename_ms;
	return due <= now ? 0 : (int)(due - now);
}

static int pop_out(struct track_watch *w, struct track_event *ev)
{
	struct out *o = &w->out[w->out_head];
	int err = o->err;

	w->out_head = (w->out_head + 1) % w->out_cap;
	w->out_len--;
	free(w->cur_path);
	free(w->cur_old);
	w->cur_path = o->path;
	w->cur_old = o->old_path;
	if (err)
		return err;
	*ev = (struct track_event){ .kind = o->kind, .flags = o->flags,
				    .root = o->root, .offset = o->offset,
				    .length = o->length, .path = o->path,
				    .old_path = o->old_path };
	return 1;
}

TRACK_EXPORT int track_watch_next(struct track_watch *w,
				  struct track_event *ev, int timeout_ms)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX :
			    now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		struct pollfd pfd = { .fd = w->fd, .events = POLLIN };
		uint64_t now;
		int n, wait;

		if (w->out_len)
			return pop_out(w, ev);
		n = read_fd(w);
		if (n < 0)
			return n;
		cook_all(w, now_ms());
		if (w->out_len)
			return pop_out(w, ev);
		if (n > 0)
			continue;

		now = now_ms();
		if (now >= deadline)
			return 0;
		wait = track_watch_timeout(w);
		if (deadline != UINT64_MAX &&
		    (wait < 0 || (uint64_t)wait > deadline - now))
			wait = (int)(deadline - now);
		/* EINTR too: a signal handler must be able to stop a wait. */
		if (poll(&pfd, 1, wait) < 0)
			return -errno;
	}
}
