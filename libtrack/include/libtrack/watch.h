/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * track_watch_*: watch directory trees with fanotify or inotify, and learn
 * which byte ranges a write changed when the kernel can say.
 *
 * A watcher uses fanotify with the range record of the kernel patch (the
 * FAN_REPORT_RANGE flag of fanotify_init(); no privilege needed) when the
 * running kernel has it, else the extended inotify of the UDS+ patch (the
 * IN_REPORT_RANGE flag of inotify_init1()), else plain inotify; then every
 * modification says "the whole file may have changed".
 * track_watch_get_mode() tells which one it got. The events are the same
 * whichever it is.
 *
 * A directory is watched with its whole tree, including directories created
 * or moved in while it is watched: the watcher adds the new directory's
 * watch, then scans it and reports what it finds as created, so nothing
 * written before the watch existed is missed. Renames are reported as one
 * event with both paths; a move out of the tree is a delete, a move in a
 * create. When the kernel queue overflows, the caller gets a RESCAN event
 * and must compare the tree with what it knows; the watcher has already
 * re-added the watches it may have missed.
 */
#ifndef LIBTRACK_WATCH_H
#define LIBTRACK_WATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/inotify.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The kernel interface (extended inotify). Defined here for systems whose
 * headers predate it; the values are fixed.
 */
#ifndef IN_REPORT_RANGE
/* inotify_init1() flag: IN_MODIFY events carry the changed byte range */
#define IN_REPORT_RANGE 0x08000000
#endif
#ifndef IN_RANGE
/* event mask bit: the event ends with a struct inotify_range */
#define IN_RANGE        0x00800000
#endif

/* Size of the { __u64 offset; __u64 length; } record at the end of len. */
#define TRACK_INOTIFY_RANGE_SIZE 16

struct track_watch;

/* What the kernel gave the watcher. */
enum track_watch_mode {
	TRACK_WATCH_PLAIN = 0,	/* stock kernel: modifications are whole-file */
	TRACK_WATCH_RANGES = 1,	/* inotify: modifications carry their range */
	TRACK_WATCH_FANOTIFY = 2, /* fanotify: modifications carry their range */
};

/* Flags for track_watch_new(). */
#define TRACK_WATCH_NO_RANGES	0x1u	/* plain inotify even if ranges exist */
#define TRACK_WATCH_CLOSE_WRITE	0x2u	/* also report CLOSE_WRITE events */
#define TRACK_WATCH_INOTIFY	0x4u	/* inotify even if fanotify has ranges */

enum track_event_kind {
	TRACK_EVENT_CREATE = 1,	/* path appeared (created, linked, moved in) */
	TRACK_EVENT_MODIFY,	/* data changed: offset/length, or whole file */
	TRACK_EVENT_ATTRIB,	/* mode, owner, times, xattrs or link count */
	TRACK_EVENT_CLOSE_WRITE, /* a writer closed the file (opt-in) */
	TRACK_EVENT_DELETE,	/* path disappeared (unlinked, moved out) */
	TRACK_EVENT_RENAME,	/* old_path was renamed to path */
	TRACK_EVENT_RESCAN,	/* events were lost: compare the tree */
	TRACK_EVENT_GONE,	/* the root itself was deleted, moved or unmounted;
				 * DIR set if it was a directory. A single-file
				 * root replaced by a rename is followed instead
				 * (a whole-file MODIFY). */
};

/* Bits in track_event.flags. */
#define TRACK_EVENT_DIR		0x1u	/* the object is a directory */
#define TRACK_EVENT_RANGE	0x2u	/* offset/length are exact */
#define TRACK_EVENT_SCANNED	0x4u	/* found by scanning a new directory */

/* track_event.length of a modification whose range is unknown. */
#define TRACK_WHOLE_FILE UINT64_MAX

struct track_event {
	enum track_event_kind kind;
	unsigned int flags;	/* TRACK_EVENT_* bits */
	int root;		/* the id track_watch_add() returned */
	uint64_t offset;	/* MODIFY: first changed byte (0 if whole) */
	uint64_t length;	/* MODIFY: bytes changed, or TRACK_WHOLE_FILE */
	const char *path;	/* relative to the root; "" is the root itself */
	const char *old_path;	/* RENAME: the path before; else NULL */
	uint64_t reserved[4];	/* zero; later versions may fill them */
};

