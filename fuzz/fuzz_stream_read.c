// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libFuzzer target: the stream reader on any input. Built with
 * -DTRACK_FUZZ_NO_CRC, so the checksums do not hide the parser. The last
 * byte (still part of the stream) sets the largest read the input function
 * returns, so that short reads at every boundary are exercised too.
 *
 * What must hold: no crash, no sanitizer report, no hang; every record the
 * reader hands out lies inside the device, in order, with a payload of the
 * length it says.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <libtrack.h>

struct in {
	const uint8_t *p;
	size_t left;
	size_t chunk;
};

static ssize_t in_read(void *arg, void *buf, size_t len)
{
	struct in *in = arg;

	if (len > in->chunk)
		len = in->chunk;
	if (len > in->left)
		len = in->left;
	memcpy(buf, in->p, len);
	in->p += len;
	in->left -= len;
	return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct track_stream_reader *r;
	struct track_stream_record rec;
	struct track_stream_totals t;
	struct track_stream_info info;
	struct in in;
	uint64_t next = 0, end;
	volatile uint8_t sink = 0;
	int ret;

	if (!size)
		return 0;
	in.chunk = data[size - 1] ? data[size - 1] * 97u : 1u << 20;
	in.p = data;
	in.left = size;
	if (track_stream_reader_new(in_read, &in, &r))
		abort();
	if (track_stream_read_header(r, &info))
		goto out;
	while ((ret = track_stream_read_record(r, &rec)) == 1) {
		if (!rec.count || rec.first < next)
			abort();	/* out of order or empty */
		end = rec.first + rec.count;
		if (end < rec.first ||
		    rec.first * info.block_size >= info.device_size ||
		    rec.first * info.block_size + rec.length >
		    info.device_size)
			abort();	/* outside the device */
		if (rec.type == TRACK_STREAM_DATA && rec.length)
			sink ^= ((const uint8_t *)rec.data)[rec.length - 1];
		next = end;
	}
	if (!ret)
		track_stream_reader_totals(r, &t);
	else
		(void)track_stream_reader_error(r);
out:
	track_stream_reader_free(r);
	(void)sink;
	return 0;
}
