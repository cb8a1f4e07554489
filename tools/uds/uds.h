/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * uds-plus internals: the sync engine between SAVINGBOX (where the user
 * works, "S") and SYNCFOLDER (what the cloud client watches, "D").
 *
 * The model, in one paragraph. For every path uds-plus has synced it keeps
 * a baseline: what each side looked like (type, mode, size, mtime, ctime,
 * inode) right after the last sync, persisted in a journal. A side whose
 * current lstat() differs from its baseline has changed; events only say
 * where to look (and, with ranges, which bytes to read). S changed -> push
 * (batched by track_batch_*); D changed -> pull; both -> keep both (a
 * conflict copy). Restart and overflow are the same rescan: compare every
 * path with its baseline.
 */
#ifndef UDS_H
#define UDS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <libtrack.h>

/* --- log.c ---------------------------------------------------------- */

enum log_level { LOG_ERR_ = 0, LOG_WARN_, LOG_NOTICE_, LOG_INFO_, LOG_DEBUG_ };

void log_setup(const char *ident, bool use_syslog, enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
bool log_enabled(enum log_level level);
int log_level_parse(const char *s, enum log_level *level);
/* A path made printable (escapes control characters); static buffer. */
const char *log_path(const char *path);

#define err_(...)	log_msg(LOG_ERR_, __VA_ARGS__)
#define warn_(...)	log_msg(LOG_WARN_, __VA_ARGS__)
#define notice_(...)	log_msg(LOG_NOTICE_, __VA_ARGS__)
#define info_(...)	log_msg(LOG_INFO_, __VA_ARGS__)
#define debug_(...)	log_msg(LOG_DEBUG_, __VA_ARGS__)

/* --- hmap.c: string -> pointer map ---------------------------------- */

struct hmap_item {
	char *key;		/* owned by the map */
	void *val;
	uint64_t hash;
};

struct hmap {
	struct hmap_item *items;
	size_t cap, len, used;	/* used counts tombstones too */
};

void hmap_init(struct hmap *m);
/* Free the keys; calls FREE_VAL (may be NULL) on every value. */
void hmap_clear(struct hmap *m, void (*free_val)(void *));
void *hmap_get(const struct hmap *m, const char *key);
/* Insert or replace; returns the old value (or NULL). -1 cast on ENOMEM. */
int hmap_put(struct hmap *m, const char *key, void *val, void **old);
/* Remove KEY; returns its value or NULL. */
void *hmap_del(struct hmap *m, const char *key);
/* Iterate: *pos starts at 0; returns NULL at the end. */
struct hmap_item *hmap_next(const struct hmap *m, size_t *pos);
/* Sorted copy of the keys, NULL on ENOMEM; free with hmap_free_keys(). */
char **hmap_sorted_keys(const struct hmap *m, size_t *n);
void hmap_free_keys(char **keys, size_t n);
/* Remove PATH and every key below it ("PATH/..."). */
void hmap_del_tree(struct hmap *m, const char *path, void (*free_val)(void *));
/* Move PATH and every key below it to TO (replacing what is there). */
int hmap_rename_tree(struct hmap *m, const char *from, const char *to,
		     void (*free_val)(void *));

/* Sets of byte ranges are libtrack's struct track_extents. */

/* --- fsx.c: file operations confined to a root ---------------------- */

/* What one side looks like at one path. type 0 means absent. */
struct snap {
	char type;		/* 0, 'f' file, 'd' dir, 'l' symlink, 'o' other */
	uint32_t mode;		/* permission bits */
	uint64_t size;
	int64_t mtime_ns;
	int64_t ctime_ns;
	uint64_t ino;
	uint32_t nlink;		/* not compared, not kept in the journal */
};

void snap_from_stat(struct snap *s, const struct stat *st);
/* Equal for change detection (directories: type and mode only). */
bool snap_eq(const struct snap *a, const struct snap *b);

/*
 * Open the parent directory of REL under ROOTFD, following no symlink,
 * and point *NAME at the last component. REL "" has no parent (-EINVAL).
 * With MKDIRS, missing parents are created (mode 0755, or MODES_FROM's
 * modes for the same relative path if MODES_FROM >= 0).
 */
int fsx_open_parent(int rootfd, const char *rel, const char **name,
		    bool mkdirs, int modes_from);
/* Open directory REL ("" is the root itself) without following links. */
int fsx_open_dir(int rootfd, const char *rel);
/* lstat REL under ROOTFD into *S; absent is not an error (type 0). */
int fsx_snap(int rootfd, const char *rel, struct snap *s);

/* Is NAME one of uds-plus's temporary names? */
bool fsx_is_temp_name(const char *name);
/* Create an unnamed (or, without O_TMPFILE, a hidden temporary) file in
 * directory DFD. *TMPNAME receives the name if one was used ("" if not). */
int fsx_tmpfile(int dfd, char tmpname[64]);
/*
 * Give the file from fsx_tmpfile() the name NAME in DFD, replacing what is
 * there when REPLACE (atomically, with rename).
 */
int fsx_publish(int dfd, int fd, const char *tmpname, const char *name,
		bool replace);
/* Remove a temporary left by fsx_tmpfile() that was not published. */
void fsx_discard(int dfd, const char *tmpname);

struct copy_stats {
	uint64_t read;		/* bytes read, both sides */
	uint64_t written;	/* bytes written to the target */
};

/* Copy all of SRC to DST (both at offset 0); DST is empty. */
int fsx_copy_all(int src, int dst, uint64_t size, struct copy_stats *cs);
/*
 * Make DST equal SRC by comparing blocks and writing only those that
 * differ, then truncating to SIZE. With EXT, only those ranges are read
 * and compared (the rest is known to be equal).
 */
int fsx_delta(int src, int dst, uint64_t size, const struct track_extents *ext,
	      struct copy_stats *cs);
/* Hashes of a file's 4 KiB blocks (fallback mode, large files). */
struct blocksums {
	uint64_t n;
	uint64_t (*h)[2];
};

void fsx_sums_free(struct blocksums *bs);
/*
 * fsx_delta() of the whole file, and SUMS set to the hashes of SRC's
 * blocks. With VALID (SUMS are the hashes of DST as it is) only SRC is
 * read, and of DST only the blocks whose hash differs: a push of a small
 * change to a large file reads the file once, not twice.
 */
int fsx_delta_sums(int src, int dst, uint64_t size, struct blocksums *sums,
		   bool valid, struct copy_stats *cs);
/* Are the regular files A and B byte for byte equal? 1, 0 or -errno. */
int fsx_same_content(int a, int b, struct copy_stats *cs);

/*
 * A Dropbox-style conflict name for NAME: "report (host's conflicted copy
 * 2024-05-01).txt", then " (2)", " (3)"... until free in both directories.
 */
int fsx_conflict_name(int dfd1, int dfd2, const char *name, const char *host,
		      time_t when, char *out, size_t outlen);

/* Make NAME in DFD a symlink to TARGET, replacing what is there. */
int fsx_symlink(int dfd, const char *name, const char *target);
/* Remove REL's entry in its parent (a file, link or empty directory). */
int fsx_remove(int rootfd, const char *rel, bool isdir);

/* --- journal.c: the baseline, persisted ----------------------------- */

struct entry {
	struct snap s, d;	/* each side right after the last sync */
	bool inflight;		/* a push into D began and did not finish */
	bool racy;		/* S's ctime was too close to the record */
	uint64_t echo_until;	/* ms: S events matching s are our own */
};

struct journal {
	int fd;
	char *path;
	uint64_t size;		/* bytes in the file */
	unsigned int records;	/* since the last compaction */
	bool sync;		/* fdatasync at commits */
	char *buf;		/* pending records */
	size_t len, cap;
	bool has_ids;		/* ids: dev and inode of S and D */
	uint64_t ids[4];
};

/* Load DIR/journal into MAP (path -> struct entry *); create if absent. */
int journal_open(struct journal *j, const char *dir, const char *s_root,
		 const char *d_root, struct hmap *map, bool sync);
void journal_close(struct journal *j);
void journal_set(struct journal *j, const char *path, const struct entry *e);
void journal_drop(struct journal *j, const char *path);
void journal_rename(struct journal *j, const char *from, const char *to);
void journal_begin(struct journal *j, const char *path);
/* Record which directories the baseline belongs to. */
void journal_set_ids(struct journal *j, const uint64_t ids[4]);
/* Write what is pending and make it durable. */
int journal_commit(struct journal *j);
/* Rewrite the journal from MAP (now, or when it has grown too much). */
int journal_compact(struct journal *j, const struct hmap *map,
		    const char *s_root, const char *d_root);
int journal_maybe_compact(struct journal *j, const struct hmap *map,
			  const char *s_root, const char *d_root);

/* The same operations on an in-memory map of struct entry. */
int journal_map_rename(struct hmap *map, const char *from, const char *to);
void journal_map_drop(struct hmap *map, const char *path);

/* Path escaping for the journal (exported for the unit tests). */
char *journal_escape(const char *path);
char *journal_unescape(const char *s);

/* --- config.c ------------------------------------------------------- */

/* How the cloud client behind SYNCFOLDER batches (client.c). */
enum uds_client {
	UDS_CLIENT_GENERIC = 0,	/* syncs every change at once: the paper */
	UDS_CLIENT_SYNCTHING,
};

struct client;

struct config {
	char *savingbox;
	char *syncfolder;
	char *state_dir;
	char *status_file;
	uint64_t timer_ms;
	uint64_t counter_bytes;
	uint64_t failsafe_ms;
	uint64_t pull_delay_ms;
	uint64_t rescan_ms;	/* periodic stat rescan; 0 = off */
	uint64_t lone_ms;	/* a lone change is pushed after this; 0 off */
	bool timer_set, counter_set, failsafe_set, lone_set;	/* by the user */
	enum uds_client client;
	char *syncthing_config;
	bool syncthing_scan;
	bool syncthing_hint;	/* watcher on: still ask for a scan */
	struct client *cl;	/* the client profile's state */
	bool no_ranges;
	bool fsync;
	bool once;
	bool stats;
	bool use_syslog;
	enum log_level log_level;
	char **ignore;		/* fnmatch patterns on names */
	size_t nr_ignore;
	bool default_ignores;
	char *hostname;		/* for conflict names */
};

void config_defaults(struct config *c);
void config_free(struct config *c);
/* Parse ARGV (and the config file it names); exits 2 on usage errors. */
int config_parse(struct config *c, int argc, char **argv);
/* Apply one "key = value" setting (from a file or an option). */
int config_set(struct config *c, const char *key, const char *val,
	       char *msg, size_t msglen);
/* "1.5s", "300ms", "5" (seconds) -> ms; "250K", "1M", "4096" -> bytes. */
int parse_duration_ms(const char *s, uint64_t *ms);
int parse_size(const char *s, uint64_t *bytes);

/* --- client.c: client profiles ---------------------------------------- */

/* Read the client's configuration and choose t, c and f (unless set). */
int client_setup(struct config *cfg);
/* Once the state directory is known: turn the client's watcher off. */
int client_start(struct config *cfg);
/* Give back what start changed in the client (its watcher), free. */
void client_close(struct config *cfg);
void client_free(struct client *cl);
/* PATH in SYNCFOLDER was written, created, removed or renamed. */
void client_wrote(struct config *cfg, const char *path);
/*
 * A push is done: hand the client what it wrote (scan mode); SIZE, the
 * largest file in it, measures the client's hash rate.
 */
int client_pushed(struct config *cfg, uint64_t size);
/* The client's hash rate in bytes/s, as measured; 0 if not known. */
uint64_t client_hash_bps(const struct config *cfg);
/*
 * SAVINGBOX changed at NOW (ms): the time at which the client alone would
 * sync, if nothing else changes and if that leaves the paper's t of
 * quiet before it; 0 if the profile has no such time (generic). *ALONE:
 * when the client alone would start on it (NOW for generic).
 */
uint64_t client_changed(struct config *cfg, uint64_t now, uint64_t *alone);

/* --- sync.c / engine.c ---------------------------------------------- */

/* Local pending changes of one path. */
struct ldirty {
	unsigned int flags;
	struct track_extents *ext; /* LD_RANGES: the changed bytes */
	uint64_t seen_size;	/* plain mode: size at the last event */
};

#define LD_CHECK	0x1	/* compare with the baseline (created, deleted) */
#define LD_WHOLE	0x2	/* content changed, range unknown */
#define LD_RANGES	0x4	/* content changed in ext */
#define LD_ATTR		0x8	/* mode or times changed */

struct rename_op {
	char *from, *to;
};

struct stats {
	uint64_t pushes;	/* push cycles that changed SYNCFOLDER */
	uint64_t push_cycles;	/* all push cycles */
	uint64_t updates;	/* changes seen in SAVINGBOX */
	uint64_t files_pushed;
	uint64_t bytes_pushed;	/* written into SYNCFOLDER */
	uint64_t bytes_read;	/* read from either side */
	uint64_t pulls;
	uint64_t files_pulled;
	uint64_t bytes_pulled;
	uint64_t conflicts;
	uint64_t rescans;
	uint64_t errors;
	uint64_t reasons[4];	/* pushes by enum track_batch_reason */
	uint64_t pushes_lone;	/* of pushes_timer: a lone change, early */
	uint64_t pushes_tick;	/* of pushes_timer: at the client's tick */
	uint64_t last_quiet_ms;	/* last push: its start - the last change */
	uint64_t last_plan_ms;	/* what was planned for it */
	uint64_t last_cost_ms;	/* its expected cost */
	uint64_t last_took_ms;	/* what it took */
	time_t last_push;
};

struct uds {
	struct config *cfg;
	int sfd, dfd;			/* the two roots */
	dev_t sdev, ddev;
	ino_t sino, dino;
	struct track_watch *ws, *wd;
	struct track_batch *batch;
	struct journal j;
	struct hmap base;		/* path -> struct entry */
	struct hmap ldirty;		/* path -> struct ldirty */
	struct hmap rdirty;		/* path -> (void *)1 */
	struct hmap sums;		/* path -> struct pushed_sums */
	uint64_t sums_bytes;		/* memory they hold */
	struct rename_op *lren, *rren;	/* pending renames, in order */
	size_t nr_lren, nr_rren;
	uint64_t rdirty_at;		/* ms of the last remote event */
	uint64_t last_update;		/* ms of the last local change */
	uint64_t lone_at;		/* ms: push a lone change then */
	uint64_t lone_first;		/* ms: that change came then */
	uint64_t tick_at;		/* ms: the client alone syncs then */
	uint64_t pending_max;		/* largest file changed in the batch */
	uint64_t early_at;		/* ms: push then, to end by the bound */
	uint64_t early_plan;		/* ms after the last change it is */
	uint64_t early_cost;		/* ms the push is expected to take */
	uint64_t push_rate;		/* bytes/s pushes read at; 0 unknown */
	uint64_t push_max;		/* largest file the push wrote */
	uint64_t retry_at;		/* ms: no push before (after an error) */
	uint64_t retry_ms;
	uint64_t next_rescan;		/* ms */
	bool need_rescan_s, need_rescan_d;
	bool degraded;			/* a directory could not be watched */
	bool broken;			/* a root vanished: waiting for it */
	bool startup;
	enum track_watch_mode mode;
	struct stats st;
	char last_error[256];
	unsigned char *buf;		/* I/O scratch */
	size_t bufsize;
};

uint64_t now_ms(void);

/* sync.c */
int uds_open(struct uds *u, struct config *cfg);
void uds_close(struct uds *u);
bool uds_ignored(const struct uds *u, const char *path);
struct ldirty *uds_mark_local(struct uds *u, const char *path,
			      unsigned int flags);
void uds_mark_remote(struct uds *u, const char *path);
void uds_mark_local_tree(struct uds *u, const char *path);
int uds_rescan(struct uds *u, bool local, bool remote, bool startup);
int uds_push(struct uds *u, enum track_batch_reason why);
int uds_pull(struct uds *u);
void uds_local_rename(struct uds *u, const char *from, const char *to,
		      bool isdir);
void uds_remote_rename(struct uds *u, const char *from, const char *to);
int uds_check_roots(struct uds *u);
int uds_reattach(struct uds *u);
void uds_set_error(struct uds *u, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* engine.c */
int uds_run(struct config *cfg);
/* The pieces of uds_run(), for tests that drive the loop themselves. */
int uds_start(struct uds *u, struct config *cfg);
/* Wait (at most MAX_MS, -1 as long as nothing is due) and do what is due;
 * returns 1 if EXTRA_FD became readable. */
int uds_step(struct uds *u, int extra_fd, int max_ms);
/* Push what is pending, write the statistics, close. */
int uds_finish(struct uds *u);
void uds_write_status(struct uds *u, int fd);

#endif /* UDS_H */
