// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Applying a dsync stream to a device or file (track_apply_*; see
 * <libtrack/dsync.h>): the engine of dmmerge.
 *
 * Nothing is written before the header matched the target (and the state
 * file's epoch); each record is checked completely by the reader before
 * it is written; writes never leave the target. With --undo, the old
 * contents of each batch of records are saved and synced first, so an
 * interrupted apply can be rolled back.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <zlib.h>

#include <stdarg.h>

#include "internal.h"

#define BATCH_BYTES	(32u << 20)	/* --undo: data held before a sync */
#define CHUNK		(1u << 20)

/*
 * The replica fingerprint (see docs/dsync.md, "A replica changed behind
 * the state file"): CRC-32 of the first FP_HEAD bytes (where every common
 * filesystem keeps the superblock a mount writes) and of up to FP_MAX
 * extents, FP_BYTES in all, of what the last apply wrote, spread evenly.
 */
#define FP_HEAD		(1u << 20)
#define FP_MAX		4096
#define FP_BYTES	(64ull << 20)

struct fp {			/* a fingerprinted range of bytes */
	uint64_t off;
	uint64_t len;
	uint32_t crc;
};

#define UNDO_ID_LEN	16

/*
 * The state file. While an apply or a rollback is writing, it says so
 * ("unfinished"): the target then mixes the blocks of EPOCH and of
 * MIXED_NEW, and only the undo file MIXED_UNDO (if any) or a stream from
 * EPOCH makes it whole; no other undo file is accepted, as rolling back
 * any other would leave the mix under a state that names one epoch.
 */
struct state {
	bool present;
	char source_id[TRACK_STREAM_ID_MAX + 1];
	uint64_t epoch;
	uint64_t block_size;
	uint64_t device_size;
	struct fp *fp;		/* the replica fingerprint */
	size_t nfp;
	bool mixed;		/* an apply or rollback did not finish */
	uint64_t mixed_new;	/* the other epoch of the mix */
	uint8_t mixed_undo[UNDO_ID_LEN]; /* the undo file that undoes it */
	char mixed_path[4096];	/* and where it was, for messages */
	uint8_t last_undo[UNDO_ID_LEN]; /* of the apply that reached epoch */
};

struct brec {			/* a record held in an --undo batch */
	uint32_t type;
	uint64_t first;
	uint64_t count;
	size_t length;
	size_t off;		/* of its data in the batch buffer */
};

struct track_apply {
	/* parameters */
	const char *target;
	const char *state_path;
	const char *undo_path;
	const char *rollback;
	bool force;
	bool verify;
	track_apply_log_fn log;
	void *log_arg;
	track_apply_progress_fn progress;
	void *progress_arg;
	uint64_t block_bytes;	/* applied, for progress */

	/* the stream */
	const char *input;	/* its name, or the undo file */
	int in_fd;		/* the undo file */
	track_stream_read_fn in_fn;
	void *in_arg;
	struct track_stream_reader *r;
	struct track_stream_info info;

	/* the target */
	int tfd;
	uint64_t tsize;
	bool tregular;
	bool created;
	bool resize;		/* size the empty file before the first write */
	bool resized;
	bool marked;		/* the state file says "unfinished" */

	struct state st;

	/* --undo */
	uint8_t undo_id[UNDO_ID_LEN];
	int ufd;
	struct track_stream_writer *uw;
	bool undo_used;		/* a batch of old contents went to it */
	struct brec *batch;
	size_t nbatch;
	size_t batch_cap;
	unsigned char *bbuf;
	size_t bused;
	uint64_t bzero;		/* bytes of zero runs in the batch */
	unsigned char *chunk;	/* CHUNK bytes, or one block if larger */
	size_t chunk_len;

	/* what was written: the extents, for the fingerprint */
	struct fp *ext;
	size_t next, ext_cap;
	uint64_t ext_bytes;
	uint64_t written;	/* records */
	uint64_t first_block;
	uint64_t last_block;
};

__attribute__((format(printf, 2, 3)))
static void a_err(struct track_apply *m, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	if (!m->log)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	m->log(m->log_arg, buf);
}

/* Tell the caller how far we are; it may stop us. */
static int report_progress(struct track_apply *m, bool final)
{
	int ret;

	if (!m->progress)
		return 0;
	ret = m->progress(m->progress_arg, track_stream_reader_offset(m->r),
			  m->block_bytes, final);
	if (final)
		return 0;
	return ret > 0 ? -ECANCELED : ret;
}

static ssize_t fd_read(void *arg, void *buf, size_t len);

/* --- the state file ------------------------------------------------------ */

static bool id_zero(const uint8_t *id)
{
	return trk_all_zero(id, UNDO_ID_LEN);
}

/* An undo id as 32 lower-case hex digits into BUF (33 bytes). */
static const char *id_format(const uint8_t *id, char *buf)
{
	for (int i = 0; i < UNDO_ID_LEN; i++)
		snprintf(buf + 2 * i, 3, "%02x", id[i]);
	return buf;
}

/* 32 hex digits at S into ID; -EINVAL if they are not. */
static int id_parse(const char *s, uint8_t *id)
{
	for (int i = 0; i < UNDO_ID_LEN; i++) {
		unsigned int v;
		char hex[3] = { s[2 * i], s[2 * i] ? s[2 * i + 1] : 0, 0 };

		if (!isxdigit((unsigned char)hex[0]) ||
		    !isxdigit((unsigned char)hex[1]) ||
		    sscanf(hex, "%x", &v) != 1)
			return -EINVAL;
		id[i] = v;
	}
	return 0;
}

/*
 * Sync the directory that holds PATH, so that a file just created or
 * renamed there survives a power loss with its name.
 */
static int sync_dir_of(const char *path)
{
	char *copy = strdup(path);
	int dfd, ret = 0;

	if (!copy)
		return -ENOMEM;
	dfd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd))
		ret = -errno;
	if (dfd >= 0)
		close(dfd);
	free(copy);
	return ret;
}

static int state_load(struct track_apply *m, const char *path,
		      struct state *st)
{
	char line[512], key[32], val[256];
	unsigned int seen = 0;
	uint64_t v;
	FILE *f;

