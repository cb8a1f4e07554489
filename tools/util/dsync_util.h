/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Helpers of the dsync tools (dmextract, dmmerge, dmsync): messages,
 * numbers, signals, progress, and reading dirty lists. Everything here is
 * prefixed ds_ because every tools/util object is linked into every tool.
 */
#ifndef DSYNC_UTIL_H
#define DSYNC_UTIL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Exit codes of every dsync tool. */
#define DS_EXIT_OK	0
#define DS_EXIT_FAIL	1
#define DS_EXIT_USAGE	2

extern const char *ds_prog;

/* "prog: message" on stderr. */
__attribute__((format(printf, 1, 2)))
void ds_err(const char *fmt, ...);

/* Parse a decimal number, with an optional K, M, G, T suffix (powers of
 * 1024) when SUFFIX is true. -EINVAL on anything else. */
int ds_parse_u64(const char *s, bool suffix, uint64_t *v);

/*
 * Is S a source id the tools can keep? 1 to TRACK_STREAM_ID_MAX printable
 * ASCII characters, not starting or ending with a blank (the state file
 * could not give those back). NULL if so, else what is wrong with it.
 */
const char *ds_source_id_problem(const char *s);

/* "1.5 GiB" */
const char *ds_human(uint64_t bytes, char *buf, size_t len);

/* Monotonic time in seconds. */
double ds_now(void);

/*
 * Signals: SIGINT, SIGTERM, SIGHUP set ds_stop (and interrupt blocking
 * calls: no SA_RESTART); SIGPIPE is ignored so writes fail with EPIPE.
 */
extern volatile sig_atomic_t ds_stop;
void ds_catch_signals(void);
/* Block or unblock those signals in the calling thread. */
void ds_block_signals(bool block);

/*
 * --fsfreeze MOUNTPOINT: quiesce the file system mounted there for the
 * instant of a dm-track freeze, with FIFREEZE/FITHAW.
 *
 * ds_fs_check() opens MNT and checks it is the root of a mount: the fd,
 * or -errno with MSG. ds_fs_freeze() blocks SIGINT/SIGTERM/SIGHUP (so a
 * signal cannot leave the file system frozen) and freezes: 0, or -errno
 * with MSG and nothing frozen. ds_fs_thaw() thaws and unblocks: 0, or
 * -errno with MSG (the file system may still be frozen: 'fsfreeze -u').
 * Call ds_fs_thaw() after every successful ds_fs_freeze(), whatever
 * happened in between.
 */
int ds_fs_check(const char *mnt, char *msg, size_t msglen);
int ds_fs_freeze(int fd, const char *mnt, char *msg, size_t msglen);
int ds_fs_thaw(int fd, const char *mnt, char *msg, size_t msglen);

/*
 * Write all of BUF to FD: LEN, or -errno. EINTR is retried unless ds_stop
 * is set, then -EINTR.
 */
ssize_t ds_write_all(int fd, const void *buf, size_t len);
/*
 * If FD is a pipe, make it hold at least one stream record (1 MiB), as far
 * as the system allows (F_SETPIPE_SZ; /proc/sys/fs/pipe-max-size is 1 MiB
 * by default). Through the default 64 KiB, a record takes 16 wakeups of
 * each side, and dmextract | dmmerge of 512 MiB on tmpfs took 2.5 times
 * as long (docs/benchmarks-dsync.md). Failures are ignored: a smaller
 * pipe is slower, nothing else.
 */
void ds_pipe_grow(int fd);

/* A progress line on stderr. */
enum ds_progress_mode { DS_PROGRESS_AUTO, DS_PROGRESS_ON, DS_PROGRESS_OFF };
struct ds_progress {
	bool on;
	bool tty;
	uint64_t total;
	double start;
	double last;
	uint64_t done;
	bool open_ended;	/* no total: bytes and rate only */
};
void ds_progress_init(struct ds_progress *p, enum ds_progress_mode mode,
		      uint64_t total);
void ds_progress_update(struct ds_progress *p, uint64_t done, bool final);

/* A run of blocks. */
struct ds_extent {
	uint64_t first;
	uint64_t count;
};

/*
 * Read a dirty list: one block number per line, or a range "A-B"
 * (inclusive); blank lines and lines starting with '#' are ignored.
 * Sorted and merged into *EXT (*N entries, malloc'ed). On error, MSG says
 * which line is wrong. Blocks must be below NR_BLOCKS.
 */
int ds_read_dirty_list(const char *path, uint64_t nr_blocks,
		       struct ds_extent **ext, size_t *n, char *msg,
		       size_t msglen);

#endif /* DSYNC_UTIL_H */
