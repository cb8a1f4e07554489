// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The extraction engine of dmextract and dmsync (track_extract_*; see
 * <libtrack/dsync.h>): the caller's thread reads windows of blocks, a
 * second thread checksums, compresses and writes them, so disk and
 * network work at the same time.
 *
 * A window is a buffer packed with extents: runs of blocks that are far
 * apart on the disk sit next to each other in memory. All the extents of
 * a window are read at once (Linux AIO on the O_DIRECT descriptor), so a
 * scattered dirty set keeps the disk's queue full instead of waiting for
 * one 4 KiB read after another. Without O_DIRECT (a file system that
 * refuses it), the extents are announced with POSIX_FADV_WILLNEED and
 * read in order: the kernel reads them ahead in the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/aio_abi.h>

#include "internal.h"

#define WIN_BYTES	(4u << 20)	/* largest read */
#define GAP_BYTES	(64u << 10)	/* read through gaps up to this */
#define NWIN		4		/* windows in flight */
#define MAX_PIECES	256
#define MAX_EXTENTS	MAX_PIECES	/* each extent holds a piece */

struct piece {
	uint64_t first;
	uint64_t count;
	uint64_t boff;		/* where its data is in the buffer, in blocks */
	bool zero;
};

/* blocks first .. end - 1 of the source, at block boff of the buffer */
struct extent {
	uint64_t first;
	uint64_t end;
	uint64_t boff;
};

struct win {
	unsigned char *buf;
	struct extent e[MAX_EXTENTS];
	int ne;
	struct piece p[MAX_PIECES];
	int np;
	uint64_t bytes;		/* bytes of the blocks in the pieces */
};

struct x_source {
	int fd;
	char *path;
	uint64_t size;		/* bytes */
	uint32_t bs;
	uint64_t nr_blocks;
	bool regular;		/* a regular file: holes can be found */
	bool direct;		/* opened with O_DIRECT */
};

struct track_extract {
	struct x_source src[1];
	struct track_stream_writer *w;
	track_extract_progress_fn progress;
	void *progress_arg;
	uint32_t win_bytes;	/* 4 MiB, or one block if larger */
	uint64_t win_blocks;
	uint64_t gap_blocks;
	aio_context_t aio;	/* 0: read the extents one by one */
	struct iocb iocb[MAX_EXTENTS];
	struct iocb *iocbp[MAX_EXTENTS];
	struct io_event ev[MAX_EXTENTS];

	pthread_t thr;
	bool thr_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct win win[NWIN];
	unsigned int head;	/* windows handed to the writer */
	unsigned int tail;	/* windows the writer is done with */
	bool done;
	bool finish_stream;	/* the writer ends the stream when done */
	struct track_stream_totals totals;
	int err;
	char msg[512];

	struct win *cur;	/* being filled by the reader */
	uint64_t next_block;
	uint64_t done_bytes;	/* writer side, for progress */

	/* what lseek() said last about the file around the current offset */
	uint64_t hole_lo, hole_hi;
	uint64_t data_lo, data_hi;
};

static int source_open(struct x_source *s, const char *path, uint32_t bs,
		       char *msg, size_t msglen)
{
	struct stat st;
	int ret;

	s->bs = bs;
	s->fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (s->fd >= 0) {
		s->direct = true;
	} else if (errno == EINVAL) {
		s->fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (s->fd < 0) {
		ret = -errno;
		snprintf(msg, msglen, "cannot open %s: %s", path,
			 strerror(errno));
		return ret;
	}
	if (fstat(s->fd, &st) == 0)
		s->regular = S_ISREG(st.st_mode);
	ret = trk_fd_size(s->fd, &s->size);
	if (ret) {
		snprintf(msg, msglen, "%s: %s", path, ret == -ENOTBLK ?
			 "not a block device or regular file" :
			 strerror(-ret));
		goto fail;
	}
	if (!s->size) {
		snprintf(msg, msglen, "%s is empty", path);
		ret = -EINVAL;
		goto fail;
	}
	s->nr_blocks = s->size / bs + !!(s->size % bs);
	return 0;
fail:
	close(s->fd);
	s->fd = -1;
	return ret;
}


__attribute__((format(printf, 3, 4)))
static int x_fail(struct track_extract *x, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&x->lock);
	if (!x->err) {
		x->err = err;
		va_start(ap, fmt);
		vsnprintf(x->msg, sizeof(x->msg), fmt, ap);
		va_end(ap);
	}
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	return err;
}