	free(st->fp);
	memset(st, 0, sizeof(*st));
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		a_err(m, "cannot read state file %s: %s", path, strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (!strncmp(line, "source-id ", 10)) {
			/* the rest of the line, blanks and all */
			size_t n = strcspn(line + 10, "\n");

			if (n > TRACK_STREAM_ID_MAX)
				goto bad;
			memcpy(st->source_id, line + 10, n);
			st->source_id[n] = 0;
			seen |= 1;
			continue;
		}
		if (!strncmp(line, "fingerprint ", 12)) {
			unsigned long long off, len;
			unsigned int crc;
			struct fp *nf;

			if (sscanf(line + 12, "%llu %llu %x", &off, &len,
				   &crc) != 3 || !len)
				goto bad;
			nf = realloc(st->fp, (st->nfp + 1) * sizeof(*nf));
			if (!nf)
				goto bad;
			st->fp = nf;
			st->fp[st->nfp].off = off;
			st->fp[st->nfp].len = len;
			st->fp[st->nfp++].crc = crc;
			continue;
		}
		if (!strncmp(line, "unfinished-undo ", 16)) {
			/* the undo file's id, then its path to the end */
			size_t n;

			if (id_parse(line + 16, st->mixed_undo) ||
			    line[16 + 2 * UNDO_ID_LEN] != ' ')
				goto bad;
			n = strcspn(line + 17 + 2 * UNDO_ID_LEN, "\n");
			if (n >= sizeof(st->mixed_path))
				goto bad;
			memcpy(st->mixed_path, line + 17 + 2 * UNDO_ID_LEN, n);
			st->mixed_path[n] = 0;
			continue;
		}
		if (!strncmp(line, "undo-id ", 8)) {
			if (id_parse(line + 8, st->last_undo))
				goto bad;
			continue;
		}
		if (sscanf(line, "%31s %255[ -~]", key, val) != 2)
			goto bad;
		if (!strcmp(key, "source-id")) {
			if (strlen(val) > TRACK_STREAM_ID_MAX)
				goto bad;
			memcpy(st->source_id, val, strlen(val) + 1);
			seen |= 1;
			continue;
		}
		if (trk_parse_u64(val, &v))
			goto bad;
		if (!strcmp(key, "epoch")) {
			st->epoch = v;
			seen |= 2;
		} else if (!strcmp(key, "block-size")) {
			st->block_size = v;
			seen |= 4;
		} else if (!strcmp(key, "device-size")) {
			st->device_size = v;
			seen |= 8;
		} else if (!strcmp(key, "unfinished")) {
			st->mixed = true;
			st->mixed_new = v;
		}
	}
	fclose(f);
	if (seen != 15 || (!st->mixed && !id_zero(st->mixed_undo)))
		goto bad_closed;
	st->present = true;
	return 0;
bad:
	fclose(f);
bad_closed:
	a_err(m, "state file %s is damaged (expected source-id, epoch, "
	       "block-size and device-size lines); repair it, or delete it "
	       "and apply a full stream (dmextract --all)", path);
	return -EINVAL;
}

/* Replace the state file atomically (write, sync, rename, sync dir). */
static int state_save(struct track_apply *m, const char *path,
		      const struct state *st,
		      const char *target)
{
	char tmp[4096], id[2 * UNDO_ID_LEN + 1];
	FILE *f;
	int fd, ret = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		goto fail;
	}
	fprintf(f, "# dmmerge state of %s: the last stream applied to it.\n"
		"source-id %s\nepoch %" PRIu64 "\nblock-size %" PRIu64
		"\ndevice-size %" PRIu64 "\napplied %lld\n", target,
		st->source_id, st->epoch, st->block_size, st->device_size,
		(long long)time(NULL));
	if (st->nfp)
		fprintf(f, "# what the target held then (offset, length, "
			"CRC-32): dmmerge refuses a stream if it changed\n");
	for (size_t i = 0; i < st->nfp; i++)
		fprintf(f, "fingerprint %" PRIu64 " %" PRIu64 " %08" PRIx32
			"\n", st->fp[i].off, st->fp[i].len, st->fp[i].crc);
	if (!id_zero(st->last_undo))
		fprintf(f, "# the undo file of the apply that reached this "
			"epoch\nundo-id %s\n", id_format(st->last_undo, id));
	if (st->mixed) {
		fprintf(f, "# an apply or rollback between this epoch and "
			"epoch %" PRIu64 " did not finish: the target mixes "
			"both\nunfinished %" PRIu64 "\n", st->mixed_new,
			st->mixed_new);
		if (!id_zero(st->mixed_undo))
			fprintf(f, "unfinished-undo %s %s\n",
				id_format(st->mixed_undo, id), st->mixed_path);
	}
	if (fflush(f) || fsync(fd)) {
		fclose(f);
		goto fail;
	}
	if (fclose(f) || rename(tmp, path))
		goto fail;
	sync_dir_of(path);
	return 0;
fail:
	ret = -errno;
	a_err(m, "cannot write state file %s: %s (the target is complete and "
	       "synced; the state file still names the previous epoch, so "
	       "the next stream needs --force)", path, strerror(errno));
	unlink(tmp);
	return ret;
}

/* May this stream be applied on top of what the state file says? */
static int check_state(struct track_apply *m)
{
	const struct track_stream_info *in = &m->info;
	const struct state *st = &m->st;
	const char *tname = m->target ? m->target : "the target";
	const char *why = NULL;
	char buf[700];
	int ret;

	if (!m->state_path)
		return 0;
	if (!st->present) {
		if (in->flags & TRACK_STREAM_FULL)
			return 0;
		snprintf(buf, sizeof(buf), "state file %s does not exist, so "
			 "the epoch %s holds is unknown: seed it with a full "
			 "stream (dmextract --all), or use --force if you know "
			 "it holds epoch %" PRIu64 " of %s", m->state_path,
			 tname, in->base_epoch, in->source_id);
		why = buf;
	} else {
		ret = track_stream_check_epoch(in, st->source_id, st->epoch);
		if (!ret && !(in->flags & TRACK_STREAM_FULL) &&
		    (st->block_size != in->block_size ||
		     st->device_size != in->device_size))
			ret = -EMEDIUMTYPE;
		switch (ret) {
		case 0:
			return 0;
		case -EXDEV:
			snprintf(buf, sizeof(buf), "the stream comes from "
				 "\"%s\", but %s was last updated from \"%s\" "
				 "(state file %s): wrong target?",
				 in->source_id, tname, st->source_id,
				 m->state_path);
			break;
		case -ENOENT:
			snprintf(buf, sizeof(buf), "the stream has no epochs, "
				 "so nothing says it follows epoch %" PRIu64
				 " of %s", st->epoch, tname);
			break;
		case -ERANGE:
			snprintf(buf, sizeof(buf), "the stream holds the "
				 "changes after epoch %" PRIu64 ", but %s has "
				 "epoch %" PRIu64 ": the changes in between "
				 "would be missing. Apply the missing stream "
				 "first, or seed again (dmextract --all)",
				 in->base_epoch, tname, st->epoch);
			break;
		case -ESTALE:
			snprintf(buf, sizeof(buf), "the stream (epochs %"
				 PRIu64 " to %" PRIu64 ") is not newer than "
				 "epoch %" PRIu64 " that %s has: applying it "
				 "would roll blocks back (was it applied "
				 "already?)", in->base_epoch, in->new_epoch,
				 st->epoch, tname);
			break;
		default:
			snprintf(buf, sizeof(buf), "the stream has %" PRIu32
				 "-byte blocks and %" PRIu64 " bytes, the "
				 "state file %s says %" PRIu64 " and %" PRIu64
				 " (was the tracking set up again? seed with "
				 "dmextract --all)", in->block_size,
				 in->device_size, m->state_path,
				 st->block_size, st->device_size);
		}
		why = buf;
	}
	if (m->force) {
		a_err(m, "warning: %s; applying it anyway (--force)", why);
		return 0;
	}
	a_err(m, "refusing the stream: %s%s", why, st->present ?
	       " (--force applies it anyway)" : "");
	return -EPERM;
}

