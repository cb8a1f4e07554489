// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The dsync stream: what the writer produces, the reader gives back exactly;
 * whatever damage a stream suffers, the reader refuses it before it hands
 * out a single wrong byte, and says where.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libtrack.h>
#include "stream_format.h"

/* --- memory streams ------------------------------------------------------ */

struct mem {
	unsigned char *buf;
	size_t len;
	size_t cap;
	size_t pos;
	size_t chunk;		/* largest read, to exercise short reads */
};

static ssize_t mem_write(void *arg, const void *buf, size_t len)
{
	struct mem *m = arg;

	if (m->len + len > m->cap) {
		m->cap = (m->len + len) * 2;
		m->buf = realloc(m->buf, m->cap);
		assert_non_null(m->buf);
	}
	if (len)	/* crafted records pass NULL for no payload */
		memcpy(m->buf + m->len, buf, len);
	m->len += len;
	return len;
}

static ssize_t mem_read(void *arg, void *buf, size_t len)
{
	struct mem *m = arg;
	size_t n = m->len - m->pos;

	if (n > len)
		n = len;
	if (m->chunk && n > m->chunk)
		n = m->chunk;
	memcpy(buf, m->buf + m->pos, n);
	m->pos += n;
	return n;
}

static uint64_t rnd_state = 88172645463325252ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static void rnd_fill(void *buf, size_t len)
{
	unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = rnd() >> 32;
}

static struct track_stream_info make_info(uint32_t bs, uint64_t size,
					  uint32_t flags)
{
	struct track_stream_info in;

	memset(&in, 0, sizeof(in));
	in.block_size = bs;
	in.device_size = size;
	in.flags = flags;
	in.base_epoch = 4;
	in.new_epoch = 7;
	in.created = 1700000000;
	strcpy(in.source_id, "test-source");
	return in;
}

/*
 * Read the whole stream in M into IMAGE (a device image of the header's
 * size, pre-filled by the caller). Returns what read_header/read_record
 * returned last (0 = complete), and the number of records in *nrec.
 */
static int apply(struct mem *m, unsigned char *image, size_t image_len,
		 struct track_stream_info *info, unsigned int *nrec,
		 char *msg, size_t msglen)
{
	struct track_stream_reader *r;
	struct track_stream_record rec;
	struct track_stream_info in;
	int ret;

	m->pos = 0;
	assert_int_equal(track_stream_reader_new(mem_read, m, &r), 0);
	if (nrec)
		*nrec = 0;
	ret = track_stream_read_header(r, &in);
	if (!ret && info)
		*info = in;
	while (!ret && (ret = track_stream_read_record(r, &rec)) == 1) {
		uint64_t off = rec.first * in.block_size;

		assert_true(off + rec.length <= image_len);
		assert_true(rec.length <= in.device_size - off);
		if (rec.type == TRACK_STREAM_DATA)
			memcpy(image + off, rec.data, rec.length);
		else
			memset(image + off, 0, rec.length);
		if (nrec)
			(*nrec)++;
		ret = 0;
	}
	if (ret && msg)
		snprintf(msg, msglen, "%s", track_stream_reader_error(r));
	if (ret) {
		assert_string_not_equal(track_stream_reader_error(r), "");
		assert_non_null(strstr(track_stream_reader_error(r),
				       "offset "));
	}
	track_stream_reader_free(r);
	return ret;
}

/* --- crafted streams: valid checksums around wrong contents -------------- */

struct craft {
	struct mem m;
	uint32_t digest;
	uint64_t seq;
	uint64_t data_blocks, zero_blocks, data_bytes;
};

static void craft_header_raw(struct craft *c, unsigned char *h, size_t hlen)
{
	sf_put32(h + SF_H_CRC, 0);
	sf_put32(h + SF_H_CRC, trk_crc32c(0, h, hlen));
	mem_write(&c->m, h, hlen);
	c->digest = trk_crc32c(0, h, hlen);
}

static void craft_header_fields(unsigned char *h, uint32_t bs, uint64_t size,
				uint32_t flags)
{
	memset(h, 0, SF_HDR_LEN);
	memcpy(h, SF_MAGIC, SF_MAGIC_LEN);
	sf_put16(h + SF_H_VMAJOR, 1);
	sf_put32(h + SF_H_LEN, SF_HDR_LEN);
	sf_put32(h + SF_H_FLAGS, flags);
	sf_put32(h + SF_H_BLOCK, bs);
	sf_put64(h + SF_H_DEVSIZE, size);
	sf_put64(h + SF_H_BASE, 1);
	sf_put64(h + SF_H_NEW, 2);
	memcpy(h + SF_H_SOURCE, "crafted", 7);
}

static void craft_start(struct craft *c, uint32_t bs, uint64_t size,
			uint32_t flags)
{
	unsigned char h[SF_HDR_LEN];

	memset(c, 0, sizeof(*c));
	craft_header_fields(h, bs, size, flags);
	craft_header_raw(c, h, SF_HDR_LEN);
}

static void craft_record(struct craft *c, uint16_t type, uint16_t flags,
			 uint64_t seq, uint64_t first, uint64_t count,
			 const void *payload, uint32_t plen)
{
	unsigned char h[SF_REC_LEN];

	sf_put16(h + SF_R_TYPE, type);
	sf_put16(h + SF_R_FLAGS, flags);
	sf_put32(h + SF_R_PLEN, plen);
	sf_put64(h + SF_R_SEQ, seq);
	sf_put64(h + SF_R_FIRST, first);
	sf_put64(h + SF_R_COUNT, count);
	sf_put32(h + SF_R_PCRC, trk_crc32c(0, payload, plen));
	sf_put32(h + SF_R_HCRC, trk_crc32c(0, h, SF_R_HCRC));
	if (type != SF_T_END)
		c->digest = trk_crc32c(c->digest, h, SF_REC_LEN);
	mem_write(&c->m, h, SF_REC_LEN);
	mem_write(&c->m, payload, plen);
}

