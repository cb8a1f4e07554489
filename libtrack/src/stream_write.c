// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The stream writer: header, data and zero records, end record.
 *
 * Blocks arrive in ascending order. All-zero blocks become zero runs;
 * contiguous data is gathered into records of up to 1 MiB (one block if
 * blocks are larger) so that a caller handing in one block at a time still
 * gets large records. Each record is deflated on its own, so a reader can
 * decode it without anything that came before.
 *
 * Records are gathered in the output buffer so that short ones leave in
 * one write(). The data run being gathered is copied once, straight to
 * its place in that buffer, behind room left for its header; the header
 * is filled in when the run ends. A whole record handed in at once is
 * not copied at all.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "internal.h"
#include "stream_format.h"

#define WR_RECORD_BYTES	(1u << 20)	/* raw bytes per data record */
#define WR_OBUF		(256u << 10)	/* write() once this much is gathered */
#define WR_PROBE	(16u << 10)	/* deflate this much first to see... */
#define WR_PROBE_MIN	(64u << 10)	/* ...in records at least this large */
#define WR_SKIP_MAX	32		/* records sent raw after a failure */

struct track_stream_writer {
	track_stream_write_fn fn;
	void *arg;
	int fd;

	struct track_stream_info info;
	uint64_t nr_blocks;
	uint64_t next_block;	/* the first block a caller may add next */
	uint32_t bs;

	bool zlib;
	bool z_ready;
	int level;
	z_stream z;
	unsigned char *cbuf;	/* deflate output */
	size_t cbuf_len;
	unsigned int skip;	/* records to send without trying deflate */
	unsigned int backoff;	/* the next skip after a failed try */

	size_t pend_pos;	/* the pending data run's header, in obuf */
	uint64_t pend_first;
	uint64_t pend_count;
	uint64_t rec_blocks;	/* blocks per full data record */

	uint64_t zero_first;	/* pending zero run */
	uint64_t zero_count;

	unsigned char *obuf;	/* WR_OBUF, a record and its header */
	size_t olen;

	uint64_t seq;
	uint64_t offset;	/* bytes handed to fn plus bytes in obuf */
	uint32_t digest;
	struct track_stream_totals tot;
	int err;		/* sticky: the first error */
	bool finished;
};

static ssize_t fd_write(void *arg, const void *buf, size_t len)
{
	struct track_stream_writer *w = arg;
	const char *p = buf;
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = write(w->fd, p + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += n;
	}
	return len;
}

/* Hand LEN bytes to the callback; a short or failed write is an error. */
static int wr_raw(struct track_stream_writer *w, const void *buf, size_t len)
{
	ssize_t n;

	if (!len)
		return 0;
	n = w->fn(w->arg, buf, len);
	if (n < 0)
		return (int)n;
	if ((size_t)n != len)
		return -EIO;
	return 0;
}

static int wr_flush(struct track_stream_writer *w)
{
	int ret = wr_raw(w, w->obuf, w->olen);

	w->olen = 0;
	return ret;
}

static int wr_out(struct track_stream_writer *w, const void *buf, size_t len)
{
	int ret;

	if (!len)
		return 0;	/* a zero run has no payload: buf is NULL */
	w->offset += len;
	if (w->olen + len <= WR_OBUF) {
		memcpy(w->obuf + w->olen, buf, len);
		w->olen += len;
		return 0;
	}
	ret = wr_flush(w);
	if (ret)
		return ret;
	if (len < WR_OBUF / 2) {
		memcpy(w->obuf, buf, len);
		w->olen = len;
		return 0;
	}
	return wr_raw(w, buf, len);
}

/* Fill in record header H, for the payload that follows it. */
static void wr_fill_header(struct track_stream_writer *w, unsigned char *h,
			   uint16_t type, uint16_t flags, uint64_t first,
			   uint64_t count, const void *payload, uint32_t plen)
{
	sf_put16(h + SF_R_TYPE, type);
	sf_put16(h + SF_R_FLAGS, flags);
	sf_put32(h + SF_R_PLEN, plen);
	sf_put64(h + SF_R_SEQ, w->seq);
	sf_put64(h + SF_R_FIRST, first);
	sf_put64(h + SF_R_COUNT, count);
	sf_put32(h + SF_R_PCRC, trk_crc32c(0, payload, plen));
	sf_put32(h + SF_R_HCRC, trk_crc32c(0, h, SF_R_HCRC));
	if (type != SF_T_END)
		w->digest = trk_crc32c(w->digest, h, SF_REC_LEN);
	w->seq++;
}

