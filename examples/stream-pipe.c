// SPDX-License-Identifier: MIT
/*
 * The dsync stream without a device: write a file as a full stream, or
 * read a stream from a non-blocking descriptor in an event loop.
 *
 *   stream-pipe write IMAGE >STREAM    IMAGE as a full stream (4 KiB blocks)
 *   stream-pipe read <STREAM           check it, print its records
 *   cc -o stream-pipe stream-pipe.c $(pkg-config --cflags --libs libtrack)
 *
 * The reader is fed from poll(2): its read function returns -EAGAIN when
 * the descriptor has nothing yet, the reader keeps what it has and returns
 * -EAGAIN, and the loop polls again. No thread, nothing lost. Exit status
 * 1 for a corrupt stream, 3 for a truncated one (transfer it again).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libtrack.h>

static ssize_t nb_read(void *arg, void *buf, size_t len)
{
	ssize_t n = read(*(int *)arg, buf, len);

	return n < 0 ? -errno : n;	/* -EAGAIN: nothing yet */
}

/* Call FN until it is not -EAGAIN, polling FD in between. */
#define RETRY(fd, call) ({						\
	int r_;								\
	while ((r_ = (call)) == -EAGAIN) {				\
		struct pollfd p_ = { .fd = (fd), .events = POLLIN };	\
		poll(&p_, 1, -1);					\
	}								\
	r_; })

static int do_read(void)
{
	struct track_stream_reader *r;
	struct track_stream_record rec;
	struct track_stream_totals t;
	struct track_stream_info in;
	int fd = 0, ret;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	ret = track_stream_reader_new(nb_read, &fd, &r);
	if (ret)
		return 1;
	ret = RETRY(fd, track_stream_read_header(r, &in));
	if (!ret) {
		printf("stream from \"%s\", %u-byte blocks, %llu bytes\n",
		       in.source_id, in.block_size,
		       (unsigned long long)in.device_size);
		while ((ret = RETRY(fd, track_stream_read_record(r, &rec))) == 1)
			printf("%s blocks %llu-%llu\n",
			       rec.type == TRACK_STREAM_DATA ? "data" : "zero",
			       (unsigned long long)rec.first,
			       (unsigned long long)(rec.first + rec.count - 1));
	}
	if (ret) {
		fprintf(stderr, "stream-pipe: %s (%s)\n",
			track_stream_reader_error(r),
			ret == -ENODATA ? "truncated: transfer it again" :
			"corrupt: rejected");
		track_stream_reader_free(r);
		return ret == -ENODATA ? 3 : 1;
	}
	track_stream_reader_totals(r, &t);
	printf("complete: %llu records, %llu data blocks, %llu zero blocks\n",
	       (unsigned long long)t.records,
	       (unsigned long long)t.data_blocks,
	       (unsigned long long)t.zero_blocks);
	track_stream_reader_free(r);
	return 0;
}

static int do_write(const char *image)
{
	struct track_stream_info in = { .flags = TRACK_STREAM_FULL,
					.block_size = 4096 };
	struct track_stream_writer *w;
	static char buf[4096];
	uint64_t b = 0;
	struct stat st;
	ssize_t n;
	int fd = open(image, O_RDONLY), ret;

	if (fd < 0 || fstat(fd, &st) || !st.st_size) {
		fprintf(stderr, "stream-pipe: %s: not a readable, non-empty "
			"file\n", image);
		return 1;
	}
	in.device_size = (uint64_t)st.st_size;
	snprintf(in.source_id, sizeof(in.source_id), "stream-pipe");
	ret = track_stream_writer_open(1, &in, &w);
	while (!ret && (n = read(fd, buf, sizeof(buf))) > 0)
		ret = track_stream_write_data(w, b++, 1, buf);
	if (!ret)
		ret = track_stream_writer_finish(w, NULL);
	track_stream_writer_free(w);
	close(fd);
	if (ret)
		fprintf(stderr, "stream-pipe: %s\n", strerror(-ret));
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "write"))
		return do_write(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "read"))
		return do_read();
	fprintf(stderr, "usage: stream-pipe write IMAGE >STREAM\n"
		"       stream-pipe read <STREAM\n");
	return 2;
}