/* A well-formed data or zero record with the next sequence number. */
static void craft_run(struct craft *c, uint16_t type, uint64_t first,
		      uint64_t count, const void *payload, uint32_t plen)
{
	craft_record(c, type, 0, c->seq++, first, count, payload, plen);
	if (type == SF_T_DATA) {
		c->data_blocks += count;
		c->data_bytes += plen;
	} else if (type == SF_T_ZERO) {
		c->zero_blocks += count;
	}
}

static void craft_end(struct craft *c)
{
	unsigned char e[SF_END_LEN];

	memset(e, 0, sizeof(e));
	sf_put64(e + SF_E_RECORDS, c->seq);
	sf_put64(e + SF_E_DATA_BLOCKS, c->data_blocks);
	sf_put64(e + SF_E_ZERO_BLOCKS, c->zero_blocks);
	sf_put64(e + SF_E_DATA_BYTES, c->data_bytes);
	sf_put64(e + SF_E_STREAM_BYTES, c->m.len);
	sf_put32(e + SF_E_DIGEST, c->digest);
	craft_record(c, SF_T_END, 0, c->seq, 0, 0, e, SF_END_LEN);
}

/* Expect the crafted stream to be refused with ERR and a message holding
 * WHAT; no record before the bad one may be wrong (apply() checks bounds). */
static void expect_refused(struct craft *c, int err, const char *what)
{
	unsigned char image[64 * 4096];
	char msg[400];
	int ret;

	ret = apply(&c->m, image, sizeof(image), NULL, NULL, msg, sizeof(msg));
	if (ret != err || !strstr(msg, what))
		fail_msg("expected %d \"%s\", got %d \"%s\"", err, what, ret,
			 msg);
	free(c->m.buf);
}

/* --- CRC32C -------------------------------------------------------------- */

static void crc32c_matches_reference_vectors(void **state)
{
	unsigned char buf[32];

	assert_int_equal(trk_crc32c(0, "123456789", 9), 0xe3069283);
	assert_int_equal(trk_crc32c_sw(0, "123456789", 9), 0xe3069283);
	/* RFC 3720, B.4 */
	memset(buf, 0, sizeof(buf));
	assert_int_equal(trk_crc32c(0, buf, 32), 0x8a9136aa);
	memset(buf, 0xff, sizeof(buf));
	assert_int_equal(trk_crc32c(0, buf, 32), 0x62a8ab43);
	/* continuing a CRC equals one pass */
	assert_int_equal(trk_crc32c(trk_crc32c(0, "1234", 4), "56789", 5),
			 0xe3069283);
}

/*
 * Lengths below and above the three-chain thresholds (3 x 256 and
 * 3 x 8192 bytes), at every alignment.
 */
static void crc32c_instruction_and_tables_agree(void **state)
{
	static unsigned char buf[80 * 1024 + 64];
	size_t off, len;
	int i;

	rnd_fill(buf, sizeof(buf));
	for (i = 0; i < 3000; i++) {
		off = rnd() % 64;
		len = i < 2000 ? rnd() % 4096 : rnd() % (80 * 1024);
		assert_int_equal(trk_crc32c(i, buf + off, len),
				 trk_crc32c_sw(i, buf + off, len));
	}
	memset(buf, 0, sizeof(buf));
	assert_int_equal(trk_crc32c(0, buf, 3 * 8192),
			 trk_crc32c_sw(0, buf, 3 * 8192));
	print_message("# crc32c uses %s\n", trk_crc32c_hw() ?
		      "the SSE4.2 instruction" : "slicing-by-8 tables");
}

/* --- round trips --------------------------------------------------------- */

/*
 * Random extents of random, zero and nearly zero blocks, handed in whole or
 * block by block, on a device whose last block is partial, plain and
 * deflated, read back in random-sized pieces: the reader rebuilds exactly
 * the blocks written and nothing else.
 */
