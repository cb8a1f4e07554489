// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libtrack(7) THREADS: different handles may be used at the same time from
 * different threads. Built with ThreadSanitizer by tests/threads.sh: four
 * threads start at once, each with its own watcher, stream writer and
 * reader (the CRC32C tables are set up by whichever thread comes first),
 * extent set and batch policy; any data race on shared state fails.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libtrack.h>

struct mem {
	unsigned char buf[1 << 16];
	size_t len, pos;
};

static ssize_t mem_write(void *arg, const void *buf, size_t len)
{
	struct mem *m = arg;

	if (m->len + len > sizeof(m->buf))
		return -ENOSPC;
	memcpy(m->buf + m->len, buf, len);
	m->len += len;
	return (ssize_t)len;
}

static ssize_t mem_read(void *arg, void *buf, size_t len)
{
	struct mem *m = arg;
	size_t n = m->len - m->pos < len ? m->len - m->pos : len;

	memcpy(buf, m->buf + m->pos, n);
	m->pos += n;
	return (ssize_t)n;
}

static pthread_barrier_t start;

#define CHECK(x) do { if (!(x)) { fprintf(stderr, "%s:%d: %s\n",	\
	__FILE__, __LINE__, #x); return (void *)1; } } while (0)

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	struct track_stream_info in = { .block_size = 512,
					.device_size = 64 * 512 };
	struct track_stream_writer *w;
	struct track_stream_reader *r;
	struct track_stream_record rec;
	struct track_batch_params bp;
	struct track_extents *e;
	struct track_watch *tw;
	struct track_batch *b;
	struct track_event ev;
	static __thread struct mem m;
	char dir[64], cmd[160];
	unsigned char blk[512];
	int n, records = 0;

	snprintf(in.source_id, sizeof(in.source_id), "thread-%d", id);
	snprintf(dir, sizeof(dir), "/tmp/libtrack-threads.XXXXXX");
	CHECK(mkdtemp(dir));
	memset(blk, id + 1, sizeof(blk));
	pthread_barrier_wait(&start);

	/* The stream: the first CRC of each thread races for the tables. */
	CHECK(track_stream_writer_new(&in, mem_write, &m, &w) == 0);
	for (int i = 0; i < 64; i += 2)
		CHECK(track_stream_write_data(w, (uint64_t)i, 1, blk) == 0);
	CHECK(track_stream_writer_finish(w, NULL) == 0);
	track_stream_writer_free(w);
	CHECK(track_stream_reader_new(mem_read, &m, &r) == 0);
	CHECK(track_stream_read_header(r, &in) == 0);
	while ((n = track_stream_read_record(r, &rec)) == 1)
		records++;
	CHECK(n == 0 && records > 0);
	track_stream_reader_free(r);

	/* A watcher. */
	CHECK(track_watch_new(0, &tw) == 0);
	CHECK(track_watch_add(tw, dir) == 0);
	snprintf(cmd, sizeof(cmd), "touch %s/f", dir);
	CHECK(system(cmd) == 0);
	CHECK(track_watch_next(tw, &ev, 2000) == 1);
	CHECK(ev.kind == TRACK_EVENT_CREATE);
	track_watch_free(tw);

	/* An extent set and a batch policy. */
	CHECK(track_extents_new(0, &e) == 0);
	for (int i = 0; i < 100; i++)
		CHECK(track_extents_add(e, (uint64_t)i * 10, 5) == 0);
	CHECK(track_extents_count(e) == 100);
	track_extents_free(e);
	track_batch_params_init(&bp);
	CHECK(track_batch_new(&bp, &b) == 0);
	CHECK(track_batch_add_data(b, blk, sizeof(blk)) > 0);
	track_batch_free(b);

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0);
	return NULL;
}

int main(void)
{
	pthread_t t[4];
	void *ret;
	int failed = 0;

	pthread_barrier_init(&start, NULL, 4);
	for (long i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, (void *)i);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &ret);
		failed |= ret != NULL;
	}
	puts(failed ? "not ok 1 - four threads, four sets of handles" :
	     "ok 1 - four threads, four sets of handles");
	puts("1..1");
	return failed;
}