/* --- the target ---------------------------------------------------------- */

static int open_target(struct track_apply *m, bool may_create)
{
	int flags = m->verify ? O_RDONLY : O_RDWR;
	struct stat st;
	int ret;

	if (stat(m->target, &st) == 0 && S_ISBLK(st.st_mode) && !m->verify)
		flags |= O_EXCL;	/* not while mounted */
	m->tfd = open(m->target, flags | O_CLOEXEC);
	if (m->tfd < 0 && errno == ENOENT && may_create && !m->verify) {
		m->tfd = open(m->target, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
			      0600);
		m->created = m->tfd >= 0;
	}
	if (m->tfd < 0) {
		if (errno == EBUSY)
			a_err(m, "%s is in use (mounted?); unmount it first",
			       m->target);
		else if (errno == ENOENT)
			a_err(m, "%s does not exist (only a full stream, from "
			       "dmextract --all, creates a new file)",
			       m->target);
		else
			a_err(m, "cannot open %s: %s", m->target,
			       strerror(errno));
		return -errno;
	}
	if (!m->verify && flock(m->tfd, LOCK_EX | LOCK_NB)) {
		a_err(m, "%s is being updated by another dmmerge; wait for it",
		       m->target);
		return -EBUSY;
	}
	if (fstat(m->tfd, &st))
		return -errno;
	m->tregular = S_ISREG(st.st_mode);
	ret = trk_fd_size(m->tfd, &m->tsize);
	if (ret) {
		a_err(m, "%s: %s", m->target, ret == -ENOTBLK ?
		       "not a block device or regular file" : strerror(-ret));
		return ret;
	}
	return 0;
}

/* The header against the target: before anything is written. */
static int check_target(struct track_apply *m)
{
	const struct track_stream_info *in = &m->info;
	char a[32], b[32];

	if (m->tregular && m->tsize == 0 && (in->flags & TRACK_STREAM_FULL) &&
	    !m->verify) {
		/* Sized only when the first record is applied: until then
		 * the file stays as it was, whatever fails. */
		m->resize = true;
		m->tsize = in->device_size;
		return 0;
	}
	if (m->tsize != in->device_size) {
		a_err(m, "%s is %" PRIu64 " bytes (%s), the stream is for a "
		       "device of %" PRIu64 " bytes (%s): wrong target? "
		       "nothing was written", m->target, m->tsize,
		       trk_human(m->tsize, a, sizeof(a)), in->device_size,
		       trk_human(in->device_size, b, sizeof(b)));
		return -EMEDIUMTYPE;
	}
	return 0;
}

static int size_target(struct track_apply *m)
{
	if (!m->resize || m->resized)
		return 0;
	if (ftruncate(m->tfd, m->tsize)) {
		int ret = -errno;

		a_err(m, "cannot size %s to %" PRIu64 " bytes: %s", m->target,
		       m->tsize, strerror(errno));
		return ret;
	}
	m->resized = true;
	return 0;
}

static int zero_range(struct track_apply *m, uint64_t off, uint64_t len)
{
	uint64_t n;
	int mode, ret;

	mode = m->tregular ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE :
			     FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
	if (!fallocate(m->tfd, mode, off, len))
		return 0;
	if (errno != EOPNOTSUPP && errno != EINVAL && errno != ENOSYS)
		return -errno;
	memset(m->chunk, 0, m->chunk_len);
	while (len) {
		n = len < m->chunk_len ? len : m->chunk_len;
		ret = trk_pwrite_all(m->tfd, m->chunk, n, off);
		if (ret)
			return ret;
		off += n;
		len -= n;
	}
	return 0;
}

/*
 * Before the first write to the target: the state file says the target is
 * about to mix two epochs, and which undo file (if any) can undo that. An
 * apply from epoch E to N leaves E mixed with N; a rollback of the apply
 * from B to N leaves the same mix (some blocks back at B), so it moves
 * the state to B first. Either way the fingerprint goes: this run's
 * writes are not someone else's (a failed run refreshes it).
 */
static int mark_unfinished(struct track_apply *m)
{
	const uint8_t *undo = m->rollback ? m->info.undo_id : m->undo_id;
	const char *path = m->rollback ? m->rollback : m->undo_path;
	struct state *st = &m->st;
	size_t nfp = st->nfp, i;
	int ret;

	m->marked = true;
	if (!m->state_path || !st->present)
		return 0;
	if (m->rollback) {
		if (!m->info.new_epoch) {
			/* no epochs: rollback_state() says it is removed */
			if (unlink(m->state_path) && errno != ENOENT)
				return -errno;
			return 0;
		}
		st->epoch = m->info.base_epoch;
		memset(st->last_undo, 0, UNDO_ID_LEN);
	}
	/*
	 * A stream applied on top of an unfinished run keeps the mix; its
	 * own undo file (refused there, unless forced) would not undo the
	 * earlier run's writes, and without one nothing undoes them.
	 */
	if (st->mixed && !m->rollback)
		memset(st->mixed_undo, 0, UNDO_ID_LEN);
	else
		memcpy(st->mixed_undo, undo, UNDO_ID_LEN);
	if (!st->mixed || m->rollback) {
		st->mixed_path[0] = 0;
		if (path && !id_zero(st->mixed_undo) &&
		    !realpath(path, st->mixed_path))
			snprintf(st->mixed_path, sizeof(st->mixed_path), "%s",
				 path);
		for (i = 0; st->mixed_path[i]; i++)
			if (st->mixed_path[i] == '\n')
				st->mixed_path[i] = '?';
	}
	st->mixed = true;
	st->mixed_new = m->info.new_epoch;
	st->nfp = 0;
	ret = state_save(m, m->state_path, st, m->target);
	st->nfp = nfp;
	return ret;
}

static int write_run(struct track_apply *m, uint32_t type, uint64_t first,
		     size_t length, const void *data)
{
	uint64_t off = first * m->info.block_size;
	int ret;

	if (!m->marked) {
		ret = mark_unfinished(m);
		if (ret)
			return ret;
	}

	/* The reader checked this; a target that shrank under us is the
	 * only way it could fail. Never write outside the target. */
	if (off > m->tsize || length > m->tsize - off) {
		a_err(m, "internal error: a write at byte %" PRIu64 " of %zu "
		       "bytes would leave %s (%" PRIu64 " bytes)", off,
		       length, m->target, m->tsize);
		return -EFAULT;
	}
	if (type == TRACK_STREAM_DATA)
		ret = trk_pwrite_all(m->tfd, data, length, off);
	else
		ret = zero_range(m, off, length);
	if (ret) {
		a_err(m, "writing %s at byte %" PRIu64 ": %s", m->target, off,
		       strerror(-ret));
		return ret;
	}
	if (!m->written)
		m->first_block = first;
	m->written++;
	m->ext_bytes += length;
	if (m->next && m->ext[m->next - 1].off + m->ext[m->next - 1].len ==
	    off && m->ext[m->next - 1].len + length <= CHUNK) {
		m->ext[m->next - 1].len += length;
	} else {
		if (m->next == m->ext_cap) {
			size_t cap = m->ext_cap ? m->ext_cap * 2 : 256;
			struct fp *e = realloc(m->ext, cap * sizeof(*e));

			if (!e)
				return -ENOMEM;
			m->ext = e;
			m->ext_cap = cap;
		}
		m->ext[m->next].off = off;
		m->ext[m->next++].len = length;
	}
	m->last_block = first + (length - 1) / m->info.block_size;
	return 0;
}