static void random_extents_round_trip_exactly(void **state)
{
	const uint32_t bs = 4096;
	const uint64_t nr = 3000;
	const uint64_t size = (nr - 1) * bs + 1000;	/* partial last block */
	unsigned char *src = malloc(nr * bs), *img = malloc(nr * bs);
	unsigned char *want = malloc(nr * bs);
	struct track_stream_writer *w;
	struct track_stream_totals wt, rt;
	struct track_stream_info in, got;
	struct track_stream_reader *r;
	struct track_stream_record rec;
	struct mem m = { 0 };
	uint64_t b, n, k, step;
	int round, ret;

	assert_non_null(src);
	assert_non_null(img);
	assert_non_null(want);
	for (round = 0; round < 12; round++) {
		uint32_t flags = round % 2 ? TRACK_STREAM_ZLIB : 0;

		in = make_info(bs, size, flags);
		for (b = 0; b < nr; b++) {
			switch (rnd() % 4) {
			case 0:
				memset(src + b * bs, 0, bs);
				break;
			case 1:
				memset(src + b * bs, 'a' + b % 26, bs);
				break;
			default:
				rnd_fill(src + b * bs, bs);
			}
			/* zero-ish blocks with a single byte set */
			if (rnd() % 16 == 0) {
				memset(src + b * bs, 0, bs);
				src[b * bs + rnd() % bs] = 1;
			}
		}
		memset(src + size, 0, nr * bs - size);
		memset(want, 0xee, nr * bs);
		memset(img, 0xee, nr * bs);
		m.len = 0;
		assert_int_equal(track_stream_writer_new(&in, mem_write, &m,
							 &w), 0);
		b = rnd() % 3;
		while (b < nr) {
			n = 1 + rnd() % (round < 6 ? 8 : 600);
			if (n > nr - b)
				n = nr - b;
			if (rnd() % 6 == 0) {
				assert_int_equal(track_stream_write_zero(w, b,
									n), 0);
				memset(want + b * bs, 0, n * bs);
			} else {
				/* in one call, or in pieces */
				for (k = 0; k < n; k += step) {
					step = 1 + rnd() % (n - k);
					assert_int_equal(track_stream_write_data(w,
						b + k, step, src + (b + k) * bs),
						0);
				}
				memcpy(want + b * bs, src + b * bs, n * bs);
			}
			b += n + rnd() % 4;
		}
		assert_int_equal(track_stream_writer_finish(w, &wt), 0);
		track_stream_writer_free(w);
		assert_int_equal(wt.stream_bytes, m.len);

		m.pos = 0;
		m.chunk = rnd() % 2 ? 1 + rnd() % 5000 : 0;
		assert_int_equal(track_stream_reader_new(mem_read, &m, &r), 0);
		assert_int_equal(track_stream_read_header(r, &got), 0);
		assert_int_equal(got.device_size, size);
		assert_int_equal(got.flags, flags);
		assert_string_equal(got.source_id, "test-source");
		while ((ret = track_stream_read_record(r, &rec)) == 1) {
			assert_true(rec.first * bs + rec.length <= size);
			if (rec.type == TRACK_STREAM_DATA)
				memcpy(img + rec.first * bs, rec.data,
				       rec.length);
			else
				memset(img + rec.first * bs, 0, rec.length);
		}
		assert_int_equal(ret, 0);
		assert_int_equal(track_stream_reader_totals(r, &rt), 0);
		assert_int_equal(rt.records, wt.records);
		assert_int_equal(rt.data_blocks, wt.data_blocks);
		assert_int_equal(rt.zero_blocks, wt.zero_blocks);
		assert_int_equal(rt.data_bytes, wt.data_bytes);
		assert_int_equal(rt.stream_bytes, m.len);
		assert_int_equal(rt.digest, wt.digest);
		assert_int_equal(track_stream_reader_offset(r), m.len);
		track_stream_reader_free(r);
		/* the partial last block: only SIZE bytes are meaningful */
		assert_memory_equal(img, want, size);
		m.chunk = 0;
	}
	free(m.buf);
	free(src);
	free(img);
	free(want);
}

/*
 * The writer's bytes for a fixed input, plain (deflate's output belongs to
 * zlib's version): short runs gathered into records, runs handed in in
 * pieces, whole records, runs that fill a record exactly, zero runs, and a
 * partial last block. A change to how the writer gathers its records must
 * not change the stream; the length and CRC32C below are those of the
 * writer before it gathered runs in place (f9e3934).
 */
static void plain_stream_bytes_stay_the_same(void **state)
{
	const uint32_t bs = 4096;
	const uint64_t nr = 4000;
	const uint64_t size = (nr - 1) * bs + 1234;
	unsigned char *src = malloc(nr * bs);
	struct track_stream_writer *w;
	struct track_stream_info in;
	struct mem m = { 0 };
	uint64_t seed = 12345, b = 0, n, k, step;
	uint32_t crc;

	(void)state;
	assert_non_null(src);
	for (b = 0; b < nr * bs; b += 8) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		memcpy(src + b, &seed, 8);
	}
	in = make_info(bs, size, 0);
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w), 0);
	b = 1;
	while (b < nr) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		switch (seed >> 61) {
		case 0:		/* a whole record, or two */
			n = 256 * (1 + (seed >> 40) % 2);
			break;
		case 1:		/* a long run */
			n = 100 + (seed >> 32) % 400;
			break;
		default:	/* short runs */
			n = 1 + (seed >> 32) % 8;
		}
		if (n > nr - b)
			n = nr - b;
		if ((seed >> 20) % 7 == 0) {
			assert_int_equal(track_stream_write_zero(w, b, n), 0);
		} else if ((seed >> 24) % 3 == 0) {
			for (k = 0; k < n; k += step) {
				step = 1 + (seed >> (k % 32)) % (n - k);
				assert_int_equal(track_stream_write_data(w, b + k,
					step, src + (b + k) * bs), 0);
			}
		} else {
			assert_int_equal(track_stream_write_data(w, b, n,
							 src + b * bs), 0);
		}
		b += n + (seed >> 16) % 3;
	}
	assert_int_equal(track_stream_writer_finish(w, NULL), 0);
	track_stream_writer_free(w);
	crc = trk_crc32c(0, m.buf, m.len);
	print_message("stream: %zu bytes, crc32c %08x\n", m.len, crc);
	assert_int_equal(m.len, 12876346);
	assert_int_equal(crc, 0x71006f0c);
	free(m.buf);
	free(src);
}