static int x_error(struct track_extract *x)
{
	int err;

	pthread_mutex_lock(&x->lock);
	err = x->err;
	pthread_mutex_unlock(&x->lock);
	return err;
}

/* --- the writing thread -------------------------------------------------- */

static void *writer_main(void *arg)
{
	struct track_extract *x = arg;
	struct x_source *s = x->src;
	struct win *wn;
	struct piece *p;
	bool fin = false;
	int i, ret = 0;

	for (;;) {
		pthread_mutex_lock(&x->lock);
		while (x->head == x->tail && !x->done && !x->err)
			pthread_cond_wait(&x->cond, &x->lock);
		if (x->err || x->head == x->tail) {
			fin = !x->err && x->finish_stream;
			pthread_mutex_unlock(&x->lock);
			break;
		}
		wn = &x->win[x->tail % NWIN];
		pthread_mutex_unlock(&x->lock);

		for (i = 0; i < wn->np && !ret; i++) {
			p = &wn->p[i];
			if (p->zero)
				ret = track_stream_write_zero(x->w, p->first,
							      p->count);
			else
				ret = track_stream_write_data(x->w, p->first,
					p->count, wn->buf + p->boff * s->bs);
		}
		if (ret) {
			if (ret == -EPIPE)
				x_fail(x, ret, "writing the stream: the "
				       "receiving side closed it (see its "
				       "messages)");
			else
				x_fail(x, ret, "writing the stream: %s",
				       strerror(-ret));
			break;
		}
		pthread_mutex_lock(&x->lock);
		x->done_bytes += wn->bytes;
		x->tail++;
		pthread_cond_broadcast(&x->cond);
		pthread_mutex_unlock(&x->lock);
	}
	if (fin) {
		/* the end record: every write of W is made in this thread */
		ret = track_stream_writer_finish(x->w, &x->totals);
		if (ret)
			x_fail(x, ret, "writing the stream: %s", ret == -EPIPE ?
			       "the receiving side closed it (see its "
			       "messages)" : strerror(-ret));
	}
	return NULL;
}

/* --- the reading side (the caller's thread) ------------------------------ */

/* The window being filled; waits for a free one. NULL on error. */
static struct win *cur_window(struct track_extract *x)
{
	struct win *wn;

	if (x->cur)
		return x->cur;
	pthread_mutex_lock(&x->lock);
	while (x->head - x->tail == NWIN && !x->err)
		pthread_cond_wait(&x->cond, &x->lock);
	if (x->err) {
		pthread_mutex_unlock(&x->lock);
		return NULL;
	}
	wn = &x->win[x->head % NWIN];
	pthread_mutex_unlock(&x->lock);
	wn->np = 0;
	wn->ne = 0;
	wn->bytes = 0;
	x->cur = wn;
	return wn;
}

/* bytes of extent E that lie in the source */
static uint64_t extent_need(const struct x_source *s, const struct extent *e)
{
	uint64_t end = e->end * s->bs;

	return (end > s->size ? s->size : end) - e->first * s->bs;
}

/* Read extent E, from byte GOT of it on, one pread at a time. */
static int read_extent(struct track_extract *x, struct win *wn,
		       const struct extent *e, uint64_t got)
{
	struct x_source *s = x->src;
	uint64_t off = e->first * s->bs;
	uint64_t len = (e->end - e->first) * s->bs;
	uint64_t need = extent_need(s, e);
	unsigned char *buf = wn->buf + e->boff * s->bs;
	ssize_t n;

	while (got < need) {
		n = pread(s->fd, buf + got, len - got, off + got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EINVAL && s->direct) {
			/* O_DIRECT refused (alignment, file system): go on
			 * with buffered reads and drop what we read. */
			int fd = open(s->path, O_RDONLY | O_CLOEXEC);

			if (fd < 0)
				return x_fail(x, -errno, "cannot reopen %s: "
					      "%s", s->path, strerror(errno));
			close(s->fd);
			s->fd = fd;
			s->direct = false;
			posix_fadvise(s->fd, 0, 0, POSIX_FADV_RANDOM);
			continue;
		}
		if (n < 0)
			return x_fail(x, -errno, "reading %s at byte %" PRIu64
				      ": %s", s->path, off + got,
				      strerror(errno));
		if (n == 0)
			return x_fail(x, -EIO, "reading %s at byte %" PRIu64
				      ": it ended early (it was %" PRIu64
				      " bytes when the extraction started)",
				      s->path, off + got, s->size);
		got += n;
	}
	if (!s->direct)
		posix_fadvise(s->fd, off, need, POSIX_FADV_DONTNEED);
	return 0;
}

