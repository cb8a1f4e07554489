// SPDX-License-Identifier: LGPL-2.1-or-later
/* The extraction engine of dmextract and dmsync; see dsync_extract.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsync_extract.h"

#define WIN_BYTES	(4u << 20)	/* largest read */
#define GAP_BYTES	(64u << 10)	/* read through gaps up to this */
#define NWIN		4		/* windows in flight */
#define MAX_PIECES	256

struct piece {
	uint64_t first;
	uint64_t count;
	bool zero;
};

struct win {
	unsigned char *buf;
	uint64_t rstart;	/* blocks read: rstart .. rend - 1 */
	uint64_t rend;
	struct piece p[MAX_PIECES];
	int np;
	uint64_t bytes;		/* bytes of the blocks in the pieces */
};

struct ds_extract {
	struct ds_source *src;
	struct track_stream_writer *w;
	struct ds_progress *prog;
	uint32_t win_bytes;	/* 4 MiB, or one block if larger */
	uint64_t win_blocks;
	uint64_t gap_blocks;

	pthread_t thr;
	bool thr_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct win win[NWIN];
	unsigned int head;	/* windows handed to the writer */
	unsigned int tail;	/* windows the writer is done with */
	bool done;
	int err;
	char msg[512];

	struct win *cur;	/* being filled by the reader */
	uint64_t next_block;
	uint64_t done_bytes;	/* writer side, for progress */

	/* what lseek() said last about the file around the current offset */
	uint64_t hole_lo, hole_hi;
	uint64_t data_lo, data_hi;
};

ssize_t ds_write_cb(void *arg, const void *buf, size_t len)
{
	return ds_write_all((int)(intptr_t)arg, buf, len);
}

int ds_source_open(struct ds_source *s, const char *path, uint32_t bs,
		   char *msg, size_t msglen)
{
	struct stat st;
	int ret;

	memset(s, 0, sizeof(*s));
	s->path = path;
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
	ret = ds_fd_size(s->fd, &s->size);
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

void ds_source_close(struct ds_source *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

__attribute__((format(printf, 3, 4)))
static int x_fail(struct ds_extract *x, int err, const char *fmt, ...)
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

static int x_error(struct ds_extract *x)
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
	struct ds_extract *x = arg;
	struct ds_source *s = x->src;
	struct win *wn;
	struct piece *p;
	int i, ret = 0;

	for (;;) {
		pthread_mutex_lock(&x->lock);
		while (x->head == x->tail && !x->done && !x->err)
			pthread_cond_wait(&x->cond, &x->lock);
		if (x->err || x->head == x->tail) {
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
					p->count, wn->buf +
					(p->first - wn->rstart) * s->bs);
		}
		if (ret) {
			if (ret == -EINTR && ds_stop)
				x_fail(x, ret, "interrupted by signal %d",
				       (int)ds_stop);
			else if (ret == -EPIPE)
				x_fail(x, ret, "writing the stream: the "
				       "receiving side closed it (see its "
				       "messages)");
			else
				x_fail(x, ret, "writing the stream: %s",
				       strerror(-ret));
			break;
		}
		x->done_bytes += wn->bytes;
		if (x->prog)
			ds_progress_update(x->prog, x->done_bytes, false);

		pthread_mutex_lock(&x->lock);
		x->tail++;
		pthread_cond_broadcast(&x->cond);
		pthread_mutex_unlock(&x->lock);
	}
	return NULL;
}

/* --- the reading side (the caller's thread) ------------------------------ */

/* The window being filled; waits for a free one. NULL on error. */
static struct win *cur_window(struct ds_extract *x)
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
	wn->rstart = wn->rend = 0;
	wn->bytes = 0;
	x->cur = wn;
	return wn;
}