static void zero_blocks_travel_as_zero_runs(void **state)
{
	const uint32_t bs = 4096;
	unsigned char *buf = calloc(1000, bs);
	struct track_stream_writer *w;
	struct track_stream_reader *r;
	struct track_stream_record rec;
	struct track_stream_info in = make_info(bs, 100000ull * bs, 0), got;
	struct mem m = { 0 };

	assert_non_null(buf);
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w), 0);
	/* Zero data in pieces, then explicit zero runs, all contiguous: one
	 * record. Then a data block, then 50000 zero blocks. */
	assert_int_equal(track_stream_write_data(w, 10, 500, buf), 0);
	assert_int_equal(track_stream_write_data(w, 510, 500, buf), 0);
	assert_int_equal(track_stream_write_zero(w, 1010, 90), 0);
	buf[5] = 1;
	assert_int_equal(track_stream_write_data(w, 1100, 1, buf), 0);
	assert_int_equal(track_stream_write_zero(w, 2000, 50000), 0);
	assert_int_equal(track_stream_writer_finish(w, NULL), 0);
	track_stream_writer_free(w);
	/* header, 3 records (one with a block of payload), end */
	assert_int_equal(m.len, SF_HDR_LEN + 4 * SF_REC_LEN + bs + SF_END_LEN);

	m.pos = 0;
	assert_int_equal(track_stream_reader_new(mem_read, &m, &r), 0);
	assert_int_equal(track_stream_read_header(r, &got), 0);
	assert_int_equal(track_stream_read_record(r, &rec), 1);
	assert_int_equal(rec.type, TRACK_STREAM_ZERO);
	assert_int_equal(rec.first, 10);
	assert_int_equal(rec.count, 1090);
	assert_int_equal(rec.length, 1090 * bs);
	assert_int_equal(track_stream_read_record(r, &rec), 1);
	assert_int_equal(rec.type, TRACK_STREAM_DATA);
	assert_int_equal(rec.first, 1100);
	assert_int_equal(((const unsigned char *)rec.data)[5], 1);
	assert_int_equal(track_stream_read_record(r, &rec), 1);
	assert_int_equal(rec.type, TRACK_STREAM_ZERO);
	assert_int_equal(rec.count, 50000);
	assert_int_equal(track_stream_read_record(r, &rec), 0);
	track_stream_reader_free(r);
	free(buf);
	free(m.buf);
}

static void compressed_stream_is_smaller_and_round_trips(void **state)
{
	const uint32_t bs = 4096;
	const uint64_t nr = 2048;
	unsigned char *src = malloc(nr * bs), *img = calloc(nr, bs);
	struct track_stream_info in;
	struct track_stream_writer *w;
	struct mem plain = { 0 }, z = { 0 };
	uint64_t i;

	assert_non_null(src);
	assert_non_null(img);
	for (i = 0; i < nr * bs; i++)	/* text-like, compressible */
		src[i] = "the quick brown fox "[(i * 7 + i / 4096) % 20];
	in = make_info(bs, nr * bs, 0);
	assert_int_equal(track_stream_writer_new(&in, mem_write, &plain, &w),
			 0);
	assert_int_equal(track_stream_write_data(w, 0, nr, src), 0);
	assert_int_equal(track_stream_writer_finish(w, NULL), 0);
	track_stream_writer_free(w);
	in.flags = TRACK_STREAM_ZLIB;
	assert_int_equal(track_stream_writer_new(&in, mem_write, &z, &w), 0);
	assert_int_equal(track_stream_write_data(w, 0, nr, src), 0);
	assert_int_equal(track_stream_writer_finish(w, NULL), 0);
	track_stream_writer_free(w);
	assert_true(z.len * 4 < plain.len);
	assert_int_equal(apply(&z, img, nr * bs, NULL, NULL, NULL, 0), 0);
	assert_memory_equal(img, src, nr * bs);
	free(plain.buf);
	free(z.buf);
	free(src);
	free(img);
}

static void writer_refuses_blocks_out_of_order_or_outside(void **state)
{
	struct track_stream_info in = make_info(4096, 100 * 4096, 0);
	struct track_stream_writer *w;
	unsigned char buf[4096] = { 1 };
	struct mem m = { 0 };

	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w), 0);
	assert_int_equal(track_stream_write_data(w, 10, 1, buf), 0);
	assert_int_equal(track_stream_write_data(w, 10, 1, buf), -EINVAL);
	assert_int_equal(track_stream_write_data(w, 5, 1, buf), -EINVAL);
	assert_int_equal(track_stream_write_data(w, 100, 1, buf), -ERANGE);
	assert_int_equal(track_stream_write_zero(w, 99, 2), -ERANGE);
	assert_int_equal(track_stream_write_zero(w, 20, UINT64_MAX), -ERANGE);
	assert_int_equal(track_stream_write_data(w, 99, 1, buf), 0);
	assert_int_equal(track_stream_writer_finish(w, NULL), 0);
	assert_int_equal(track_stream_write_data(w, 99, 1, buf), -EINVAL);
	track_stream_writer_free(w);
	free(m.buf);
}

static void writer_refuses_a_header_readers_would_refuse(void **state)
{
	struct track_stream_info in;
	struct track_stream_writer *w;
	struct mem m = { 0 };

	in = make_info(4096, 1 << 20, 0);
	in.block_size = 3000;
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w),
			 -EINVAL);
	in = make_info(4096, 0, 0);
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w),
			 -EINVAL);
	in = make_info(4096, 1 << 20, 0x80);
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w),
			 -EINVAL);
	in = make_info(4096, 1 << 20, 0);
	in.base_epoch = 9;
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w),
			 -EINVAL);
	in = make_info(4096, 1 << 20, 0);
	in.source_id[3] = '\n';
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w),
			 -EINVAL);
	assert_int_equal(m.len, 0);
}

/* --- damage -------------------------------------------------------------- */

/* A small stream: data (plain or deflated), zero runs, partial last block. */
static void small_stream(struct mem *m, uint32_t flags)
{
	const uint32_t bs = 512;
	struct track_stream_info in = make_info(bs, 40 * bs - 100, flags);
	struct track_stream_writer *w;
	unsigned char buf[8 * 512];
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = i % 7 ? 'x' : (unsigned char)i;
	memset(m, 0, sizeof(*m));
	assert_int_equal(track_stream_writer_new(&in, mem_write, m, &w), 0);
	assert_int_equal(track_stream_write_data(w, 1, 3, buf), 0);
	assert_int_equal(track_stream_write_zero(w, 4, 10), 0);
	assert_int_equal(track_stream_write_data(w, 20, 8, buf), 0);
	assert_int_equal(track_stream_write_data(w, 38, 2, buf), 0);
	assert_int_equal(track_stream_writer_finish(w, NULL), 0);
	track_stream_writer_free(w);
}