/*
 * Submit every extent of WN at once and wait for all of them. DONE,
 * zeroed by the caller, gets how many bytes of each extent arrived; what
 * is missing (a short read, an error, an extent never submitted)
 * read_extent() finishes or reports.
 * Returns -errno when AIO refused the first request: it is not usable here.
 */
static int read_extents_aio(struct track_extract *x, struct win *wn,
			    uint64_t *done)
{
	struct x_source *s = x->src;
	long sub = 0, got = 0, n;
	int i;

	for (i = 0; i < wn->ne; i++) {
		struct iocb *cb = &x->iocb[i];
		const struct extent *e = &wn->e[i];

		memset(cb, 0, sizeof(*cb));
		cb->aio_data = i;
		cb->aio_lio_opcode = IOCB_CMD_PREAD;
		cb->aio_fildes = s->fd;
		cb->aio_buf = (uintptr_t)(wn->buf + e->boff * s->bs);
		cb->aio_nbytes = (e->end - e->first) * s->bs;
		cb->aio_offset = e->first * s->bs;
		x->iocbp[i] = cb;
	}
	while (sub < wn->ne) {
		n = syscall(SYS_io_submit, x->aio, wn->ne - sub,
			    x->iocbp + sub);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;	/* the rest is read one by one */
		sub += n;
	}
	if (!sub && wn->ne)
		return -errno;
	while (got < sub) {
		n = syscall(SYS_io_getevents, x->aio, 1, sub - got, x->ev,
			    NULL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return x_fail(x, -errno, "waiting for reads of %s: %s",
				      s->path, strerror(errno));
		for (i = 0; i < n; i++)
			if ((int64_t)x->ev[i].res > 0)
				done[x->ev[i].data] = x->ev[i].res;
		got += n;
	}
	return 0;
}

static int read_window(struct track_extract *x, struct win *wn)
{
	struct x_source *s = x->src;
	uint64_t done[MAX_EXTENTS] = { 0 };
	int i, ret;

	if (x->aio && s->direct && wn->ne > 1) {
		if (read_extents_aio(x, wn, done)) {
			/* refused: read this window and the next ones one
			 * extent at a time (read_extent says what is wrong) */
			syscall(SYS_io_destroy, x->aio);
			x->aio = 0;
		}
		ret = x_error(x);
		if (ret)
			return ret;
	} else if (!s->direct && wn->ne > 1) {
		for (i = 0; i < wn->ne; i++)
			posix_fadvise(s->fd, wn->e[i].first * s->bs,
				      extent_need(s, &wn->e[i]),
				      POSIX_FADV_WILLNEED);
	}
	for (i = 0; i < wn->ne; i++) {
		ret = read_extent(x, wn, &wn->e[i], done[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* Hand the current window to the writer, reading its data first. */
static int submit(struct track_extract *x)
{
	struct win *wn = x->cur;
	uint64_t done;
	int ret;

	if (!wn || !wn->np)
		return 0;
	if (x->progress) {
		pthread_mutex_lock(&x->lock);
		done = x->done_bytes;
		pthread_mutex_unlock(&x->lock);
		ret = x->progress(x->progress_arg, done, 0);
		if (ret)
			return x_fail(x, ret < 0 ? ret : -ECANCELED,
				      "stopped: %s", strerror(ret < 0 ?
				      -ret : ECANCELED));
	}
	if (wn->ne) {
		ret = read_window(x, wn);
		if (ret)
			return ret;
	}
	pthread_mutex_lock(&x->lock);
	x->head++;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	x->cur = NULL;
	return 0;
}

static uint64_t run_bytes(const struct x_source *s, uint64_t first,
			  uint64_t count)
{
	uint64_t end = (first + count) * s->bs;

	return (end > s->size ? s->size : end) - first * s->bs;
}

static int add_piece(struct track_extract *x, uint64_t first, uint64_t count,
		     bool zero)
{
	struct extent *e;
	struct win *wn;
	uint64_t take, used, boff = 0;
	int ret;

	while (count) {
		wn = cur_window(x);
		if (!wn)
			return x_error(x);
		if (wn->np == MAX_PIECES) {
			ret = submit(x);
			if (ret)
				return ret;
			continue;
		}
		e = wn->ne ? &wn->e[wn->ne - 1] : NULL;
		used = e ? e->boff + (e->end - e->first) : 0;
		if (zero) {
			take = count;
		} else if (e && first >= e->end &&
			   first - e->end <= x->gap_blocks &&
			   e->boff + (first - e->first) < x->win_blocks) {
			/* read through the gap: one request, not two */
			boff = e->boff + (first - e->first);
			take = x->win_blocks - boff;
			if (take > count)
				take = count;
			e->end = first + take;
		} else if (used < x->win_blocks && wn->ne < MAX_EXTENTS) {
			/* a new extent, packed after the last */
			take = x->win_blocks - used;
			if (take > count)
				take = count;
			e = &wn->e[wn->ne++];
			e->first = first;
			e->end = first + take;
			e->boff = boff = used;
		} else {
			ret = submit(x);
			if (ret)
				return ret;
			continue;
		}
		wn->p[wn->np].first = first;
		wn->p[wn->np].count = take;
		wn->p[wn->np].boff = boff;
		wn->p[wn->np].zero = zero;
		wn->np++;
		wn->bytes += run_bytes(x->src, first, take);
		first += take;
		count -= take;
	}
	return 0;
}

/* Is byte OFF of the file in a hole? Answers from a cache of the last
 * lseek() results. *END gets where that hole or data region ends. */
static int probe(struct track_extract *x, uint64_t off, bool *hole,
		 uint64_t *end)
{
	struct x_source *s = x->src;
	off_t d, h;

	if (off >= x->hole_lo && off < x->hole_hi) {
		*hole = true;
		*end = x->hole_hi;
		return 0;
	}
	if (off >= x->data_lo && off < x->data_hi) {
		*hole = false;
		*end = x->data_hi;
		return 0;
	}
	d = lseek(s->fd, off, SEEK_DATA);
	if (d < 0 && errno == ENXIO) {
		x->hole_lo = off;
		x->hole_hi = UINT64_MAX;
	} else if (d < 0) {
		/* no SEEK_DATA here: everything is data */
		s->regular = false;
		*hole = false;
		*end = UINT64_MAX;
		return 0;
	} else if ((uint64_t)d > off) {
		x->hole_lo = off;
		x->hole_hi = d;
	} else {
		h = lseek(s->fd, off, SEEK_HOLE);
		if (h < 0)
			return -errno;
		x->data_lo = off;
		x->data_hi = (uint64_t)h > off ? (uint64_t)h : UINT64_MAX;
	}
	return probe(x, off, hole, end);
}

TRACK_EXPORT int track_extract_add(struct track_extract *x, uint64_t first, uint64_t count)
{
	struct x_source *s = x->src;
	uint64_t end, n, b, lim = 0;
	bool hole = false;
	int ret;

	ret = x_error(x);
	if (ret)
		return ret;
	if (!count)
		return 0;
	if (first < x->next_block || first >= s->nr_blocks ||
	    count > s->nr_blocks - first)
		return x_fail(x, -EINVAL, "blocks %" PRIu64 "-%" PRIu64
			      " are out of order or outside %s (%" PRIu64
			      " blocks)", first, first + count - 1, s->path,
			      s->nr_blocks);
	x->next_block = first + count;
	if (!s->regular)
		return add_piece(x, first, count, false);

	b = first;
	end = first + count;
	while (b < end) {
		ret = probe(x, b * s->bs, &hole, &lim);
		if (ret)
			return x_fail(x, ret, "%s: lseek: %s", s->path,
				      strerror(-ret));
		if (!s->regular)
			return add_piece(x, b, end - b, false);
		if (hole) {
			/* blocks wholly inside the hole */
			if (lim >= s->size)
				n = end - b;
			else
				n = (lim - b * s->bs) / s->bs;
			if (n > end - b)
				n = end - b;
			if (n) {
				ret = add_piece(x, b, n, true);
				b += n;
				if (ret)
					return ret;
				continue;
			}
			n = 1;	/* the hole ends inside this block */
		} else {
			n = lim == UINT64_MAX ? end - b :
				(lim + s->bs - 1) / s->bs - b;
			if (n > end - b)
				n = end - b;
			if (!n)
				n = 1;
		}
		ret = add_piece(x, b, n, false);
		if (ret)
			return ret;
		b += n;
	}
	return 0;
}

TRACK_EXPORT int track_extract_new(const char *path, uint32_t block_size,
				   struct track_extract **xp)
{
	struct track_extract *x;
	int i, ret;

	*xp = NULL;
	if (!path || !block_size)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->src->fd = -1;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cond, NULL);
	x->src->path = strdup(path);
	if (!x->src->path) {
		track_extract_free(x);
		return -ENOMEM;
	}
	*xp = x;
	ret = source_open(x->src, path, block_size, x->msg, sizeof(x->msg));
	if (ret) {
		x->err = ret;
		return ret;
	}
	x->win_bytes = block_size > WIN_BYTES ? block_size : WIN_BYTES;
	x->win_blocks = x->win_bytes / block_size;
	x->gap_blocks = GAP_BYTES / block_size;
	if (x->src->direct &&
	    syscall(SYS_io_setup, MAX_EXTENTS, &x->aio) < 0)
		x->aio = 0;	/* no AIO here: one read at a time */
	if (!x->src->direct)
		posix_fadvise(x->src->fd, 0, 0, POSIX_FADV_RANDOM);
	for (i = 0; i < NWIN; i++) {
		if (posix_memalign((void **)&x->win[i].buf, 4096,
				   x->win_bytes)) {
			snprintf(x->msg, sizeof(x->msg), "out of memory");
			x->err = -ENOMEM;
			return -ENOMEM;
		}
	}
	return 0;
}

TRACK_EXPORT uint64_t track_extract_size(const struct track_extract *x)
{
	return x->src->size;
}

TRACK_EXPORT uint64_t
track_extract_block_count(const struct track_extract *x)
{
	return x->src->nr_blocks;
}

TRACK_EXPORT int track_extract_set_progress(struct track_extract *x,
					    track_extract_progress_fn fn,
					    void *arg)
{
	if (x->thr_started)
		return -EBUSY;
	x->progress = fn;
	x->progress_arg = arg;
	return 0;
}

TRACK_EXPORT int track_extract_start(struct track_extract *x,
				     struct track_stream_writer *w)
{
	int ret;

	if (x->err)
		return x->err;
	if (!w)
		return -EINVAL;
	if (x->thr_started || x->w)
		return -EBUSY;
	x->w = w;
	ret = pthread_create(&x->thr, NULL, writer_main, x);
	if (ret) {
		x->w = NULL;
		return -ret;
	}
	x->thr_started = true;
	return 0;
}

static int x_stop(struct track_extract *x, bool ok)
{
	int ret = 0;

	if (!x->thr_started)
		return x->err ? x->err : -EINVAL;
	if (ok)
		ret = submit(x);
	if (!ok && !x_error(x))
		x_fail(x, -ECANCELED, "cancelled");
	pthread_mutex_lock(&x->lock);
	x->finish_stream = ok && !ret;
	x->done = true;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	pthread_join(x->thr, NULL);
	x->thr_started = false;
	return x_error(x);
}

TRACK_EXPORT int track_extract_finish(struct track_extract *x,
				      struct track_stream_totals *t)
{
	int ret;

	ret = x_stop(x, true);
	if (ret)
		return ret;
	if (x->progress)
		x->progress(x->progress_arg, x->done_bytes, 1);
	if (t)
		*t = x->totals;
	return 0;
}

TRACK_EXPORT int track_extract_abort(struct track_extract *x)
{
	return x_stop(x, false);
}

TRACK_EXPORT const char *track_extract_error(const struct track_extract *x)
{
	return x->msg;
}

TRACK_EXPORT void track_extract_free(struct track_extract *x)
{
	int i;

	if (!x)
		return;
	if (x->thr_started)
		x_stop(x, false);
	if (x->aio)
		syscall(SYS_io_destroy, x->aio);
	if (x->src->fd >= 0)
		close(x->src->fd);
	free(x->src->path);
	for (i = 0; i < NWIN; i++)
		free(x->win[i].buf);
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->cond);
	free(x);
}