static int wr_record(struct track_stream_writer *w, uint16_t type,
		     uint16_t flags, uint64_t first, uint64_t count,
		     const void *payload, uint32_t plen)
{
	unsigned char h[SF_REC_LEN];
	int ret;

	wr_fill_header(w, h, type, flags, first, count, payload, plen);
	ret = wr_out(w, h, SF_REC_LEN);
	if (!ret)
		ret = wr_out(w, payload, plen);
	return ret;
}

/*
 * Deflating data that does not shrink (already compressed or encrypted)
 * costs as much as deflating text, about 30 MiB/s, and gains nothing. Two
 * guards keep such data at full speed: a large record is first deflated
 * for its first 16 KiB only (1.6 % of a 1 MiB record); and after a record
 * did not shrink, the next 1, 2, 4 ... 32 small records are sent without
 * trying, until one shrinks again. Large records are always probed, so a
 * compressible run after incompressible blocks is still deflated.
 */
static void wr_deflate_failed(struct track_stream_writer *w)
{
	w->backoff = w->backoff ? w->backoff * 2 : 1;
	if (w->backoff > WR_SKIP_MAX)
		w->backoff = WR_SKIP_MAX;
	w->skip = w->backoff;
}

static bool wr_worth_deflating(struct track_stream_writer *w,
			       const unsigned char *buf, uint64_t raw)
{
	if (raw < WR_PROBE_MIN) {
		if (!w->skip)
			return true;
		w->skip--;
		return false;
	}
	if (deflateReset(&w->z) != Z_OK)
		return true;
	w->z.next_in = (unsigned char *)buf;
	w->z.avail_in = WR_PROBE;
	w->z.next_out = w->cbuf;
	w->z.avail_out = (uInt)w->cbuf_len;
	if (deflate(&w->z, Z_FINISH) != Z_STREAM_END)
		return true;
	if (w->z.total_out < WR_PROBE - WR_PROBE / 16)
		return true;
	wr_deflate_failed(w);
	return false;
}

/*
 * Deflate RAW bytes of BUF into cbuf if that is worth it and they shrink.
 * Returns 1 (*plen: the deflated length), 0 to send them as they are, or
 * an error.
 */
static int wr_deflate(struct track_stream_writer *w, const unsigned char *buf,
		      uint64_t raw, uint32_t *plen)
{
	if (!w->zlib || !wr_worth_deflating(w, buf, raw))
		return 0;
	if (deflateReset(&w->z) != Z_OK)
		return -ENOMEM;
	w->z.next_in = (unsigned char *)buf;
	w->z.avail_in = (uInt)raw;
	w->z.next_out = w->cbuf;
	w->z.avail_out = (uInt)w->cbuf_len;
	if (deflate(&w->z, Z_FINISH) != Z_STREAM_END)
		return -EIO;
	if (w->z.total_out >= raw) {
		wr_deflate_failed(w);
		return 0;
	}
	w->backoff = 0;
	*plen = (uint32_t)w->z.total_out;
	return 1;
}

static void wr_count_data(struct track_stream_writer *w, uint64_t count,
			  uint64_t raw)
{
	w->tot.records++;
	w->tot.data_blocks += count;
	w->tot.data_bytes += raw;
}

/* A data record straight from the caller's buffer. */
static int wr_emit_data(struct track_stream_writer *w, uint64_t first,
			uint64_t count, const unsigned char *buf)
{
	uint64_t raw = sf_run_bytes(first, count, w->bs, w->info.device_size);
	uint32_t plen = (uint32_t)raw;
	int ret;

	ret = wr_deflate(w, buf, raw, &plen);
	if (ret < 0)
		return ret;
	ret = wr_record(w, SF_T_DATA, ret ? SF_RF_ZLIB : 0, first, count,
			ret ? w->cbuf : buf, plen);
	if (ret)
		return ret;
	wr_count_data(w, count, raw);
	return 0;
}