/*
 * Flip each bit of each byte in turn: every damaged stream is refused, and
 * the records handed out before the refusal are the undamaged originals.
 */
static void every_flipped_bit_is_detected(void **state)
{
	const size_t dev = 40 * 512;
	unsigned char good[40 * 512], img[40 * 512];
	struct mem m;
	size_t pos;
	int bit, z;

	for (z = 0; z < 2; z++) {
		small_stream(&m, z ? TRACK_STREAM_ZLIB : 0);
		memset(good, 0xee, dev);
		assert_int_equal(apply(&m, good, dev, NULL, NULL, NULL, 0), 0);
		for (pos = 0; pos < m.len; pos++) {
			for (bit = 0; bit < 8; bit++) {
				m.buf[pos] ^= 1 << bit;
				memset(img, 0xee, dev);
				int ret = apply(&m, img, dev, NULL, NULL,
						NULL, 0);

				if (ret == 0)
					fail_msg("flip of bit %d at offset %zu "
						 "went unnoticed", bit, pos);
				/* Corrupt, never mistaken for truncated. */
				if (ret != -EBADMSG && ret != -EPROTONOSUPPORT)
					fail_msg("flip of bit %d at offset %zu "
						 "gave %d", bit, pos, ret);
				m.buf[pos] ^= 1 << bit;
				/* whatever was applied is correct data */
				for (size_t i = 0; i < dev; i++)
					if (img[i] != 0xee && img[i] != good[i])
						fail_msg("flip at %zu wrote a "
							 "wrong byte at %zu",
							 pos, i);
			}
		}
		free(m.buf);
	}
}

/*
 * Cut the stream at every length: always refused as truncated (-ENODATA,
 * "transfer it again"), never as corrupt, and "truncated" said.
 */
static void truncation_anywhere_is_detected(void **state)
{
	unsigned char img[40 * 512];
	char msg[400];
	size_t full, len;
	struct mem m;
	int z;

	for (z = 0; z < 2; z++) {
		small_stream(&m, z ? TRACK_STREAM_ZLIB : 0);
		full = m.len;
		for (len = 0; len < full; len++) {
			m.len = len;
			assert_int_equal(apply(&m, img, sizeof(img), NULL, NULL,
					       msg, sizeof(msg)), -ENODATA);
			if (!strstr(msg, "truncated") &&
			    !strstr(msg, "empty"))
				fail_msg("cut at %zu: \"%s\"", len, msg);
		}
		m.len = full;
		free(m.buf);
	}
}

/* A non-blocking source: at most CHUNK bytes, then -EAGAIN, in turn. */
struct drip {
	struct mem *m;
	size_t chunk;
	bool starve;
	unsigned int eagains;
};

static ssize_t drip_read(void *arg, void *buf, size_t len)
{
	struct drip *d = arg;

	d->starve = !d->starve;
	if (d->starve) {
		d->eagains++;
		return -EAGAIN;
	}
	d->m->chunk = d->chunk;
	return mem_read(d->m, buf, len);
}

/*
 * A daemon reading a socket feeds the reader as bytes come: each -EAGAIN
 * from the read function is returned to the caller with nothing lost, and
 * calling again resumes. The result is the stream read in one go.
 */
static void reader_resumes_after_eagain(void **state)
{
	const size_t dev = 40 * 512;
	unsigned char good[40 * 512], img[40 * 512];
	static const size_t chunks[] = { 1, 7, 64, 100, 4096 };

	for (int z = 0; z < 2; z++) {
		struct mem m;

		small_stream(&m, z ? TRACK_STREAM_ZLIB : 0);
		memset(good, 0xee, dev);
		assert_int_equal(apply(&m, good, dev, NULL, NULL, NULL, 0), 0);
		for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
			struct drip d = { .m = &m, .chunk = chunks[c] };
			struct track_stream_reader *r;
			struct track_stream_record rec;
			struct track_stream_totals t;
			struct track_stream_info in;
			unsigned int again = 0;
			int ret;

			m.pos = 0;
			memset(img, 0xee, dev);
			assert_int_equal(track_stream_reader_new(drip_read, &d,
								 &r), 0);
			/* Bounded: a reader that fails for good must not
			 * loop here forever. */
			while ((ret = track_stream_read_header(r, &in)) ==
			       -EAGAIN && again < 100000)
				again++;
			assert_int_equal(ret, 0);
			for (;;) {
				ret = track_stream_read_record(r, &rec);
				if (ret == -EAGAIN && again++ < 100000)
					continue;
				if (ret <= 0)
					break;
				if (rec.type == TRACK_STREAM_DATA)
					memcpy(img + rec.first * 512, rec.data,
					       rec.length);
				else
					memset(img + rec.first * 512, 0,
					       rec.length);
			}
			if (ret)
				fail_msg("chunk %zu: %d %s", chunks[c], ret,
					 track_stream_reader_error(r));
			assert_true(again > 0 && again == d.eagains);
			assert_memory_equal(img, good, dev);
			assert_int_equal(track_stream_reader_totals(r, &t), 0);
			assert_int_equal(t.stream_bytes, m.len);
			track_stream_reader_free(r);
		}
		m.chunk = 0;
		free(m.buf);
	}
}

/* Reserved fields of the info are for later versions: must be zero. */
static void writer_refuses_nonzero_reserved_fields(void **state)
{
	struct track_stream_info in = make_info(512, 1 << 20, 0);
	struct track_stream_writer *w;
	struct mem m = { 0 };

	in.reserved[6] = 1;
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w),
			 -EINVAL);
	in.reserved[6] = 0;
	in.reserved0 = 1;
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w),
			 -EINVAL);
	in.reserved0 = 0;
	in.reserved1[1] = 1;
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w),
			 -EINVAL);
	in.reserved1[1] = 0;
	/* an undo id belongs to undo streams only */
	in.undo_id[15] = 1;
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w),
			 -EINVAL);
	assert_int_equal(m.len, 0);
}

