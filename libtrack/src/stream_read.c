// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The stream reader. Everything a record says is checked before the record
 * is handed out: its header checksum, its sequence number, that its blocks
 * are inside the device and after the previous record's, its payload
 * length, its payload checksum, and that a deflated payload inflates to
 * exactly the run's size. The end record must agree with everything read
 * before it, and nothing may follow it. Every error names the byte offset.
 *
 * Input is buffered, and a step (the header, one record) consumes its bytes
 * only once all of them are there: a read function that returns -EAGAIN
 * (or -EINTR) makes the call return that error with nothing lost, and the
 * next call resumes. A stream that ends early is -ENODATA ("truncated:
 * transfer it again"), one whose bytes are wrong is -EBADMSG ("corrupt:
 * reject it").
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "internal.h"
#include "stream_format.h"

/*
 * A fuzz build (make fuzz: -DTRACK_FUZZ_NO_CRC) takes any checksum, so
 * that a fuzzer gets past the CRCs to the parser behind them. Never set
 * in a build that reads real streams.
 */
#ifdef TRACK_FUZZ_NO_CRC
#define crc_differs(stored, computed)	((void)(stored), (void)(computed), 0)
#else
#define crc_differs(stored, computed)	((stored) != (computed))
#endif

#define RD_IBUF		(256u << 10)

/* RD_TRAILER: the end record checked, waiting to see the input end. */
enum rd_state { RD_HEADER, RD_RECORDS, RD_TRAILER, RD_DONE, RD_FAILED };

struct track_stream_reader {
	track_stream_read_fn fn;
	void *arg;
	int fd;

	unsigned char *ibuf;	/* buffered input: ibuf[ipos .. ilen) unread */
	size_t ipos;
	size_t ilen;
	size_t icap;
	bool eof;
	uint64_t off;		/* bytes consumed */

	enum rd_state state;
	int err;
	char msg[320];

	struct track_stream_info info;
	uint32_t bs;
	uint64_t nr_blocks;
	uint32_t max_record;	/* largest raw data record */
	uint64_t next_block;
	uint64_t seq;
	uint32_t digest;
	struct track_stream_totals tot;

	const unsigned char *payload; /* as on the wire, inside ibuf */
	unsigned char *raw;	/* inflated */
	z_stream z;
	bool z_ready;
};

static ssize_t fd_read(void *arg, void *buf, size_t len)
{
	struct track_stream_reader *r = arg;
	ssize_t n;

	do {
		n = read(r->fd, buf, len);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

__attribute__((format(printf, 4, 5)))
static int rd_fail(struct track_stream_reader *r, int err, uint64_t off,
		   const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(r->msg, sizeof(r->msg), "offset %" PRIu64 ": ", off);
	va_start(ap, fmt);
	vsnprintf(r->msg + n, sizeof(r->msg) - n, fmt, ap);
	va_end(ap);
	r->state = RD_FAILED;
	r->err = err;
	return err;
}

/* Errors of the read function after which the caller may call again. */
static bool rd_retry(ssize_t k)
{
	return k == -EAGAIN || k == -EWOULDBLOCK || k == -EINTR;
}

/*
 * Have NEED unread bytes in the buffer, or all that is left at the end of
 * the input. Returns how many of the NEED are there (fewer only at the
 * end), or the read function's error; nothing is consumed either way.
 */
static ssize_t rd_fill(struct track_stream_reader *r, size_t need)
{
	ssize_t k;

	if (need > r->icap - r->ipos) {
		memmove(r->ibuf, r->ibuf + r->ipos, r->ilen - r->ipos);
		r->ilen -= r->ipos;
		r->ipos = 0;
	}
	if (need > r->icap) {
		size_t cap = need + RD_IBUF;
		unsigned char *n = realloc(r->ibuf, cap);

		if (!n)
			return -ENOMEM;
		r->ibuf = n;
		r->icap = cap;
	}
	while (r->ilen - r->ipos < need && !r->eof) {
		k = r->fn(r->arg, r->ibuf + r->ilen, r->icap - r->ilen);
		if (k < 0)
			return k;
		if (k == 0)
			r->eof = true;
		r->ilen += (size_t)k;
	}
	return (ssize_t)(r->ilen - r->ipos < need ? r->ilen - r->ipos : need);
}

static void rd_consume(struct track_stream_reader *r, size_t n)
{
	r->ipos += n;
	r->off += n;
}

/* The read function failed: retry later, or give up for good. */
static int rd_io_fail(struct track_stream_reader *r, ssize_t k)
{
	if (rd_retry(k))
		return (int)k;
	return rd_fail(r, (int)k, r->off, "reading the stream failed: %s",
		       strerror((int)-k));
}

static const char *type_name(uint16_t type)
{
	switch (type) {
	case SF_T_DATA:
		return "data";
	case SF_T_ZERO:
		return "zero run";
	case SF_T_END:
		return "end";
	default:
		return "unknown";
	}
}

static bool id_valid(const unsigned char *p, size_t len)
{
	size_t i = 0;

	while (i < len && p[i] >= 0x20 && p[i] <= 0x7e)
		i++;
	while (i < len && !p[i])
		i++;
	return i == len;
}

TRACK_EXPORT int track_stream_read_header(struct track_stream_reader *r,
					  struct track_stream_info *info)
{
	unsigned char *h = NULL;
	struct track_stream_info *in;
	uint32_t hlen, crc, stored;
	ssize_t k;
	int ret;

	if (!r || !info)
		return -EINVAL;
	if (r->state == RD_FAILED)
		return r->err;
	if (r->state != RD_HEADER)
		return -EINVAL;
	k = rd_fill(r, SF_HDR_LEN);
	if (k < 0)
		return rd_io_fail(r, k);
	h = calloc(1, SF_HDR_MAX);
	if (!h)
		return -ENOMEM;
	memcpy(h, r->ibuf + r->ipos, (size_t)k);
	if (k == 0) {
		ret = rd_fail(r, -ENODATA, 0, "the stream is empty (did the "
			      "sender fail before it started? see its "
			      "messages)");
		goto out;
	}
	if (k < SF_MAGIC_LEN && !memcmp(h, SF_MAGIC, k)) {
		ret = rd_fail(r, -ENODATA, r->off + k, "the stream ends inside "
			      "its header (%zd of %u bytes): truncated",
			      k, SF_HDR_LEN);
		goto out;
	}
	if (k < SF_MAGIC_LEN || memcmp(h, SF_MAGIC, SF_MAGIC_LEN)) {
		if (k >= 7 && !memcmp(h, "\x89" "DSYNC\n", 7))
			ret = rd_fail(r, -EBADMSG, 0, "the stream's CR LF "
				      "became LF: it went through a text-mode "
				      "channel; send it as binary");
		else
			ret = rd_fail(r, -EBADMSG, 0, "not a dsync stream "
				      "(no magic number; is this the output "
				      "of dmextract?)");
		goto out;
	}
	if (k < SF_HDR_LEN) {
		ret = rd_fail(r, -ENODATA, r->off + k, "the stream ends inside "
			      "its header (%zd of %u bytes): truncated",
			      k, SF_HDR_LEN);
		goto out;
	}
	if (sf_get16(h + SF_H_VMAJOR) != TRACK_STREAM_VERSION_MAJOR) {
		ret = rd_fail(r, -EPROTONOSUPPORT, SF_H_VMAJOR,
			      "stream format version %u.%u; this libtrack "
			      "reads version %u.x: use matching versions of "
			      "dmextract and dmmerge",
			      sf_get16(h + SF_H_VMAJOR),
			      sf_get16(h + SF_H_VMINOR),
			      TRACK_STREAM_VERSION_MAJOR);
		goto out;
	}
	hlen = sf_get32(h + SF_H_LEN);
	if (hlen < SF_HDR_LEN || hlen > SF_HDR_MAX || hlen % 8) {
		ret = rd_fail(r, -EBADMSG, SF_H_LEN, "header length %" PRIu32
			      " is invalid (256 to 4096, a multiple of 8): "
			      "the header is corrupt", hlen);
		goto out;
	}
	if (hlen != SF_HDR_LEN && !sf_get16(h + SF_H_VMINOR)) {
		/* Extensions start with 1.1: a 1.0 length is damage, and
		 * must not pass for a truncated stream below. */
		ret = rd_fail(r, -EBADMSG, SF_H_LEN, "header length %" PRIu32
			      " in a version 1.0 header (which is %u bytes): "
			      "the header is corrupt", hlen, SF_HDR_LEN);
		goto out;
	}
	if (hlen > SF_HDR_LEN) {
		k = rd_fill(r, hlen);
		if (k < 0) {
			ret = rd_io_fail(r, k);
			goto out;
		}
		if (k < hlen) {
			ret = rd_fail(r, -ENODATA, r->off + k, "the stream "
				      "ends inside its header (%zd of %"
				      PRIu32 " bytes): truncated", k, hlen);
			goto out;
		}
		memcpy(h, r->ibuf + r->ipos, hlen);
	}
	stored = sf_get32(h + SF_H_CRC);
	sf_put32(h + SF_H_CRC, 0);
	crc = trk_crc32c(0, h, hlen);
	sf_put32(h + SF_H_CRC, stored);
	if (crc_differs(stored, crc)) {
		ret = rd_fail(r, -EBADMSG, SF_H_CRC, "header checksum mismatch "
			      "(stored %08" PRIx32 ", computed %08" PRIx32
			      "): the header is corrupt", stored, crc);
		goto out;
	}

	in = &r->info;
	memset(in, 0, sizeof(*in));
	in->version_major = sf_get16(h + SF_H_VMAJOR);
	in->version_minor = sf_get16(h + SF_H_VMINOR);
	in->flags = sf_get32(h + SF_H_FLAGS);
	in->block_size = sf_get32(h + SF_H_BLOCK);
	in->device_size = sf_get64(h + SF_H_DEVSIZE);
	in->base_epoch = sf_get64(h + SF_H_BASE);
	in->new_epoch = sf_get64(h + SF_H_NEW);
	in->created = sf_get64(h + SF_H_CREATED);
	memcpy(in->source_id, h + SF_H_SOURCE, TRACK_STREAM_ID_MAX);
	in->source_id[TRACK_STREAM_ID_MAX] = 0;
	if (in->version_minor >= 1 && (in->flags & TRACK_STREAM_UNDO))
		memcpy(in->undo_id, h + SF_H_UNDO_ID, sizeof(in->undo_id));

	ret = -EBADMSG;
	if (in->flags & ~SF_FLAGS_KNOWN) {
		ret = rd_fail(r, -EPROTONOSUPPORT, SF_H_FLAGS, "unknown header "
			      "flags 0x%" PRIx32 " (written by a newer "
			      "dmextract?)", in->flags & ~SF_FLAGS_KNOWN);
	} else if (in->block_size < TRACK_STREAM_MIN_BLOCK ||
		   in->block_size > TRACK_STREAM_MAX_BLOCK ||
		   (in->block_size & (in->block_size - 1))) {
		rd_fail(r, ret, SF_H_BLOCK, "block size %" PRIu32 " is not a "
			"power of two from 512 to 33554432", in->block_size);
	} else if (!in->device_size || in->device_size > (UINT64_C(1) << 62)) {
		rd_fail(r, ret, SF_H_DEVSIZE, "device size %" PRIu64 " is "
			"invalid", in->device_size);
	} else if (in->base_epoch > in->new_epoch ||
		   (in->base_epoch == in->new_epoch && in->new_epoch)) {
		rd_fail(r, ret, SF_H_BASE, "base epoch %" PRIu64 " is not "
			"before new epoch %" PRIu64, in->base_epoch,
			in->new_epoch);
	} else if (!id_valid(h + SF_H_SOURCE, TRACK_STREAM_ID_MAX)) {
		rd_fail(r, ret, SF_H_SOURCE, "the source id is not printable "
			"ASCII followed by NUL bytes");
	} else {
		ret = 0;
	}
	if (ret)
		goto out;

	r->bs = in->block_size;
	r->nr_blocks = sf_nr_blocks(in->device_size, r->bs);
	r->max_record = r->bs > TRACK_STREAM_MAX_RECORD ? r->bs :
			TRACK_STREAM_MAX_RECORD;
	r->digest = trk_crc32c(0, h, hlen);
	if (in->flags & TRACK_STREAM_ZLIB) {
		if (posix_memalign((void **)&r->raw, 4096, r->max_record) ||
		    inflateInit2(&r->z, -15) != Z_OK) {
			ret = -ENOMEM;
			goto out;
		}
		r->z_ready = true;
	}
	rd_consume(r, hlen);
	r->state = RD_RECORDS;
	*info = *in;
	ret = 0;
out:
	free(h);
	return ret;
}

/* Inflate LEN bytes of r->payload into exactly RAW bytes of r->raw. */
static bool rd_inflate(struct track_stream_reader *r, uint32_t len,
		       uint64_t raw)
{
	int zr;

	if (inflateReset(&r->z) != Z_OK)
		return false;
	r->z.next_in = (Bytef *)r->payload;
	r->z.avail_in = len;
	r->z.next_out = r->raw;
	r->z.avail_out = (uInt)raw;
	zr = inflate(&r->z, Z_FINISH);
	return zr == Z_STREAM_END && r->z.total_out == raw &&
	       r->z.avail_in == 0;
}

static int rd_trailer(struct track_stream_reader *r);

static int rd_end(struct track_stream_reader *r, uint64_t roff)
{
	const unsigned char *e = r->payload;
	uint64_t v[5], want[5];
	static const char *const what[5] = {
		"records", "data blocks", "zero blocks", "data bytes",
		"stream bytes"
	};
	uint32_t digest;
	int i;

	v[0] = sf_get64(e + SF_E_RECORDS);
	v[1] = sf_get64(e + SF_E_DATA_BLOCKS);
	v[2] = sf_get64(e + SF_E_ZERO_BLOCKS);
	v[3] = sf_get64(e + SF_E_DATA_BYTES);
	v[4] = sf_get64(e + SF_E_STREAM_BYTES);
	want[0] = r->tot.records;
	want[1] = r->tot.data_blocks;
	want[2] = r->tot.zero_blocks;
	want[3] = r->tot.data_bytes;
	want[4] = roff;
	for (i = 0; i < 5; i++)
		if (v[i] != want[i])
			return rd_fail(r, -EBADMSG, roff, "the end record "
				       "counts %" PRIu64 " %s, the stream "
				       "had %" PRIu64 ": records were lost "
				       "or added", v[i], what[i], want[i]);
	digest = sf_get32(e + SF_E_DIGEST);
	if (crc_differs(digest, r->digest))
		return rd_fail(r, -EBADMSG, roff, "stream digest mismatch "
			       "(end record %08" PRIx32 ", computed %08"
			       PRIx32 ")", digest, r->digest);
	r->tot.digest = digest;
	rd_consume(r, SF_REC_LEN + SF_END_LEN);
	r->tot.stream_bytes = r->off;
	r->state = RD_TRAILER;
	return rd_trailer(r);
}

/* After the end record the input must end. */
static int rd_trailer(struct track_stream_reader *r)
{
	ssize_t k = rd_fill(r, 1);

	if (k < 0)
		return rd_io_fail(r, k);
	if (k)
		return rd_fail(r, -EBADMSG, r->off, "data follows the end "
			       "record: the stream is followed by something "
			       "else");
	r->state = RD_DONE;
	return 0;
}

TRACK_EXPORT int track_stream_read_record(struct track_stream_reader *r,
					  struct track_stream_record *rec)
{
	const unsigned char *h;
	uint64_t roff, seq, first, count, raw = 0;
	uint32_t plen, pcrc, crc;
	uint16_t type, flags;
	char run[64];
	ssize_t k;

	if (!r || !rec)
		return -EINVAL;
next:
	if (r->state == RD_FAILED)
		return r->err;
	if (r->state == RD_DONE)
		return 0;
	if (r->state == RD_TRAILER)
		return rd_trailer(r);
	if (r->state != RD_RECORDS)
		return -EINVAL;

	roff = r->off;
	k = rd_fill(r, SF_REC_LEN);
	if (k < 0)
		return rd_io_fail(r, k);
	h = r->ibuf + r->ipos;
	if (k == 0)
		return rd_fail(r, -ENODATA, roff, "the stream ends after "
			       "record %" PRIu64 " without an end record: "
			       "truncated (the sender stopped early)",
			       r->seq);
	if (k < SF_REC_LEN)
		return rd_fail(r, -ENODATA, roff, "the stream ends inside the "
			       "header of record %" PRIu64 " (%zd of %u "
			       "bytes): truncated", r->seq, k, SF_REC_LEN);
	crc = trk_crc32c(0, h, SF_R_HCRC);
	if (crc_differs(sf_get32(h + SF_R_HCRC), crc))
		return rd_fail(r, -EBADMSG, roff, "record %" PRIu64 ": header "
			       "checksum mismatch (stored %08" PRIx32
			       ", computed %08" PRIx32 "): the stream is "
			       "corrupt", r->seq, sf_get32(h + SF_R_HCRC),
			       crc);
	type = sf_get16(h + SF_R_TYPE);
	flags = sf_get16(h + SF_R_FLAGS);
	plen = sf_get32(h + SF_R_PLEN);
	seq = sf_get64(h + SF_R_SEQ);
	first = sf_get64(h + SF_R_FIRST);
	count = sf_get64(h + SF_R_COUNT);
	pcrc = sf_get32(h + SF_R_PCRC);
	if (count && first < UINT64_MAX - count)
		snprintf(run, sizeof(run), "%s, blocks %" PRIu64 "-%" PRIu64,
			 type_name(type), first, first + count - 1);
	else
		snprintf(run, sizeof(run), "%s, %" PRIu64 " blocks from %"
			 PRIu64, type_name(type), count, first);

	if (seq != r->seq)
		return rd_fail(r, -EBADMSG, roff, "record %" PRIu64 " is "
			       "numbered %" PRIu64 ": records were lost, "
			       "repeated or reordered", r->seq, seq);

	switch (type) {
	case SF_T_DATA:
	case SF_T_ZERO:
		if (!count)
			return rd_fail(r, -EBADMSG, roff, "record %" PRIu64
				       " (%s) covers no blocks", seq, run);
		if (first >= r->nr_blocks || count > r->nr_blocks - first)
			return rd_fail(r, -EBADMSG, roff, "record %" PRIu64
				       " (%s) goes past the end of the "
				       "device (%" PRIu64 " blocks)", seq, run,
				       r->nr_blocks);
		if (first < r->next_block)
			return rd_fail(r, -EBADMSG, roff, "record %" PRIu64
				       " (%s) is not after the previous "
				       "record (which ended at block %" PRIu64
				       ")", seq, run, r->next_block);
		raw = sf_run_bytes(first, count, r->bs, r->info.device_size);
		if (type == SF_T_ZERO) {
			if (plen || pcrc || flags)
				return rd_fail(r, -EBADMSG, roff, "record %"
					       PRIu64 " (%s) has a payload "
					       "or flags", seq, run);
			break;
		}
		if (raw > r->max_record)
			return rd_fail(r, -EBADMSG, roff, "record %" PRIu64
				       " (%s) is larger than %" PRIu32
				       " bytes", seq, run, r->max_record);
		if (flags & ~SF_RF_ZLIB)
			return rd_fail(r, -EBADMSG, roff, "record %" PRIu64
				       " (%s) has unknown flags 0x%x", seq,
				       run, flags & ~SF_RF_ZLIB);
		if ((flags & SF_RF_ZLIB) &&
		    !(r->info.flags & TRACK_STREAM_ZLIB))
			return rd_fail(r, -EBADMSG, roff, "record %" PRIu64
				       " (%s) is deflated in a stream "
				       "without compression", seq, run);
		if ((flags & SF_RF_ZLIB) ? !plen || plen > raw : plen != raw)
			return rd_fail(r, -EBADMSG, roff, "record %" PRIu64
				       " (%s): payload length %" PRIu32
				       " does not match its %" PRIu64
				       " bytes of blocks", seq, run, plen,
				       raw);
		break;
	case SF_T_END:
		if (flags || first || count || plen != SF_END_LEN)
			return rd_fail(r, -EBADMSG, roff, "the end record "
				       "(record %" PRIu64 ") is malformed",
				       seq);
		break;
	default:
		if (!(type & SF_T_SKIPPABLE))
			return rd_fail(r, -EPROTONOSUPPORT, roff, "record %"
				       PRIu64 " has unknown type 0x%04x "
				       "(written by a newer dmextract?)",
				       seq, type);
		if (plen > SF_MAX_SKIP)
			return rd_fail(r, -EBADMSG, roff, "record %" PRIu64
				       " (type 0x%04x) is larger than %u "
				       "bytes", seq, type, SF_MAX_SKIP);
		break;
	}

	k = rd_fill(r, SF_REC_LEN + (size_t)plen);
	if (k < 0)
		return rd_io_fail(r, k);
	h = r->ibuf + r->ipos;	/* the buffer may have moved */
	r->payload = h + SF_REC_LEN;
	if (k < SF_REC_LEN + (ssize_t)plen)
		return rd_fail(r, -ENODATA, roff + SF_REC_LEN, "the stream "
			       "ends inside the payload of record %" PRIu64
			       " (%s; %zd of %" PRIu32 " bytes): truncated",
			       seq, run, k - SF_REC_LEN, plen);
	crc = trk_crc32c(0, r->payload, plen);
	if (crc_differs(pcrc, crc))
		return rd_fail(r, -EBADMSG, roff + SF_REC_LEN, "record %"
			       PRIu64 " (%s): payload checksum mismatch "
			       "(stored %08" PRIx32 ", computed %08" PRIx32
			       "): the stream is corrupt", seq, run, pcrc,
			       crc);
	if (type == SF_T_END)
		return rd_end(r, roff);

	r->digest = trk_crc32c(r->digest, h, SF_REC_LEN);
	rd_consume(r, SF_REC_LEN + (size_t)plen);
	r->seq++;
	r->tot.records++;
	if (type != SF_T_DATA && type != SF_T_ZERO)
		goto next;	/* skippable, checked, done */

	memset(rec, 0, sizeof(*rec));
	rec->type = type;
	rec->first = first;
	rec->count = count;
	rec->offset = roff;
	rec->seq = seq;
	rec->length = raw;
	r->next_block = first + count;
	if (type == SF_T_ZERO) {
		r->tot.zero_blocks += count;
		return 1;
	}
	if (flags & SF_RF_ZLIB) {
		if (!rd_inflate(r, plen, raw))
			return rd_fail(r, -EBADMSG, roff + SF_REC_LEN,
				       "record %" PRIu64 " (%s): the deflated "
				       "payload does not inflate to %" PRIu64
				       " bytes", seq, run, raw);
		rec->data = r->raw;
	} else {
		rec->data = r->payload;
	}
	r->tot.data_blocks += count;
	r->tot.data_bytes += raw;
	return 1;
}

TRACK_EXPORT int track_stream_reader_new(track_stream_read_fn fn, void *arg,
					 struct track_stream_reader **rp)
{
	struct track_stream_reader *r;

	if (!fn || !rp)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->ibuf = malloc(RD_IBUF);
	r->icap = RD_IBUF;
	if (!r->ibuf) {
		free(r);
		return -ENOMEM;
	}
	r->fn = fn;
	r->arg = arg;
	r->fd = -1;
	r->state = RD_HEADER;
	*rp = r;
	return 0;
}

TRACK_EXPORT int track_stream_reader_open(int fd,
					  struct track_stream_reader **rp)
{
	int ret;

	if (fd < 0)
		return -EBADF;
	ret = track_stream_reader_new(fd_read, NULL, rp);
	if (ret)
		return ret;
	(*rp)->fd = fd;
	(*rp)->arg = *rp;
	return 0;
}

TRACK_EXPORT int track_stream_reader_totals(const struct track_stream_reader *r,
					    struct track_stream_totals *t)
{
	if (!r || !t)
		return -EINVAL;
	*t = r->tot;
	if (r->state != RD_DONE) {
		t->stream_bytes = r->off;
		t->digest = r->digest;
	}
	return 0;
}

TRACK_EXPORT uint64_t track_stream_reader_offset(const struct track_stream_reader *r)
{
	return r ? r->off : 0;
}

TRACK_EXPORT const char *track_stream_reader_error(const struct track_stream_reader *r)
{
	if (!r || r->state != RD_FAILED)
		return "";
	return r->msg;
}

TRACK_EXPORT void track_stream_reader_free(struct track_stream_reader *r)
{
	if (!r)
		return;
	if (r->z_ready)
		inflateEnd(&r->z);
	free(r->raw);
	free(r->ibuf);
	free(r);
}