/* --- the replica fingerprint -------------------------------------------- */

static int fp_crc(struct track_apply *m, uint64_t off, uint64_t len, uint32_t *crc)
{
	uint64_t n;
	uLong c = crc32(0, Z_NULL, 0);
	int ret;

	while (len) {
		n = len < m->chunk_len ? len : m->chunk_len;
		ret = trk_pread_all(m->tfd, m->chunk, n, off);
		if (ret)
			return ret;
		c = crc32(c, m->chunk, n);
		off += n;
		len -= n;
	}
	*crc = c;
	return 0;
}

/* After a complete apply: what the target holds now, where it is cheap. */
static int fp_build(struct track_apply *m, struct state *st)
{
	size_t k = 1, i, n = 0;
	int ret;

	if (m->next > FP_MAX)
		k = (m->next + FP_MAX - 1) / FP_MAX;
	if (m->ext_bytes / FP_BYTES + 1 > k)
		k = m->ext_bytes / FP_BYTES + 1;
	st->fp = calloc(1 + (m->next + k - 1) / k, sizeof(*st->fp));
	if (!st->fp)
		return -ENOMEM;
	st->fp[n].off = 0;
	st->fp[n++].len = m->tsize < FP_HEAD ? m->tsize : FP_HEAD;
	for (i = 0; i < m->next; i += k) {
		if (m->ext[i].off + m->ext[i].len <= FP_HEAD)
			continue;	/* in the head already */
		st->fp[n++] = m->ext[i];
	}
	for (i = 0; i < n; i++) {
		ret = fp_crc(m, st->fp[i].off, st->fp[i].len, &st->fp[i].crc);
		if (ret) {
			a_err(m, "reading back %s at byte %" PRIu64 ": %s",
			       m->target, st->fp[i].off, strerror(-ret));
			return ret;
		}
	}
	st->nfp = n;
	return 0;
}

/*
 * dmmerge itself changed the target but the state stays (a failed apply, a
 * rollback): fingerprint the same ranges again, so the next run does not
 * take its own writes for someone else's.
 */
static int fp_refresh(struct track_apply *m)
{
	size_t i;
	int ret;

	for (i = 0; i < m->st.nfp; i++) {
		struct fp *p = &m->st.fp[i];

		if (p->off > m->tsize || p->len > m->tsize - p->off)
			continue;
		ret = fp_crc(m, p->off, p->len, &p->crc);
		if (ret)
			return ret;
	}
	return state_save(m, m->state_path, &m->st, m->target);
}

/*
 * Before an incremental apply: does the target still hold what the last
 * apply left? If it was changed behind dmmerge (a mount that replayed a
 * journal, fsck, a stray write), an incremental stream would not repair
 * the blocks the source did not change again, and the state file would
 * call the replica current.
 */
static int fp_check(struct track_apply *m)
{
	const struct state *st = &m->st;
	uint32_t bs = m->info.block_size;
	char path[4096], a[32];
	uint64_t bad = 0;
	FILE *f = NULL;
	uint32_t crc;
	size_t i;
	int ret;

	if (!st->present || !st->nfp || (m->info.flags & TRACK_STREAM_FULL))
		return 0;
	snprintf(path, sizeof(path), "%s.changed", m->state_path);
	for (i = 0; i < st->nfp; i++) {
		const struct fp *p = &st->fp[i];

		if (p->off > m->tsize || p->len > m->tsize - p->off)
			crc = ~p->crc;
		else if ((ret = fp_crc(m, p->off, p->len, &crc)))
			return ret;
		if (crc == p->crc)
			continue;
		if (!f && !m->verify)
			f = fopen(path, "we");
		if (f)
			fprintf(f, "%" PRIu64 "-%" PRIu64 "\n", p->off / bs,
				(p->off + p->len - 1) / bs);
		if (!bad)
			a_err(m, "%s changed at bytes %" PRIu64 " to %" PRIu64
			       " (blocks %" PRIu64 "-%" PRIu64 ") since "
			       "dmmerge last wrote it", m->target, p->off,
			       p->off + p->len - 1, p->off / bs,
			       (p->off + p->len - 1) / bs);
		bad += p->len;
	}
	if (f)
		fclose(f);
	if (!bad)
		return 0;
	if (m->force) {
		a_err(m, "warning: %s was modified outside dmmerge (%s in the "
		       "ranges checked, listed in %s); applying anyway "
		       "(--force): the replica may differ from the source "
		       "there until they are sent again", m->target,
		       trk_human(bad, a, sizeof(a)), path);
		return 0;
	}
	a_err(m, "refusing the stream: %s was modified outside dmmerge since "
	       "epoch %" PRIu64 " (%s differ in the ranges the state file "
	       "%s fingerprints; was it mounted? even a read-only mount "
	       "replays the journal). An incremental stream would not repair "
	       "it. Seed it again (dmextract --all), or send the blocks "
	       "listed in %s again (dmextract --dirty %s --device SOURCE) and "
	       "then use --force. See \"A replica changed behind the state "
	       "file\" in dmmerge(1). Nothing was written", m->target,
	       st->epoch, trk_human(bad, a, sizeof(a)), m->state_path, path,
	       path);
	return -EUCLEAN;
}

/* --- --undo: save old contents before a batch is written ---------------- */

/*
 * The undo file must not be the target, under any name: opening it with
 * O_TRUNC would destroy the target before a single check ran.
 */
static int undo_path_check(struct track_apply *m)
{
	struct stat ts, us;

	if (stat(m->undo_path, &us)) {
		if (errno == ENOENT)
			return 0;
		a_err(m, "undo file %s: %s; nothing was written", m->undo_path,
		       strerror(errno));
		return -errno;
	}
	if (fstat(m->tfd, &ts))
		return -errno;
	if ((us.st_dev == ts.st_dev && us.st_ino == ts.st_ino) ||
	    (S_ISBLK(us.st_mode) && S_ISBLK(ts.st_mode) &&
	     us.st_rdev == ts.st_rdev)) {
		a_err(m, "undo file %s is the target %s itself; give --undo a "
		       "file elsewhere. Nothing was written", m->undo_path,
		       m->target);
		return -EINVAL;
	}
	if (!S_ISREG(us.st_mode)) {
		a_err(m, "undo file %s is not a regular file; give --undo a "
		       "new file. Nothing was written", m->undo_path);
		return -EINVAL;
	}
	return 0;
}