/* The pending run becomes a record where it is, in the output buffer. */
static int wr_flush_data(struct track_stream_writer *w)
{
	unsigned char *h = w->obuf + w->pend_pos;
	unsigned char *payload = h + SF_REC_LEN;
	uint64_t raw;
	uint32_t plen;
	int ret;

	if (!w->pend_count)
		return 0;
	raw = sf_run_bytes(w->pend_first, w->pend_count, w->bs,
			   w->info.device_size);
	plen = (uint32_t)raw;
	ret = wr_deflate(w, payload, raw, &plen);
	if (ret < 0)
		return ret;
	if (ret)
		memcpy(payload, w->cbuf, plen);
	wr_fill_header(w, h, SF_T_DATA, ret ? SF_RF_ZLIB : 0, w->pend_first,
		       w->pend_count, payload, plen);
	wr_count_data(w, w->pend_count, raw);
	w->pend_count = 0;
	w->olen = w->pend_pos + SF_REC_LEN + plen;
	w->offset += SF_REC_LEN + plen;
	if (w->olen >= WR_OBUF)
		return wr_flush(w);
	return 0;
}

static int wr_flush_zero(struct track_stream_writer *w)
{
	int ret;

	if (!w->zero_count)
		return 0;
	ret = wr_record(w, SF_T_ZERO, 0, w->zero_first, w->zero_count,
			NULL, 0);
	if (ret)
		return ret;
	w->tot.records++;
	w->tot.zero_blocks += w->zero_count;
	w->zero_count = 0;
	return 0;
}

static int wr_add_zero(struct track_stream_writer *w, uint64_t first,
		       uint64_t count)
{
	int ret = wr_flush_data(w);

	if (ret)
		return ret;
	if (w->zero_count && w->zero_first + w->zero_count == first) {
		w->zero_count += count;
		return 0;
	}
	ret = wr_flush_zero(w);
	if (ret)
		return ret;
	w->zero_first = first;
	w->zero_count = count;
	return 0;
}

static int wr_add_data(struct track_stream_writer *w, uint64_t first,
		       uint64_t count, const unsigned char *buf)
{
	uint64_t take;
	size_t n;
	int ret;

	ret = wr_flush_zero(w);
	if (ret)
		return ret;
	if (w->pend_count && w->pend_first + w->pend_count != first) {
		ret = wr_flush_data(w);
		if (ret)
			return ret;
	}
	while (count) {
		take = w->rec_blocks - w->pend_count;
		if (take > count)
			take = count;
		if (!w->pend_count && take == w->rec_blocks) {
			/* A whole record: no need to copy it. */
			ret = wr_emit_data(w, first, take, buf);
			if (ret)
				return ret;
		} else {
			if (!w->pend_count) {
				/* room for a whole record behind olen */
				if (w->olen >= WR_OBUF) {
					ret = wr_flush(w);
					if (ret)
						return ret;
				}
				w->pend_first = first;
				w->pend_pos = w->olen;
				w->olen += SF_REC_LEN;
			}
			n = sf_run_bytes(first, take, w->bs,
					 w->info.device_size);
			memcpy(w->obuf + w->olen, buf, n);
			w->olen += n;
			w->pend_count += take;
			if (w->pend_count == w->rec_blocks) {
				ret = wr_flush_data(w);
				if (ret)
					return ret;
			}
		}
		first += take;
		count -= take;
		buf += take * w->bs;
	}
	return 0;
}

/* Bytes of block B: the block size, less for a partial last block. */
static size_t blk_bytes(const struct track_stream_writer *w, uint64_t b)
{
	if (b + 1 < w->nr_blocks)
		return w->bs;
	return (size_t)(w->info.device_size - b * w->bs);
}

static bool all_zero(const unsigned char *p, size_t len)
{
	static const unsigned char zero[16];

	if (len <= 16)
		return !memcmp(p, zero, len);
	return !memcmp(p, zero, 16) && !memcmp(p, p + 16, len - 16);
}

/* Would a reader accept this header? */
static bool info_valid(const struct track_stream_info *in)
{
	size_t i, n;

	if (in->block_size < TRACK_STREAM_MIN_BLOCK ||
	    in->block_size > TRACK_STREAM_MAX_BLOCK ||
	    (in->block_size & (in->block_size - 1)))
		return false;
	if (!in->device_size || in->device_size > (UINT64_C(1) << 62))
		return false;
	if (in->flags & ~SF_FLAGS_KNOWN)
		return false;
	if (!(in->flags & TRACK_STREAM_UNDO) &&
	    !trk_all_zero(in->undo_id, sizeof(in->undo_id)))
		return false;
	if (in->base_epoch > in->new_epoch ||
	    (in->base_epoch == in->new_epoch && in->new_epoch))
		return false;
	n = strnlen(in->source_id, sizeof(in->source_id));
	if (n > TRACK_STREAM_ID_MAX)
		return false;
	for (i = 0; i < n; i++)
		if (in->source_id[i] < 0x20 || in->source_id[i] > 0x7e)
			return false;
	return true;
}