/*
 * An undo stream's id is written as 1.1 and read back; a stream without
 * one stays 1.0, byte for byte what a 1.0 writer wrote.
 */
static void undo_id_round_trips_as_version_1_1(void **state)
{
	struct track_stream_info in = make_info(512, 1 << 20, TRACK_STREAM_UNDO);
	struct track_stream_info out;
	struct track_stream_writer *w;
	struct mem m = { 0 };
	unsigned char img[1 << 20];
	unsigned int i;

	for (i = 0; i < sizeof(in.undo_id); i++)
		in.undo_id[i] = 0xa0 + i;
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w), 0);
	assert_int_equal(track_stream_writer_finish(w, NULL), 0);
	track_stream_writer_free(w);
	assert_int_equal(sf_get16(m.buf + SF_H_VMINOR), 1);
	assert_memory_equal(m.buf + SF_H_UNDO_ID, in.undo_id, 16);
	assert_int_equal(apply(&m, img, sizeof(img), &out, NULL, NULL, 0), 0);
	assert_int_equal(out.version_minor, 1);
	assert_memory_equal(out.undo_id, in.undo_id, 16);

	/* without an id: 1.0, and the id reads back as zero */
	memset(in.undo_id, 0, sizeof(in.undo_id));
	free(m.buf);
	memset(&m, 0, sizeof(m));
	assert_int_equal(track_stream_writer_new(&in, mem_write, &m, &w), 0);
	assert_int_equal(track_stream_writer_finish(w, NULL), 0);
	track_stream_writer_free(w);
	assert_int_equal(sf_get16(m.buf + SF_H_VMINOR), 0);
	assert_int_equal(apply(&m, img, sizeof(img), &out, NULL, NULL, 0), 0);
	assert_int_equal(out.version_minor, 0);
	for (i = 0; i < sizeof(out.undo_id); i++)
		assert_int_equal(out.undo_id[i], 0);
	free(m.buf);
}

static void data_after_the_end_record_is_refused(void **state)
{
	unsigned char img[40 * 512];
	char msg[400];
	struct mem m;

	small_stream(&m, 0);
	mem_write(&m, "x", 1);
	assert_int_equal(apply(&m, img, sizeof(img), NULL, NULL, msg,
			       sizeof(msg)), -EBADMSG);
	assert_non_null(strstr(msg, "follows the end record"));
	free(m.buf);
}

/* Each header field wrong, with a checksum that matches. */
static void each_wrong_header_field_is_named(void **state)
{
	static const struct {
		size_t off;
		int width;
		uint64_t value;
		int err;
		const char *what;
	} cases[] = {
		{ SF_H_MAGIC, 1, 'X', -EBADMSG, "not a dsync stream" },
		{ SF_H_VMAJOR, 2, 2, -EPROTONOSUPPORT, "version 2.0" },
		{ SF_H_VMAJOR, 2, 0, -EPROTONOSUPPORT, "version 0.0" },
		{ SF_H_LEN, 4, 100, -EBADMSG, "header length 100" },
		{ SF_H_LEN, 4, 260, -EBADMSG, "header length 260" },
		{ SF_H_FLAGS, 4, 0x10, -EPROTONOSUPPORT, "unknown header flags" },
		{ SF_H_BLOCK, 4, 3000, -EBADMSG, "block size 3000" },
		{ SF_H_BLOCK, 4, 256, -EBADMSG, "block size 256" },
		{ SF_H_BLOCK, 4, 1 << 26, -EBADMSG, "block size 67108864" },
		{ SF_H_BLOCK, 4, 0, -EBADMSG, "block size 0" },
		{ SF_H_DEVSIZE, 8, 0, -EBADMSG, "device size 0" },
		{ SF_H_DEVSIZE, 8, UINT64_MAX, -EBADMSG, "device size" },
		{ SF_H_BASE, 8, 5, -EBADMSG, "base epoch 5" },
		{ SF_H_NEW, 8, 1, -EBADMSG, "base epoch 1 is not before" },
		{ SF_H_SOURCE + 2, 1, '\n', -EBADMSG, "source id" },
		{ SF_H_SOURCE + 20, 1, 'x', -EBADMSG, "source id" },
	};
	unsigned char h[SF_HDR_LEN];
	struct craft c;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		craft_header_fields(h, 4096, 64 * 4096, 0);
		switch (cases[i].width) {
		case 1:
			h[cases[i].off] = cases[i].value;
			break;
		case 2:
			sf_put16(h + cases[i].off, cases[i].value);
			break;
		case 4:
			sf_put32(h + cases[i].off, cases[i].value);
			break;
		default:
			sf_put64(h + cases[i].off, cases[i].value);
		}
		memset(&c, 0, sizeof(c));
		craft_header_raw(&c, h, SF_HDR_LEN);
		craft_end(&c);
		expect_refused(&c, cases[i].err, cases[i].what);
	}
}

static void corrupt_header_checksum_is_refused(void **state)
{
	struct craft c;

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_end(&c);
	c.m.buf[SF_H_DEVSIZE] ^= 1;
	expect_refused(&c, -EBADMSG, "header checksum mismatch");
}

static void newline_translation_is_diagnosed(void **state)
{
	struct craft c;

	memset(&c, 0, sizeof(c));
	mem_write(&c.m, "\x89" "DSYNC\n", 7);
	mem_write(&c.m, "rest of a mangled header", 24);
	expect_refused(&c, -EBADMSG, "CR LF");
}