static int read_window(struct ds_extract *x, struct win *wn)
{
	struct ds_source *s = x->src;
	uint64_t off = wn->rstart * s->bs;
	uint64_t len = (wn->rend - wn->rstart) * s->bs;
	uint64_t need = (wn->rend * s->bs > s->size ? s->size :
			 wn->rend * s->bs) - off;
	uint64_t got = 0;
	ssize_t n;

	while (got < need) {
		n = pread(s->fd, wn->buf + got, len - got, off + got);
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

/* Hand the current window to the writer, reading its data first. */
static int submit(struct ds_extract *x)
{
	struct win *wn = x->cur;
	int ret;

	if (!wn || !wn->np)
		return 0;
	if (ds_stop)
		return x_fail(x, -EINTR, "interrupted by signal %d",
			      (int)ds_stop);
	if (wn->rend > wn->rstart) {
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

static uint64_t run_bytes(const struct ds_source *s, uint64_t first,
			  uint64_t count)
{
	uint64_t end = (first + count) * s->bs;

	return (end > s->size ? s->size : end) - first * s->bs;
}

static int add_piece(struct ds_extract *x, uint64_t first, uint64_t count,
		     bool zero)
{
	struct win *wn;
	uint64_t take;
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
		if (zero) {
			take = count;
		} else if (wn->rend == wn->rstart) {
			/* the window's first data */
			take = count < x->win_blocks ? count : x->win_blocks;
			wn->rstart = first;
			wn->rend = first + take;
		} else if (first - wn->rend <= x->gap_blocks &&
			   first < wn->rstart + x->win_blocks) {
			take = wn->rstart + x->win_blocks - first;
			if (take > count)
				take = count;
			wn->rend = first + take;
		} else {
			ret = submit(x);
			if (ret)
				return ret;
			continue;
		}
		wn->p[wn->np].first = first;
		wn->p[wn->np].count = take;
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
static int probe(struct ds_extract *x, uint64_t off, bool *hole,
		 uint64_t *end)
{
	struct ds_source *s = x->src;
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

int ds_extract_run(struct ds_extract *x, uint64_t first, uint64_t count)
{
	struct ds_source *s = x->src;
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

int ds_extract_start(struct ds_extract **xp, struct ds_source *src,
		     struct track_stream_writer *w,
		     struct ds_progress *progress)
{
	struct ds_extract *x;
	int i, ret;

	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->src = src;
	x->w = w;
	x->prog = progress;
	x->win_bytes = src->bs > WIN_BYTES ? src->bs : WIN_BYTES;
	x->win_blocks = x->win_bytes / src->bs;
	x->gap_blocks = GAP_BYTES / src->bs;
	pthread_mutex_init(&x->lock, NULL);
	pthread_cond_init(&x->cond, NULL);
	for (i = 0; i < NWIN; i++) {
		if (posix_memalign((void **)&x->win[i].buf, 4096,
				   x->win_bytes)) {
			ds_extract_free(x);
			return -ENOMEM;
		}
	}
	/* The writing thread takes the signals (so that a signal interrupts
	 * a write blocked on a full pipe); this thread blocks them. */
	ret = pthread_create(&x->thr, NULL, writer_main, x);
	if (ret) {
		ds_extract_free(x);
		return -ret;
	}
	x->thr_started = true;
	ds_block_signals(true);
	*xp = x;
	return 0;
}

int ds_extract_finish(struct ds_extract *x, bool ok,
		      struct track_stream_totals *t)
{
	int ret = 0;

	if (ok)
		ret = submit(x);
	if (!ok && !x_error(x))
		x_fail(x, -ECANCELED, "cancelled");
	pthread_mutex_lock(&x->lock);
	x->done = true;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	pthread_join(x->thr, NULL);
	x->thr_started = false;
	ds_block_signals(false);
	ret = x_error(x);
	if (ret)
		return ret;
	if (x->prog)
		ds_progress_update(x->prog, x->done_bytes, true);
	ret = track_stream_writer_finish(x->w, t);
	if (ret == -EINTR && ds_stop)
		return x_fail(x, ret, "interrupted by signal %d",
			      (int)ds_stop);
	if (ret)
		return x_fail(x, ret, "writing the stream: %s",
			      ret == -EPIPE ? "the receiving side closed it "
			      "(see its messages)" : strerror(-ret));
	return 0;
}

const char *ds_extract_error(const struct ds_extract *x)
{
	return x->msg;
}

void ds_extract_free(struct ds_extract *x)
{
	int i;

	if (!x)
		return;
	if (x->thr_started)
		ds_extract_finish(x, false, NULL);
	for (i = 0; i < NWIN; i++)
		free(x->win[i].buf);
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->cond);
	free(x);
}
