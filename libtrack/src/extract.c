// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The extraction engine of dmextract and dmsync (track_extract_*; see
 * <libtrack/dsync.h>): the caller's thread reads windows of blocks, a
 * second thread checksums, compresses and writes them, so disk and
 * network work at the same time.
 *
 * A window is a buffer packed with extents: runs of blocks that are far
 * apart on the disk sit next to each other in memory. All the extents of
 * a window are read at once (an io_uring on the O_DIRECT descriptor), so a
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <liburing.h>

#include "internal.h"

#define WIN_BYTES	(4u << 20)	/* largest read */
/*
 * Read through a gap between two runs up to this, in one request. On the
 * virtio disk the benchmarks run on, a 4 KiB random read at queue depth
 * 256 costs as much as about 12 KiB read in sequence: a larger gap makes
 * the extraction read more than it saves (at 10 % random dirty blocks a
 * 64 KiB gap read 5.5 times the dirty data and took longer).
 */
#define GAP_BYTES	(8u << 10)
#define NWIN		6		/* windows: filled, read, written */
#define NREAD		2		/* windows whose reads are in flight */
#define HUGE_BYTES	(2u << 20)	/* a transparent huge page on x86-64 */
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
	uint64_t done[MAX_EXTENTS];	/* bytes of each extent the ring read */
	int pending;		/* reads in the ring not completed yet */
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
	struct io_uring ring;
	bool ring_ok;		/* set up: reads go through it */
	bool ring_off;		/* it refused a submission: no more */

	pthread_t thr;
	bool thr_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct win win[NWIN];
	unsigned char *bufs;	/* the windows' buffers, one mapping */
	size_t bufs_len;
	/* Windows tail .. head - 1 are the writer's, head .. rhead - 1
	 * have their reads in flight, rhead is the one being filled. */
	unsigned int rhead;
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

/* Read S through the page cache from now on (reads in flight keep the old
 * descriptor). -errno, and S unchanged, when it cannot be reopened. */