/* A longer header from a later 1.x writer is read; its tail is skipped. */
static void longer_header_of_a_later_minor_version_is_read(void **state)
{
	unsigned char h[SF_HDR_LEN + 64], img[64 * 4096], blk[4096];
	struct craft c;

	memset(h, 0, sizeof(h));
	craft_header_fields(h, 4096, 64 * 4096, 0);
	sf_put16(h + SF_H_VMINOR, 3);
	sf_put32(h + SF_H_LEN, sizeof(h));
	memset(h + SF_HDR_LEN, 0x5a, 64);
	memset(&c, 0, sizeof(c));
	craft_header_raw(&c, h, sizeof(h));
	memset(blk, 7, sizeof(blk));
	craft_run(&c, SF_T_DATA, 3, 1, blk, 4096);
	craft_end(&c);
	memset(img, 0, sizeof(img));
	assert_int_equal(apply(&c.m, img, sizeof(img), NULL, NULL, NULL, 0),
			 0);
	assert_memory_equal(img + 3 * 4096, blk, 4096);
	free(c.m.buf);
}

static void record_with_no_blocks_is_refused(void **state)
{
	struct craft c;

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_ZERO, 3, 0, NULL, 0);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "covers no blocks");
	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_DATA, 3, 0, NULL, 0);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "covers no blocks");
}

static void record_past_the_end_of_the_device_is_refused(void **state)
{
	unsigned char blk[2 * 4096] = { 1 };
	struct craft c;

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_DATA, 64, 1, blk, 4096);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "past the end of the device");
	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_DATA, 63, 2, blk, 2 * 4096);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "past the end of the device");
	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_ZERO, 60, 5, NULL, 0);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "past the end of the device");
	/* first + count wraps around */
	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_ZERO, 2, UINT64_MAX, NULL, 0);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "past the end of the device");
	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_ZERO, UINT64_MAX, 1, NULL, 0);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "past the end of the device");
}

static void huge_data_record_is_refused_before_reading_it(void **state)
{
	struct craft c;
	unsigned char h[SF_REC_LEN];

	/* a device large enough that the run is inside it */
	craft_start(&c, 4096, 1ull << 40, 0);
	sf_put16(h + SF_R_TYPE, SF_T_DATA);
	sf_put16(h + SF_R_FLAGS, 0);
	sf_put32(h + SF_R_PLEN, UINT32_MAX);
	sf_put64(h + SF_R_SEQ, 0);
	sf_put64(h + SF_R_FIRST, 0);
	sf_put64(h + SF_R_COUNT, 1 << 20);
	sf_put32(h + SF_R_PCRC, 0);
	sf_put32(h + SF_R_HCRC, trk_crc32c(0, h, SF_R_HCRC));
	mem_write(&c.m, h, SF_REC_LEN);
	expect_refused(&c, -EBADMSG, "larger than 8388608 bytes");
}

static void overlapping_or_backward_records_are_refused(void **state)
{
	unsigned char blk[2 * 4096] = { 1 };
	struct craft c;

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_DATA, 10, 2, blk, 2 * 4096);
	craft_run(&c, SF_T_DATA, 11, 1, blk, 4096);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "not after the previous record");
	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_ZERO, 10, 2, NULL, 0);
	craft_run(&c, SF_T_ZERO, 3, 1, NULL, 0);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "not after the previous record");
}

static void lost_or_repeated_records_are_refused(void **state)
{
	unsigned char blk[4096] = { 1 };
	struct craft c;

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_DATA, 1, 1, blk, 4096);
	c.seq++;	/* record 1 lost */
	craft_run(&c, SF_T_DATA, 5, 1, blk, 4096);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "records were lost");
}

static void wrong_payload_length_is_refused(void **state)
{
	unsigned char blk[2 * 4096] = { 1 };
	struct craft c;

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_DATA, 1, 2, blk, 4096);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "payload length 4096");
	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_ZERO, 1, 2, blk, 16);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "has a payload");
	/* the partial last block carries only the bytes inside the device */
	craft_start(&c, 4096, 63 * 4096 + 100, 0);
	craft_run(&c, SF_T_DATA, 63, 1, blk, 4096);
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "payload length 4096");
}

static void payload_checksum_mismatch_names_the_record(void **state)
{
	unsigned char blk[4096] = { 1 };
	struct craft c;

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_DATA, 1, 1, blk, 4096);
	craft_run(&c, SF_T_DATA, 7, 1, blk, 4096);
	craft_end(&c);
	c.m.buf[SF_HDR_LEN + 2 * SF_REC_LEN + 4096 + 100] ^= 0x40;
	expect_refused(&c, -EBADMSG, "offset 4432: record 1 (data, blocks 7-7)"
		       ": payload checksum mismatch");
}

static void deflated_record_in_a_plain_stream_is_refused(void **state)
{
	unsigned char blk[4096] = { 1 };
	struct craft c;

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_record(&c, SF_T_DATA, SF_RF_ZLIB, 0, 1, 1, blk, 100);
	expect_refused(&c, -EBADMSG, "deflated in a stream without");
	craft_start(&c, 4096, 64 * 4096, TRACK_STREAM_ZLIB);
	craft_record(&c, SF_T_DATA, 0x10, 0, 1, 1, blk, 4096);
	expect_refused(&c, -EBADMSG, "unknown flags 0x10");
}

static void deflated_payload_of_the_wrong_size_is_refused(void **state)
{
	unsigned char blk[4096] = { 1 };
	struct craft c;

	/* valid checksum, garbage deflate data */
	craft_start(&c, 4096, 64 * 4096, TRACK_STREAM_ZLIB);
	craft_record(&c, SF_T_DATA, SF_RF_ZLIB, 0, 1, 1, blk, 50);
	expect_refused(&c, -EBADMSG, "does not inflate to 4096 bytes");
}