/* Does the target hold, in every block of undo record REC, its data? */
static int undo_rec_matches(struct track_apply *m, const struct track_stream_record
			    *rec, uint32_t bs)
{
	uint64_t off = rec->first * bs, done = 0, n;
	int ret;

	if (off > m->tsize || rec->length > m->tsize - off)
		return 0;
	while (done < rec->length) {
		n = rec->length - done;
		if (n > m->chunk_len)
			n = m->chunk_len;
		ret = trk_pread_all(m->tfd, m->chunk, n, off + done);
		if (ret)
			return ret;
		if (rec->type == TRACK_STREAM_DATA ?
		    memcmp(m->chunk, (const unsigned char *)rec->data + done,
			   n) :
		    (m->chunk[0] || memcmp(m->chunk, m->chunk + 1, n - 1)))
			return 0;	/* zero runs: all zero */
		done += n;
	}
	return 1;
}

static ssize_t fd_read(void *arg, void *buf, size_t len)
{
	ssize_t n;

	do {
		n = read(*(int *)arg, buf, len);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/*
 * May the file at the undo path be replaced? Only if it holds nothing
 * that could still be needed: it is empty; or it is an undo file whose
 * apply completed (it has its end record); or the target already holds
 * every block it saved (it was rolled back, or nothing changed). An undo
 * file of an apply that failed is the only copy of the original contents
 * of the blocks that apply wrote: overwriting it with the old contents of
 * a rerun would save the mixed state instead.
 */
static int undo_may_replace(struct track_apply *m)
{
	struct track_stream_reader *r = NULL;
	struct track_stream_record rec;
	struct track_stream_info ui;
	struct stat us;
	int fd, ret, same = 1;
	const char *why;

	fd = open(m->undo_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &us) || us.st_size == 0) {
		close(fd);
		return 0;
	}
	ret = track_stream_reader_new(fd_read, &fd, &r);
	if (!ret)
		ret = track_stream_read_header(r, &ui);
	if (ret || !(ui.flags & TRACK_STREAM_UNDO)) {
		why = "is not an undo file (written by dmmerge --undo)";
		goto refuse;
	}
	if (ui.device_size != m->info.device_size ||
	    ui.block_size != m->info.block_size ||
	    strcmp(ui.source_id, m->info.source_id)) {
		/* complete or not, it belongs to another replica */
		why = "is the undo file of another target or source";
		goto refuse;
	}
	while ((ret = track_stream_read_record(r, &rec)) == 1) {
		if (same == 1)
			same = undo_rec_matches(m, &rec, ui.block_size);
		if (same < 0) {
			ret = same;
			break;
		}
	}
	if (ret == 0 || same == 1) {
		/* complete: its apply succeeded; or nothing to lose */
		track_stream_reader_free(r);
		close(fd);
		return 0;
	}
	why = "holds the old contents of blocks that an earlier dmmerge "
	      "--undo changed before it failed (or was killed)";
refuse:
	track_stream_reader_free(r);
	close(fd);
	if (!strncmp(why, "holds", 5))
		a_err(m, "undo file %s %s: it is the only copy of them. Roll "
		       "back first (dmmerge --rollback %s%s%s %s), then run "
		       "the sync again; or give --undo another file. Nothing "
		       "was written", m->undo_path, why, m->undo_path,
		       m->state_path ? " --state " : "",
		       m->state_path ? m->state_path : "", m->target);
	else
		a_err(m, "%s %s, and --undo would overwrite it; give --undo "
		       "another file (or remove it if you are sure). Nothing "
		       "was written", m->undo_path, why);
	return -EEXIST;
}

static int undo_open(struct track_apply *m)
{
	struct track_stream_info ui = m->info;
	int ret;

	ui.flags = TRACK_STREAM_UNDO;
	/* base: what the target had (if known); new: what it will have */
	ui.base_epoch = m->st.present ? m->st.epoch : 0;
	ui.new_epoch = m->info.new_epoch;
	if (ui.base_epoch >= ui.new_epoch)
		ui.base_epoch = ui.new_epoch = 0;
	ui.created = time(NULL);
	/* its name in the state file: which undo file undoes what */
	if (getrandom(m->undo_id, UNDO_ID_LEN, 0) != UNDO_ID_LEN) {
		a_err(m, "no random bytes for the undo file's id: %s; nothing "
		       "was written", strerror(errno));
		return -EAGAIN;
	}
	memcpy(ui.undo_id, m->undo_id, UNDO_ID_LEN);
	ret = undo_path_check(m);
	if (!ret)
		ret = undo_may_replace(m);
	if (ret)
		return ret;
	m->ufd = open(m->undo_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		      0600);
	if (m->ufd < 0) {
		a_err(m, "cannot create undo file %s: %s; nothing was written",
		       m->undo_path, strerror(errno));
		return -errno;
	}
	ret = track_stream_writer_open(m->ufd, &ui, &m->uw);
	if (!ret)
		ret = sync_dir_of(m->undo_path);	/* before the target */
	if (ret) {
		a_err(m, "undo file %s: %s; nothing was written", m->undo_path,
		       strerror(-ret));
		return ret;
	}
	return 0;
}

static int undo_save(struct track_apply *m, const struct brec *b)
{
	uint32_t bs = m->info.block_size;
	uint64_t first = b->first, left = b->length, n;
	int ret;

	while (left) {
		n = left < m->chunk_len ? left : m->chunk_len;
		ret = trk_pread_all(m->tfd, m->chunk, n, first * bs);
		if (ret) {
			a_err(m, "reading old contents of %s at byte %" PRIu64
			       ": %s", m->target, first * bs, strerror(-ret));
			return ret;
		}
		ret = track_stream_write_data(m->uw, first, (n + bs - 1) / bs,
					      m->chunk);
		if (ret) {
			a_err(m, "writing undo file %s: %s", m->undo_path,
			       strerror(-ret));
			return ret;
		}
		first += (n + bs - 1) / bs;
		left -= n;
	}
	return 0;
}

static int undo_sync(struct track_apply *m)
{
	int ret = track_stream_writer_flush(m->uw);

	if (!ret && fdatasync(m->ufd))
		ret = -errno;
	if (ret)
		a_err(m, "writing undo file %s: %s", m->undo_path,
		       strerror(-ret));
	return ret;
}

static int flush_batch(struct track_apply *m)
{
	size_t i;
	int ret;

	if (!m->nbatch)
		return 0;
	for (i = 0; i < m->nbatch; i++) {
		ret = undo_save(m, &m->batch[i]);
		if (ret)
			return ret;
	}
	ret = undo_sync(m);
	if (ret)
		return ret;
	m->undo_used = true;
	for (i = 0; i < m->nbatch; i++) {
		ret = write_run(m, m->batch[i].type, m->batch[i].first,
				m->batch[i].length, m->bbuf + m->batch[i].off);
		if (ret)
			return ret;
	}
	m->nbatch = 0;
	m->bused = 0;
	m->bzero = 0;
	return 0;
}

static int apply_record(struct track_apply *m, const struct track_stream_record *rec)
{
	struct brec *b;
	int ret;

	if (m->verify)
		return 0;
	ret = size_target(m);
	if (ret)
		return ret;
	if (!m->uw)
		return write_run(m, rec->type, rec->first, rec->length,
				 rec->data);
	if (m->nbatch == m->batch_cap) {
		size_t cap = m->batch_cap ? m->batch_cap * 2 : 64;

		b = realloc(m->batch, cap * sizeof(*b));
		if (!b)
			return -ENOMEM;
		m->batch = b;
		m->batch_cap = cap;
	}
	if (rec->type == TRACK_STREAM_DATA &&
	    m->bused + rec->length > BATCH_BYTES) {
		ret = flush_batch(m);
		if (ret)
			return ret;
	}
	b = &m->batch[m->nbatch++];
	b->type = rec->type;
	b->first = rec->first;
	b->count = rec->count;
	b->length = rec->length;
	b->off = m->bused;
	if (rec->type == TRACK_STREAM_DATA) {
		memcpy(m->bbuf + m->bused, rec->data, rec->length);
		m->bused += rec->length;
	} else {
		m->bzero += rec->length;
	}
	if (m->bused >= BATCH_BYTES / 2 || m->bzero >= 4 * BATCH_BYTES)
		return flush_batch(m);
	return 0;
}

/* --- the whole run ------------------------------------------------------- */

static void report_partial(struct track_apply *m)
{
	if (m->verify)
		return;
	if (!m->written) {
		a_err(m, "%s was not changed", m->target);
		return;
	}
	if (!m->uw) {
		a_err(m, "%s: %" PRIu64 " records (blocks %" PRIu64 " to %"
		       PRIu64 ") were written before this, the rest of the "
		       "stream was not: the target now mixes old and new "
		       "blocks. Run the sync again (the sender keeps these "
		       "blocks dirty when dmmerge fails)", m->target,
		       m->written, m->first_block, m->last_block);
		return;
	}
	a_err(m, "%s: %" PRIu64 " records (blocks %" PRIu64 " to %" PRIu64
	       ") were written before this, the rest of the stream was not: "
	       "the target now mixes old and new blocks. Either run the sync "
	       "again with another --undo file, or restore the old contents "
	       "with: dmmerge --rollback %s%s%s %s (%s is kept until then: "
	       "an --undo apply refuses to overwrite it)", m->target,
	       m->written, m->first_block, m->last_block, m->undo_path,
	       m->state_path ? " --state " : "",
	       m->state_path ? m->state_path : "", m->target, m->undo_path);
}

static int read_stream_header(struct track_apply *m)
{
	int ret;

	ret = track_stream_reader_new(m->in_fn, m->in_arg, &m->r);
	if (ret) {
		a_err(m, "%s", strerror(-ret));
		return ret;
	}
	ret = track_stream_read_header(m->r, &m->info);
	if (ret) {
		a_err(m, "%s: %s", m->input, track_stream_reader_error(m->r));
		return ret;
	}
	m->chunk_len = m->info.block_size > CHUNK ? m->info.block_size : CHUNK;
	m->chunk = malloc(m->chunk_len);
	if (!m->chunk) {
		a_err(m, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/*
 * The state says an earlier apply or rollback did not finish, so the
 * target mixes epoch E and N. A stream from E (or a full one) repairs
 * that: it rewrites every block changed since E. With --undo it would
 * too, but its undo file would save the mix, and rolling it back would
 * bring the mix back under a state that names E: refused unless forced.
 */
static int check_unfinished(struct track_apply *m)
{
	const struct state *st = &m->st;
	char how[4200];

	if (!st->present || !st->mixed || !m->undo_path || m->verify)
		return 0;
	if (!id_zero(st->mixed_undo))
		snprintf(how, sizeof(how), "roll it back first (dmmerge "
			 "--rollback %s --state %s %s), then run the sync "
			 "again; or", st->mixed_path[0] ? st->mixed_path :
			 "UNDO", m->state_path, m->target);
	else
		snprintf(how, sizeof(how), "no undo file undoes it, so");
	if (m->force) {
		a_err(m, "warning: an apply or rollback between epochs %" PRIu64
		       " and %" PRIu64 " did not finish on %s; applying with "
		       "--undo anyway (--force): rolling back %s brings that "
		       "mix back", st->epoch, st->mixed_new, m->target,
		       m->undo_path);
		return 0;
	}
	a_err(m, "refusing the stream: an apply or rollback between epochs "
	       "%" PRIu64 " and %" PRIu64 " did not finish on %s (state file "
	       "%s), which mixes both; %s run this sync without --undo, "
	       "which repairs the mix but keeps no way back. An undo file "
	       "written now would save the mix, not epoch %" PRIu64
	       ". Nothing was written", st->epoch, st->mixed_new, m->target,
	       m->state_path, how, st->epoch);
	return -EBUSY;
}

static int merge(struct track_apply *m)
{
	struct track_stream_record rec;
	int ret;

	ret = read_stream_header(m);
	if (ret)
		goto fail;
	if (m->info.flags & TRACK_STREAM_UNDO) {
		a_err(m, "stdin is an undo file; restore it with dmmerge "
		       "--rollback FILE TARGET");
		ret = -EINVAL;
		goto fail;
	}
	if (m->target) {
		ret = open_target(m, m->info.flags & TRACK_STREAM_FULL);
		if (!ret)
			ret = check_target(m);
		if (ret)
			goto fail;
	}
	if (m->state_path) {
		ret = state_load(m, m->state_path, &m->st);
		if (!ret)
			ret = check_state(m);
		if (!ret && m->target)
			ret = fp_check(m);
		if (!ret)
			ret = check_unfinished(m);
		if (ret)
			goto fail;
	}
	if (m->undo_path && !m->verify) {
		ret = undo_open(m);
		if (ret)
			goto fail;
		m->bbuf = malloc(BATCH_BYTES);
		if (!m->bbuf) {
			ret = -ENOMEM;
			goto fail;
		}
	}

	while ((ret = track_stream_read_record(m->r, &rec)) == 1) {
		ret = report_progress(m, false);
		if (!ret)
			ret = apply_record(m, &rec);
		if (!ret)
			m->block_bytes += rec.length;
		if (ret)
			goto fail_partial;
	}
	if (ret) {
		a_err(m, "%s: %s", m->input, track_stream_reader_error(m->r));
		goto fail_partial;
	}
	ret = flush_batch(m);
	if (ret)
		goto fail_partial;
	report_progress(m, true);
	if (m->verify)
		return 0;
	if (fsync(m->tfd)) {
		ret = -errno;
		a_err(m, "syncing %s: %s", m->target, strerror(errno));
		goto fail_partial;
	}
	if (m->uw) {
		ret = track_stream_writer_finish(m->uw, NULL);
		if (!ret && fsync(m->ufd))
			ret = -errno;
		if (ret)
			a_err(m, "warning: finishing undo file %s: %s (the "
			       "target is complete and synced)", m->undo_path,
			       strerror(-ret));
	}
	if (m->created)
		sync_dir_of(m->target);
	if (m->state_path) {
		struct state st = { .present = true };

		snprintf(st.source_id, sizeof(st.source_id), "%s",
			 m->info.source_id);
		st.epoch = m->info.new_epoch;
		st.block_size = m->info.block_size;
		st.device_size = m->info.device_size;
		if (m->uw)
			memcpy(st.last_undo, m->undo_id, UNDO_ID_LEN);
		ret = fp_build(m, &st);
		if (!ret)
			ret = state_save(m, m->state_path, &st, m->target);
		free(st.fp);
		if (ret)
			return ret;
	}
	return 0;

fail_partial:
	/*
	 * Whatever was written is in the undo file, synced before it was
	 * written. The undo file is left without its end record: that is how the
	 * next dmmerge --undo knows this apply did not complete, and keeps
	 * the file until it is rolled back. If no batch reached the target,
	 * it is finished empty: nothing to roll back, free for the next run.
	 */
	if (m->uw && !m->undo_used) {
		m->nbatch = 0;
		if (!track_stream_writer_finish(m->uw, NULL))
			fsync(m->ufd);
	}
	report_partial(m);
	if (m->written && m->state_path && m->st.present && m->st.nfp &&
	    fp_refresh(m))
		a_err(m, "warning: could not update the fingerprint in %s: the "
		       "next run may need --force", m->state_path);
fail:
	if (m->created && !m->written)
		unlink(m->target);
	else if (m->resized && !m->written && ftruncate(m->tfd, 0))
		a_err(m, "warning: cannot shrink %s back to 0 bytes: %s",
		       m->target, strerror(errno));
	return ret ? ret : -EIO;
}

/*
 * Does the undo file end with its end record? 1 if so, 0 if it is cut
 * short, or a negative errno (with a message) if it cannot be read.
 */
static int undo_complete(struct track_apply *m)
{
	struct track_stream_reader *r = NULL;
	struct track_stream_record rec;
	struct track_stream_info ui;
	int fd, ret;

	fd = open(m->rollback, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		a_err(m, "cannot open undo file %s: %s", m->rollback,
		       strerror(errno));
		return ret;
	}
	ret = track_stream_reader_new(fd_read, &fd, &r);
	if (!ret)
		ret = track_stream_read_header(r, &ui);
	while (!ret && (ret = track_stream_read_record(r, &rec)) == 1)
		ret = 0;
	if (ret && ret != -ENODATA)
		a_err(m, "%s: %s; nothing was written", m->rollback,
		       r ? track_stream_reader_error(r) : strerror(-ret));
	track_stream_reader_free(r);
	close(fd);
	if (ret == -ENODATA)
		return 0;
	return ret ? ret : 1;
}

/*
 * Does the undo file belong to the state the target is in? It undoes the
 * apply from its base epoch to its new epoch.
 *  - If an apply or rollback did not finish, the target mixes two epochs,
 *    and only that run's undo file (named in the state file) restores
 *    one: any other would leave part of the mix.
 *  - Else the state must be at the undo file's new epoch (its apply
 *    completed); the undo file must then be whole (a cut one would
 *    restore only some blocks), and the one of that apply if the state
 *    names it (another of the same epochs is stale). An older undo file
 *    would write old blocks back under a state that names a newer epoch,
 *    and the next stream would be accepted on a replica that no longer
 *    equals the source.
 *  - Undo files written before undo ids (format 1.0) are also taken at
 *    the base epoch: that dmmerge left no mark when an apply failed.
 */
static int rollback_check_state(struct track_apply *m)
{
	const struct track_stream_info *u = &m->info;
	const struct state *st = &m->st;
	char a[2 * UNDO_ID_LEN + 1], b[2 * UNDO_ID_LEN + 1];
	int ret;

	if (!st->present || !u->new_epoch)
		return 0;	/* unknown epochs: the state is removed */
	if (strcmp(st->source_id, u->source_id)) {
		a_err(m, "refusing the rollback: undo file %s was written for a "
		       "stream from \"%s\", but %s was last updated from "
		       "\"%s\" (state file %s): it is not this replica's undo "
		       "file. Nothing was written", m->rollback, u->source_id,
		       m->target, st->source_id, m->state_path);
		return -EXDEV;
	}
	if (st->mixed) {
		if (!id_zero(u->undo_id) &&
		    !memcmp(u->undo_id, st->mixed_undo, UNDO_ID_LEN))
			return 0;
		if (id_zero(st->mixed_undo))
			a_err(m, "refusing the rollback: an apply between epochs "
			       "%" PRIu64 " and %" PRIu64 " without an undo "
			       "file did not finish on %s (state file %s), so "
			       "it mixes both, and undo file %s cannot restore "
			       "either. Run the sync again: a stream from epoch "
			       "%" PRIu64 " repairs it. Nothing was written",
			       st->epoch, st->mixed_new, m->target,
			       m->state_path, m->rollback, st->epoch);
		else
			a_err(m, "refusing the rollback: an apply or rollback "
			       "between epochs %" PRIu64 " and %" PRIu64 " did "
			       "not finish on %s (state file %s), and only its "
			       "own undo file restores epoch %" PRIu64 ": %s "
			       "(id %s), not %s (id %s). Roll that one back "
			       "first. Nothing was written", st->epoch,
			       st->mixed_new, m->target, m->state_path,
			       st->epoch, st->mixed_path[0] ? st->mixed_path :
			       "?", id_format(st->mixed_undo, a), m->rollback,
			       id_format(u->undo_id, b));
		return -EBUSY;
	}
	if (st->epoch == u->new_epoch) {
		if (!id_zero(st->last_undo) &&
		    memcmp(u->undo_id, st->last_undo, UNDO_ID_LEN)) {
			a_err(m, "refusing the rollback: undo file %s (id %s) "
			       "is not the one of the apply that brought %s to "
			       "epoch %" PRIu64 " (id %s, state file %s): it is "
			       "a stale undo file of the same epochs and would "
			       "restore other blocks. Nothing was written",
			       m->rollback, id_format(u->undo_id, a), m->target,
			       st->epoch, id_format(st->last_undo, b),
			       m->state_path);
			return -ESTALE;
		}
		ret = undo_complete(m);
		if (ret < 0)
			return ret;
		if (!ret) {
			a_err(m, "refusing the rollback: undo file %s ends "
			       "early, but the apply it belongs to finished "
			       "(%s is at epoch %" PRIu64 ", state file %s): "
			       "the file is damaged (a partial copy?) and would "
			       "restore only some of the blocks. Roll back with "
			       "a whole copy of it, or keep the replica at epoch "
			       "%" PRIu64 ". Nothing was written", m->rollback,
			       m->target, st->epoch, m->state_path, st->epoch);
			return -ENODATA;
		}
		return 0;
	}
	if (st->epoch == u->base_epoch && id_zero(u->undo_id))
		return 0;
	if (st->epoch == u->base_epoch) {
		a_err(m, "refusing the rollback: undo file %s undoes epoch %"
		       PRIu64 " to %" PRIu64 ", and %s is at epoch %" PRIu64
		       " with nothing unfinished (state file %s): it was "
		       "rolled back already. Nothing was written", m->rollback,
		       u->base_epoch, u->new_epoch, m->target, st->epoch,
		       m->state_path);
		return -EALREADY;
	}
	a_err(m, "refusing the rollback: undo file %s undoes epoch %" PRIu64
	       " to %" PRIu64 ", but %s is at epoch %" PRIu64 " (state file "
	       "%s): applies after it would be mixed with old blocks. Roll "
	       "back the newer applies first, newest first, with their undo "
	       "files, or seed the replica again (dmextract --all). Nothing "
	       "was written", m->rollback, u->base_epoch, u->new_epoch,
	       m->target, st->epoch, m->state_path);
	return -ESTALE;
}

/* After a rollback: the state is at the undo file's base, and whole. */
static int rollback_state(struct track_apply *m)
{
	struct state *st = &m->st;
	int ret;

	if (!m->state_path || !st->present)
		return 0;
	if (!m->info.new_epoch) {
		/* mark_unfinished() removed it already if anything was written */
		if (unlink(m->state_path) && errno != ENOENT)
			return -errno;
		a_err(m, "state file %s removed: the undo file has no epochs, "
		       "so the target's epoch is unknown; the next stream must "
		       "be full (or --force)", m->state_path);
		return 0;
	}
	st->epoch = m->info.base_epoch;
	st->mixed = false;
	st->mixed_new = 0;
	memset(st->mixed_undo, 0, UNDO_ID_LEN);
	memset(st->last_undo, 0, UNDO_ID_LEN);
	if (!st->epoch) {
		if (unlink(m->state_path))
			return -errno;
		a_err(m, "state file %s removed: the epoch before the undone "
		       "apply is unknown, so the next stream must be full",
		       m->state_path);
		return 0;
	}
	ret = fp_refresh(m);
	if (!ret)
		a_err(m, "state file %s now says epoch %" PRIu64, m->state_path,
		       st->epoch);
	return ret;
}

/* dmmerge --rollback UNDO TARGET */
static int rollback(struct track_apply *m)
{
	struct track_stream_record rec;
	int ret;

	m->input = m->rollback;
	m->in_fn = fd_read;
	m->in_arg = &m->in_fd;
	m->in_fd = open(m->rollback, O_RDONLY | O_CLOEXEC);
	if (m->in_fd < 0) {
		a_err(m, "cannot open undo file %s: %s", m->rollback,
		       strerror(errno));
		return -errno;
	}
	ret = read_stream_header(m);
	if (ret)
		return ret;
	if (!(m->info.flags & TRACK_STREAM_UNDO)) {
		a_err(m, "%s is not an undo file (written by dmmerge --undo)",
		       m->rollback);
		return -EINVAL;
	}
	ret = open_target(m, false);
	if (!ret)
		ret = check_target(m);
	if (ret)
		return ret;
	if (m->state_path) {
		ret = state_load(m, m->state_path, &m->st);
		if (ret)
			return ret;
		ret = rollback_check_state(m);
		if (ret)
			return ret;
	}
	/* the first write marks the state unfinished (mark_unfinished) */
	while ((ret = track_stream_read_record(m->r, &rec)) == 1) {
		ret = write_run(m, rec.type, rec.first, rec.length, rec.data);
		if (ret) {
			a_err(m, "%s is only partly restored; run the rollback "
			       "again once the error is fixed", m->target);
			return ret;
		}
	}
	if (fsync(m->tfd)) {
		a_err(m, "syncing %s: %s", m->target, strerror(errno));
		return -errno;
	}
	if (ret == -ENODATA) {
		/* An apply that was killed leaves the undo file without an
		 * end record; its last batch never reached the target. */
		a_err(m, "note: %s: %s", m->rollback,
		       track_stream_reader_error(m->r));
		a_err(m, "the undo file was cut short by an interrupted dmmerge; "
		       "the %" PRIu64 " records before that point were "
		       "restored, and they cover every block that dmmerge "
		       "wrote", m->written);
	} else if (ret) {
		a_err(m, "%s: %s", m->rollback, track_stream_reader_error(m->r));
		return ret;
	}
	return rollback_state(m);
}

/* --- the API ------------------------------------------------------------- */

TRACK_EXPORT void track_apply_params_init(struct track_apply_params *p)
{
	memset(p, 0, sizeof(*p));
}

TRACK_EXPORT int track_apply_new(const struct track_apply_params *p,
				 struct track_apply **ap)
{
	struct track_apply *m;

	*ap = NULL;
	if (p->reserved0 || !trk_all_zero(p->reserved, sizeof(p->reserved)) ||
	    (p->flags & ~(TRACK_APPLY_FORCE | TRACK_APPLY_VERIFY)) ||
	    (!p->target && !(p->flags & TRACK_APPLY_VERIFY)) ||
	    ((p->flags & TRACK_APPLY_VERIFY) && p->undo_path))
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->tfd = m->ufd = m->in_fd = -1;
	m->target = p->target;
	m->state_path = p->state_path;
	m->undo_path = p->undo_path;
	m->force = p->flags & TRACK_APPLY_FORCE;
	m->verify = p->flags & TRACK_APPLY_VERIFY;
	m->log = p->log;
	m->log_arg = p->log_arg;
	m->progress = p->progress;
	m->progress_arg = p->progress_arg;
	*ap = m;
	return 0;
}

TRACK_EXPORT int track_apply_run(struct track_apply *m,
				 track_stream_read_fn fn, void *arg,
				 const char *name)
{
	if (!fn)
		return -EINVAL;
	if (m->input)
		return -EBUSY;	/* one stream per handle */
	m->input = name ? name : "the stream";
	m->in_fn = fn;
	m->in_arg = arg;
	return merge(m);
}

TRACK_EXPORT int track_apply_rollback(struct track_apply *m,
				      const char *undo_path)
{
	if (!undo_path || m->verify || m->undo_path || !m->target)
		return -EINVAL;
	if (m->input)
		return -EBUSY;
	m->rollback = undo_path;
	return rollback(m);
}

TRACK_EXPORT int track_apply_get_info(const struct track_apply *m,
				      struct track_stream_info *info,
				      struct track_stream_totals *t,
				      uint64_t *runs)
{
	if (!m->r || !m->info.block_size)
		return -ENODATA;
	if (info)
		*info = m->info;
	if (t)
		track_stream_reader_totals(m->r, t);
	if (runs)
		*runs = m->written;
	return 0;
}

TRACK_EXPORT void track_apply_free(struct track_apply *m)
{
	if (!m)
		return;
	track_stream_reader_free(m->r);
	track_stream_writer_free(m->uw);
	if (m->tfd >= 0)
		close(m->tfd);
	if (m->ufd >= 0)
		close(m->ufd);
	if (m->in_fd >= 0)
		close(m->in_fd);
	free(m->batch);
	free(m->bbuf);
	free(m->ext);
	free(m->st.fp);
	free(m->chunk);
	free(m);
}