static int wr_header(struct track_stream_writer *w)
{
	const struct track_stream_info *in = &w->info;
	bool undo_id = !trk_all_zero(in->undo_id, sizeof(in->undo_id));
	unsigned char h[SF_HDR_LEN];

	memset(h, 0, sizeof(h));
	memcpy(h + SF_H_MAGIC, SF_MAGIC, SF_MAGIC_LEN);
	sf_put16(h + SF_H_VMAJOR, TRACK_STREAM_VERSION_MAJOR);
	/* the oldest version that has all it uses: readers of 1.0 skip it */
	sf_put16(h + SF_H_VMINOR, undo_id ? 1 : 0);
	sf_put32(h + SF_H_LEN, SF_HDR_LEN);
	sf_put32(h + SF_H_FLAGS, in->flags);
	sf_put32(h + SF_H_BLOCK, in->block_size);
	sf_put64(h + SF_H_DEVSIZE, in->device_size);
	sf_put64(h + SF_H_BASE, in->base_epoch);
	sf_put64(h + SF_H_NEW, in->new_epoch);
	sf_put64(h + SF_H_CREATED, in->created);
	memcpy(h + SF_H_SOURCE, in->source_id,
	       strnlen(in->source_id, TRACK_STREAM_ID_MAX));
	if (undo_id)
		memcpy(h + SF_H_UNDO_ID, in->undo_id, sizeof(in->undo_id));
	sf_put32(h + SF_H_CRC, trk_crc32c(0, h, SF_HDR_LEN));
	w->digest = trk_crc32c(0, h, SF_HDR_LEN);
	return wr_out(w, h, SF_HDR_LEN);
}

static int wr_new(const struct track_stream_info *info,
		  track_stream_write_fn fn, void *arg, int fd,
		  struct track_stream_writer **wp)
{
	struct track_stream_writer *w;
	int ret = -ENOMEM;

	if (!info || !wp || !info_valid(info) ||
	    info->reserved0 || !trk_all_zero(info->reserved,
					     sizeof(info->reserved)) ||
	    !trk_all_zero(info->reserved1, sizeof(info->reserved1)))
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->arg = fd >= 0 ? w : arg;
	w->fd = fd;
	w->info = *info;
	w->info.source_id[TRACK_STREAM_ID_MAX] = 0;
	w->bs = info->block_size;
	w->nr_blocks = sf_nr_blocks(info->device_size, w->bs);
	w->rec_blocks = WR_RECORD_BYTES / w->bs ? WR_RECORD_BYTES / w->bs : 1;
	w->level = 1;
	w->zlib = info->flags & TRACK_STREAM_ZLIB;
	w->obuf = malloc(WR_OBUF + SF_REC_LEN + w->rec_blocks * w->bs);
	if (!w->obuf)
		goto fail;
	if (w->zlib) {
		if (deflateInit2(&w->z, w->level, Z_DEFLATED, -15, 8,
				 Z_DEFAULT_STRATEGY) != Z_OK)
			goto fail;
		w->z_ready = true;
		w->cbuf_len = deflateBound(&w->z, w->rec_blocks * w->bs);
		w->cbuf = malloc(w->cbuf_len);
		if (!w->cbuf)
			goto fail;
	}
	ret = wr_header(w);
	if (ret)
		goto fail;
	*wp = w;
	return 0;
fail:
	track_stream_writer_free(w);
	return ret;
}

TRACK_EXPORT int track_stream_writer_new(const struct track_stream_info *info,
					 track_stream_write_fn fn, void *arg,
					 struct track_stream_writer **wp)
{
	if (!fn)
		return -EINVAL;
	return wr_new(info, fn, arg, -1, wp);
}

TRACK_EXPORT int track_stream_writer_open(int fd,
					  const struct track_stream_info *info,
					  struct track_stream_writer **wp)
{
	if (fd < 0)
		return -EBADF;
	return wr_new(info, fd_write, NULL, fd, wp);
}