static void unknown_record_types_are_skipped_only_if_marked(void **state)
{
	unsigned char blk[4096], img[64 * 4096];
	struct craft c;

	memset(blk, 3, sizeof(blk));
	craft_start(&c, 4096, 64 * 4096, 0);
	craft_record(&c, SF_T_SKIPPABLE | 0x42, 0, c.seq++, 0, 0, "note", 4);
	craft_run(&c, SF_T_DATA, 2, 1, blk, 4096);
	craft_end(&c);
	memset(img, 0, sizeof(img));
	assert_int_equal(apply(&c.m, img, sizeof(img), NULL, NULL, NULL, 0),
			 0);
	assert_memory_equal(img + 2 * 4096, blk, 4096);
	free(c.m.buf);

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_record(&c, 0x42, 0, c.seq++, 0, 0, "note", 4);
	craft_end(&c);
	expect_refused(&c, -EPROTONOSUPPORT, "unknown type 0x0042");
}

static void end_record_must_match_the_stream(void **state)
{
	unsigned char blk[4096] = { 1 };
	struct craft c;

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_DATA, 1, 1, blk, 4096);
	c.data_blocks++;
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "counts 2 data blocks, the stream had 1");

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_run(&c, SF_T_DATA, 1, 1, blk, 4096);
	c.digest ^= 1;
	craft_end(&c);
	expect_refused(&c, -EBADMSG, "digest mismatch");

	craft_start(&c, 4096, 64 * 4096, 0);
	craft_record(&c, SF_T_END, 0, 0, 0, 0, blk, 16);
	expect_refused(&c, -EBADMSG, "end record (record 0) is malformed");
}

/* --- the receiver's epoch rule ------------------------------------------ */

static void epoch_rule_accepts_only_what_follows_the_replica(void **state)
{
	struct track_stream_info in = make_info(4096, 1 << 20, 0);

	in.base_epoch = 4;
	in.new_epoch = 7;
	/* base <= last < new */
	assert_int_equal(track_stream_check_epoch(&in, "test-source", 4), 0);
	assert_int_equal(track_stream_check_epoch(&in, "test-source", 6), 0);
	/* a superset (an aborted sync re-sent) */
	assert_int_equal(track_stream_check_epoch(&in, "test-source", 5), 0);
	/* a gap */
	assert_int_equal(track_stream_check_epoch(&in, "test-source", 3),
			 -ERANGE);
	/* old or replayed */
	assert_int_equal(track_stream_check_epoch(&in, "test-source", 7),
			 -ESTALE);
	assert_int_equal(track_stream_check_epoch(&in, "test-source", 9),
			 -ESTALE);
	/* another source */
	assert_int_equal(track_stream_check_epoch(&in, "other", 4), -EXDEV);
	/* full streams follow anything from the same source */
	in.flags = TRACK_STREAM_FULL;
	assert_int_equal(track_stream_check_epoch(&in, "test-source", 100), 0);
	assert_int_equal(track_stream_check_epoch(&in, "test-source", 0), 0);
	assert_int_equal(track_stream_check_epoch(&in, "other", 0), -EXDEV);
	/* an unversioned incremental stream proves nothing */
	in.flags = 0;
	in.base_epoch = in.new_epoch = 0;
	assert_int_equal(track_stream_check_epoch(&in, "test-source", 0),
			 -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crc32c_matches_reference_vectors),
		cmocka_unit_test(crc32c_instruction_and_tables_agree),
		cmocka_unit_test(random_extents_round_trip_exactly),
		cmocka_unit_test(plain_stream_bytes_stay_the_same),
		cmocka_unit_test(zero_blocks_travel_as_zero_runs),
		cmocka_unit_test(compressed_stream_is_smaller_and_round_trips),
		cmocka_unit_test(writer_refuses_blocks_out_of_order_or_outside),
		cmocka_unit_test(writer_refuses_a_header_readers_would_refuse),
		cmocka_unit_test(every_flipped_bit_is_detected),
		cmocka_unit_test(truncation_anywhere_is_detected),
		cmocka_unit_test(reader_resumes_after_eagain),
		cmocka_unit_test(writer_refuses_nonzero_reserved_fields),
		cmocka_unit_test(undo_id_round_trips_as_version_1_1),
		cmocka_unit_test(data_after_the_end_record_is_refused),
		cmocka_unit_test(each_wrong_header_field_is_named),
		cmocka_unit_test(corrupt_header_checksum_is_refused),
		cmocka_unit_test(newline_translation_is_diagnosed),
		cmocka_unit_test(longer_header_of_a_later_minor_version_is_read),
		cmocka_unit_test(record_with_no_blocks_is_refused),
		cmocka_unit_test(record_past_the_end_of_the_device_is_refused),
		cmocka_unit_test(huge_data_record_is_refused_before_reading_it),
		cmocka_unit_test(overlapping_or_backward_records_are_refused),
		cmocka_unit_test(lost_or_repeated_records_are_refused),
		cmocka_unit_test(wrong_payload_length_is_refused),
		cmocka_unit_test(payload_checksum_mismatch_names_the_record),
		cmocka_unit_test(deflated_record_in_a_plain_stream_is_refused),
		cmocka_unit_test(deflated_payload_of_the_wrong_size_is_refused),
		cmocka_unit_test(unknown_record_types_are_skipped_only_if_marked),
		cmocka_unit_test(end_record_must_match_the_stream),
		cmocka_unit_test(epoch_rule_accepts_only_what_follows_the_replica),
	};

#ifdef TEST_SANITIZED
	/* Under ASan it takes minutes; the fuzzers cover it (make fuzz). */
	cmocka_set_skip_filter("every_flipped_bit_is_detected");
#endif
	return cmocka_run_group_tests_name("stream", tests, NULL, NULL);
}