/*
 * Create a watcher with no roots. Uses ranges when the kernel has them and
 * FLAGS does not say TRACK_WATCH_NO_RANGES; fanotify's unless FLAGS says
 * TRACK_WATCH_INOTIFY or the environment LIBTRACK_WATCH_BACKEND=inotify.
 */
int track_watch_new(unsigned int flags, struct track_watch **wp);

/* Remove every watch and free the watcher. */
void track_watch_free(struct track_watch *w);

/* Whether modifications carry ranges, and whose (not TRACK_WATCH_PLAIN). */
enum track_watch_mode track_watch_get_mode(const struct track_watch *w);

/*
 * Watch PATH: a directory with its whole tree, or a single file. PATH
 * itself may be a symbolic link; links inside the tree are reported but
 * never followed. Returns the
 * root id (0, 1, ...) that events carry. On failure track_watch_error()
 * says what went wrong; -ENOSPC means the per-user inotify watch limit
 * (fs.inotify.max_user_watches) or fanotify mark limit
 * (fs.fanotify.max_user_marks) is reached.
 */
int track_watch_add(struct track_watch *w, const char *path);

/*
 * Stop watching root ROOT: its watches go, and events of it still queued in
 * the watcher are dropped. Its id may be returned by a later
 * track_watch_add(). -ENOENT if ROOT is not a watched root.
 */
int track_watch_remove(struct track_watch *w, int root);

/* The path given to track_watch_add() for root id ROOT, or NULL. */
const char *track_watch_root(const struct track_watch *w, int root);

/* The number of watched objects (inotify watches or fanotify marks). */
unsigned int track_watch_count(const struct track_watch *w);

/*
 * Get the next event, waiting up to TIMEOUT_MS milliseconds (-1 forever,
 * 0 not at all). Returns 1 and fills *EV, 0 if no event came in time,
 * -EINTR if a signal interrupted the wait (nothing is lost: call again),
 * or another negative errno (then see track_watch_error()). Strings in *EV stay valid
 * until the next call on W.
 */
int track_watch_next(struct track_watch *w, struct track_event *ev,
		     int timeout_ms);

/*
 * The file descriptor to poll for POLLIN, for callers with their own event
 * loop: call track_watch_next(w, ev, 0) until it returns 0 when it is
 * readable, and also after track_watch_timeout() milliseconds.
 */
int track_watch_fd(const struct track_watch *w);

/*
 * How long the caller may sleep before track_watch_next() must be called
 * again even if the descriptor stays quiet (a held rename half expires), in
 * milliseconds; -ENODATA for no limit (negative: poll(2) waits forever).
 */
int track_watch_timeout(const struct track_watch *w);

/*
 * How long a rename's first half waits for its second before it is reported
 * as a move out of the tree, in milliseconds (default 50).
 */
int track_watch_set_rename_timeout(struct track_watch *w, int ms);

/* A message about the last failure of W, naming the path and the fix. */
const char *track_watch_error(const struct track_watch *w);

/* One inotify record as the kernel wrote it, from track_watch_parse(). */
struct track_inotify_event {
	int wd;
	uint32_t mask;		/* IN_* bits as received, IN_RANGE included */
	uint32_t cookie;
	const char *name;	/* into the buffer; "" if the event has none */
	size_t name_len;	/* strlen(name) */
	uint64_t offset;	/* valid when mask has IN_RANGE */
	uint64_t length;
};

/*
 * Parse the inotify record at the start of BUF (LEN bytes, as read(2)
 * returned them), in either kernel format. Returns the record's size, so
 * the next one starts at buf + result; 0 when LEN is 0; -EMSGSIZE when the
 * record runs past LEN (a truncated read); -EBADMSG when it is malformed (a
 * name without a NUL, an IN_RANGE record without room for the range, a
 * range that wraps around).
 */
int track_watch_parse(const void *buf, size_t len,
		      struct track_inotify_event *ev);

#ifdef __cplusplus
}
#endif

#endif /* LIBTRACK_WATCH_H */