TRACK_EXPORT int track_stream_writer_set_level(struct track_stream_writer *w,
					       int level)
{
	if (!w || level < 1 || level > 9)
		return -EINVAL;
	w->level = level;
	if (w->zlib && deflateParams(&w->z, level, Z_DEFAULT_STRATEGY) != Z_OK)
		return -EINVAL;
	return 0;
}

/* Check and claim blocks FIRST .. FIRST + COUNT - 1. */
static int wr_claim(struct track_stream_writer *w, uint64_t first,
		    uint64_t count)
{
	if (w->err)
		return w->err;
	if (w->finished)
		return -EINVAL;
	if (first < w->next_block)
		return -EINVAL;
	if (first >= w->nr_blocks || count > w->nr_blocks - first)
		return -ERANGE;
	w->next_block = first + count;
	return 0;
}

TRACK_EXPORT int track_stream_write_data(struct track_stream_writer *w,
					 uint64_t first, uint64_t count,
					 const void *buf)
{
	const unsigned char *p = buf;
	uint64_t i, run;
	bool zero;
	int ret;

	if (!w || (!buf && count))
		return -EINVAL;
	if (!count)
		return 0;
	ret = wr_claim(w, first, count);
	if (ret)
		return ret;
	for (i = 0; i < count; i += run) {
		zero = all_zero(p + i * w->bs, blk_bytes(w, first + i));
		for (run = 1; i + run < count; run++)
			if (all_zero(p + (i + run) * w->bs,
				     blk_bytes(w, first + i + run)) != zero)
				break;
		if (zero)
			ret = wr_add_zero(w, first + i, run);
		else
			ret = wr_add_data(w, first + i, run, p + i * w->bs);
		if (ret)
			return w->err = ret;
	}
	return 0;
}

TRACK_EXPORT int track_stream_write_zero(struct track_stream_writer *w,
					 uint64_t first, uint64_t count)
{
	int ret;

	if (!w)
		return -EINVAL;
	if (!count)
		return 0;
	ret = wr_claim(w, first, count);
	if (ret)
		return ret;
	ret = wr_add_zero(w, first, count);
	if (ret)
		w->err = ret;
	return ret;
}

TRACK_EXPORT int track_stream_writer_flush(struct track_stream_writer *w)
{
	int ret;

	if (!w)
		return -EINVAL;
	if (w->err)
		return w->err;
	if (w->finished)
		return 0;
	ret = wr_flush_data(w);
	if (!ret)
		ret = wr_flush_zero(w);
	if (!ret)
		ret = wr_flush(w);
	if (ret)
		w->err = ret;
	return ret;
}

TRACK_EXPORT int track_stream_writer_totals(const struct track_stream_writer *w,
					    struct track_stream_totals *t)
{
	if (!w || !t)
		return -EINVAL;
	*t = w->tot;
	t->stream_bytes = w->offset;
	t->digest = w->digest;
	return 0;
}

TRACK_EXPORT int track_stream_writer_finish(struct track_stream_writer *w,
					    struct track_stream_totals *t)
{
	unsigned char e[SF_END_LEN];
	int ret;

	if (!w)
		return -EINVAL;
	if (w->err)
		return w->err;
	if (w->finished)
		return -EINVAL;
	ret = wr_flush_data(w);
	if (!ret)
		ret = wr_flush_zero(w);
	if (ret)
		return w->err = ret;
	memset(e, 0, sizeof(e));
	sf_put64(e + SF_E_RECORDS, w->tot.records);
	sf_put64(e + SF_E_DATA_BLOCKS, w->tot.data_blocks);
	sf_put64(e + SF_E_ZERO_BLOCKS, w->tot.zero_blocks);
	sf_put64(e + SF_E_DATA_BYTES, w->tot.data_bytes);
	sf_put64(e + SF_E_STREAM_BYTES, w->offset);
	sf_put32(e + SF_E_DIGEST, w->digest);
	ret = wr_record(w, SF_T_END, 0, 0, 0, e, SF_END_LEN);
	if (!ret)
		ret = wr_flush(w);
	if (ret)
		return w->err = ret;
	w->finished = true;
	if (t)
		track_stream_writer_totals(w, t);
	return 0;
}

TRACK_EXPORT void track_stream_writer_free(struct track_stream_writer *w)
{
	if (!w)
		return;
	if (w->z_ready)
		deflateEnd(&w->z);
	free(w->cbuf);
	free(w->obuf);
	free(w);
}