static int source_buffered(struct x_source *s)
{
	int fd = open(s->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	close(s->fd);
	s->fd = fd;
	s->direct = false;
	posix_fadvise(s->fd, 0, 0, POSIX_FADV_RANDOM);
	return 0;
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

static int finish_oldest(struct track_extract *x);

/* The window being filled; waits for a free one. NULL on error. */
static struct win *cur_window(struct track_extract *x)
{
	struct win *wn;

	if (x->cur)
		return x->cur;
	pthread_mutex_lock(&x->lock);
	while (x->rhead - x->tail == NWIN && !x->err) {
		if (x->rhead != x->head) {
			/* every window is taken, some by reads: finish one */
			pthread_mutex_unlock(&x->lock);
			if (finish_oldest(x))
				return NULL;
			pthread_mutex_lock(&x->lock);
			continue;
		}
		pthread_cond_wait(&x->cond, &x->lock);
	}
	if (x->err) {
		pthread_mutex_unlock(&x->lock);
		return NULL;
	}
	wn = &x->win[x->rhead % NWIN];
	pthread_mutex_unlock(&x->lock);
	wn->np = 0;
	wn->ne = 0;
	wn->bytes = 0;
	wn->pending = 0;
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
			if (source_buffered(s))
				return x_fail(x, -errno, "cannot reopen %s: "
					      "%s", s->path, strerror(errno));
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
 * Start the reads of every extent of WN at once, without waiting: the
 * reads of the next window are queued while these complete. What the ring
 * does not read (a short read, an error, a read it refused)
 * read_extent() finishes or reports when the window is finished.
 */
static void start_reads(struct track_extract *x, struct win *wn)
{
	struct x_source *s = x->src;
	unsigned int slot = wn - x->win;
	struct io_uring_sqe *sqe;
	int i, n;

	memset(wn->done, 0, sizeof(wn->done[0]) * wn->ne);
	if (!s->direct) {
		/* buffered: let the kernel read ahead of us */
		for (i = 0; wn->ne > 1 && i < wn->ne; i++)
			posix_fadvise(s->fd, wn->e[i].first * s->bs,
				      extent_need(s, &wn->e[i]),
				      POSIX_FADV_WILLNEED);
		return;
	}
	if (!x->ring_ok || x->ring_off)
		return;
	for (i = 0; i < wn->ne; i++) {
		const struct extent *e = &wn->e[i];

		/* the ring holds NREAD windows: there is always room */
		sqe = io_uring_get_sqe(&x->ring);
		if (!sqe)
			break;
		io_uring_prep_read(sqe, s->fd, wn->buf + e->boff * s->bs,
				   (e->end - e->first) * s->bs,
				   e->first * s->bs);
		io_uring_sqe_set_data64(sqe, (uint64_t)slot << 32 | (uint32_t)i);
	}
	do
		n = io_uring_submit(&x->ring);
	while (n == -EINTR);
	if (n < i) {
		/* Refused: what was not submitted is never read by the ring
		 * (ring_off: no submission again); read_extent() reads it. */
		x->ring_off = true;
		n = n < 0 ? 0 : n;
	}
	wn->pending = n;
}

/* Wait until the reads of WN in the ring are all complete. */
static int wait_reads(struct track_extract *x, struct win *wn)
{
	struct x_source *s = x->src;
	struct io_uring_cqe *cqe;
	unsigned int head, n;
	struct win *w;
	int ret;

	while (wn->pending) {
		ret = io_uring_wait_cqe(&x->ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret)
			return x_fail(x, ret, "waiting for reads of %s: %s",
				      s->path, strerror(-ret));
		n = 0;
		io_uring_for_each_cqe(&x->ring, head, cqe) {
			uint64_t d = io_uring_cqe_get_data64(cqe);

			/* any window in flight: they complete out of order */
			w = &x->win[d >> 32];
			if (cqe->res > 0)
				w->done[(uint32_t)d] = cqe->res;
			w->pending--;
			n++;
		}
		io_uring_cq_advance(&x->ring, n);
	}
	return 0;
}

/* Finish the reads of the oldest window in flight and hand it to the
 * writer. */
static int finish_oldest(struct track_extract *x)
{
	struct win *wn = &x->win[x->head % NWIN];
	int i, ret;

	ret = wait_reads(x, wn);
	for (i = 0; i < wn->ne && !ret; i++)
		ret = read_extent(x, wn, &wn->e[i], wn->done[i]);
	if (ret)
		return ret;
	pthread_mutex_lock(&x->lock);
	x->head++;
	pthread_cond_broadcast(&x->cond);
	pthread_mutex_unlock(&x->lock);
	return 0;
}

/* Start the reads of the current window; finish the oldest window in
 * flight when NREAD are. */
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
	start_reads(x, wn);
	x->rhead++;	/* only this thread moves rhead */
	x->cur = NULL;
	while (x->rhead - x->head >= NREAD) {
		ret = finish_oldest(x);
		if (ret)
			return ret;
	}
	return 0;
}

/* Submit the current window and finish every window in flight. */
static int drain(struct track_extract *x)
{
	int ret = submit(x);

	while (!ret && x->head != x->rhead)
		ret = finish_oldest(x);
	return ret;
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

/*
 * The windows' buffers: one mapping, on huge page boundaries, that the
 * kernel may back with transparent huge pages. The buffers are new in
 * every process and O_DIRECT reads pin them page by page: with 4 KiB
 * pages, faulting in and pinning the 24 MiB took a quarter of
 * dmextract's CPU time on a sync of 61 MiB (the realistic pattern on
 * 4 GiB, docs/benchmarks-dsync.md). Where huge pages are off or none is
 * free, the kernel falls back to small ones.
 */
static int bufs_map(struct track_extract *x)
{
	size_t len = (size_t)x->win_bytes * NWIN;
	size_t map = len + HUGE_BYTES;
	unsigned char *p, *a;

	p = mmap(NULL, map, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	a = (unsigned char *)(((uintptr_t)p + HUGE_BYTES - 1) &
			      ~(uintptr_t)(HUGE_BYTES - 1));
	if (a > p)
		munmap(p, a - p);
	if (a + len < p + map)
		munmap(a + len, p + map - (a + len));
	madvise(a, len, MADV_HUGEPAGE);
	x->bufs = a;
	x->bufs_len = len;
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
	/* no io_uring here (disabled, or refused by a seccomp filter): read
	 * through the page cache, which reads ahead of us */
	if (x->src->direct &&
	    io_uring_queue_init(MAX_EXTENTS * NREAD, &x->ring, 0) == 0)
		x->ring_ok = true;
	else if (x->src->direct)
		source_buffered(x->src);	/* if not, one read at a time */
	if (!x->src->direct)
		posix_fadvise(x->src->fd, 0, 0, POSIX_FADV_RANDOM);
	if (bufs_map(x)) {
		snprintf(x->msg, sizeof(x->msg), "out of memory");
		x->err = -ENOMEM;
		return -ENOMEM;
	}
	for (i = 0; i < NWIN; i++)
		x->win[i].buf = x->bufs + (size_t)i * x->win_bytes;
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
		ret = drain(x);
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
	if (!x)
		return;
	if (x->thr_started)
		x_stop(x, false);
	/* waits for reads still in flight, if any, before buffers go */
	if (x->ring_ok)
		io_uring_queue_exit(&x->ring);
	if (x->src->fd >= 0)
		close(x->src->fd);
	free(x->src->path);
	if (x->bufs)
		munmap(x->bufs, x->bufs_len);
	pthread_mutex_destroy(&x->lock);
	pthread_cond_destroy(&x->cond);
	free(x);
}
