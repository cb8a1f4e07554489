// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * How fast the dsync stream is on one core: CRC32C (instruction and
 * tables), the writer and the reader, plain and deflated, on random
 * (incompressible) and on text-like data. The stream goes to and comes
 * from memory, so only the CPU cost is measured.
 *
 *   bench/stream_speed [MiB]      (default 512)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libtrack.h>
#include "stream_format.h"

struct mem {
	unsigned char *buf;
	size_t len, cap, pos;
};

static ssize_t mem_write(void *arg, const void *buf, size_t len)
{
	struct mem *m = arg;

	if (m->len + len > m->cap)
		return -1;
	memcpy(m->buf + m->len, buf, len);
	m->len += len;
	return len;
}

static ssize_t mem_read(void *arg, void *buf, size_t len)
{
	struct mem *m = arg;
	size_t n = m->len - m->pos < len ? m->len - m->pos : len;

	memcpy(buf, m->buf + m->pos, n);
	m->pos += n;
	return n;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void run(const char *what, unsigned char *data, size_t len,
		uint32_t flags, struct mem *m)
{
	struct track_stream_info in = { .block_size = 4096,
					.device_size = len, .flags = flags };
	struct track_stream_writer *w;
	struct track_stream_reader *r;
	struct track_stream_record rec;
	struct track_stream_info got;
	double t0, tw, tr;
	uint64_t sum = 0;
	int ret;

	m->len = m->pos = 0;
	t0 = now();
	if (track_stream_writer_new(&in, mem_write, m, &w) ||
	    track_stream_write_data(w, 0, len / 4096, data) ||
	    track_stream_writer_finish(w, NULL))
		exit(1);
	tw = now() - t0;
	track_stream_writer_free(w);
	t0 = now();
	if (track_stream_reader_new(mem_read, m, &r) ||
	    track_stream_read_header(r, &got))
		exit(1);
	while ((ret = track_stream_read_record(r, &rec)) == 1)
		sum += rec.length;
	tr = now() - t0;
	if (ret || sum != len) {
		fprintf(stderr, "%s\n", track_stream_reader_error(r));
		exit(1);
	}
	track_stream_reader_free(r);
	printf("%-34s write %7.0f MiB/s   read %7.0f MiB/s   (stream %3.0f%%)\n",
	       what, len / tw / 1048576, len / tr / 1048576,
	       100.0 * m->len / len);
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
	size_t len = mib << 20, i;
	unsigned char *data = malloc(len), *text = malloc(len);
	struct mem m = { .cap = len + len / 8 + (1 << 20) };
	uint64_t x = 88172645463325252ull;
	uint32_t c = 0;
	double t0;

	m.buf = malloc(m.cap);
	if (!data || !text || !m.buf)
		return 1;
	memset(m.buf, 1, m.cap);	/* fault the pages in before timing */
	for (i = 0; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(data + i, &x, 8);
	}
	for (i = 0; i < len; i++)
		text[i] = "the quick brown fox jumps over a lazy dog. "
			  [(i * 7 + (data[i] & 3)) % 43];

	printf("one core, %zu MiB, 4 KiB blocks, 1 MiB records\n", mib);
	t0 = now();
	c = trk_crc32c(c, data, len);
	printf("%-34s %7.0f MiB/s\n", trk_crc32c_hw() ?
	       "crc32c (SSE4.2 instruction)" : "crc32c (tables)",
	       len / (now() - t0) / 1048576);
	t0 = now();
	c ^= trk_crc32c_sw(0, data, len);
	printf("%-34s %7.0f MiB/s\n", "crc32c (slicing-by-8 tables)",
	       len / (now() - t0) / 1048576);
	run("plain, random data", data, len, 0, &m);
	run("deflate 1, random data", data, len, TRACK_STREAM_ZLIB, &m);
	run("plain, text", text, len, 0, &m);
	run("deflate 1, text", text, len, TRACK_STREAM_ZLIB, &m);
	memset(data, 0, len);
	run("plain, zero blocks", data, len, 0, &m);
	return c == 0x12345678;	/* keep the CRCs from being optimised out */
}
