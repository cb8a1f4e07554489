// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The dsync engine as a library: an extraction of a sparse file reads back
 * as the file (holes as zero runs), its errors name the file, the progress
 * callback can stop it, an aborted stream reads as truncated, and it reads
 * right where io_uring is refused (a container's seccomp filter); an apply
 * refuses what it must with -errno and a message, applies a stream from
 * memory, and checks its parameters.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <cmocka.h>

#include <libtrack.h>

#define BS	4096
#define NBLK	64

static char dir[64];

struct buf {
	unsigned char *p;
	size_t len, cap, pos;
};

static ssize_t buf_write(void *arg, const void *data, size_t len)
{
	struct buf *b = arg;

	if (b->len + len > b->cap) {
		b->cap = (b->len + len) * 2;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	return len;
}

static ssize_t buf_read(void *arg, void *data, size_t len)
{
	struct buf *b = arg;

	if (len > b->len - b->pos)
		len = b->len - b->pos;
	if (!len)
		return 0;	/* B->p may still be NULL */
	memcpy(data, b->p + b->pos, len);
	b->pos += len;
	return len;
}

static void path(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

/* A file of NBLK blocks: even blocks data (byte i of block b is b ^ i),
 * odd blocks holes. */
static void make_sparse(const char *p, unsigned char *image)
{
	unsigned char blk[BS];
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	memset(image, 0, NBLK * BS);
	assert_int_equal(ftruncate(fd, NBLK * BS), 0);
	for (int b = 0; b < NBLK; b += 2) {
		for (int i = 0; i < BS; i++)
			blk[i] = (unsigned char)(b ^ i) | 1;
		memcpy(image + b * BS, blk, BS);
		assert_int_equal(pwrite(fd, blk, BS, (off_t)b * BS), BS);
	}
	close(fd);
}

/* Extract blocks [first, first + count) of P into B. */
static int extract(const char *p, struct buf *b, uint64_t first,
		   uint64_t count, track_extract_progress_fn fn, void *arg)
{
	struct track_stream_info info = { .block_size = BS };
	struct track_stream_writer *w;
	struct track_extract *x;
	int ret;

	assert_int_equal(track_extract_new(p, BS, &x), 0);
	info.device_size = track_extract_size(x);
	info.new_epoch = 1;
	info.flags = TRACK_STREAM_FULL;
	strcpy(info.source_id, "test");
	assert_int_equal(track_stream_writer_new(&info, buf_write, b, &w), 0);
	assert_int_equal(track_extract_set_progress(x, fn, arg), 0);
	assert_int_equal(track_extract_start(x, w), 0);
	ret = track_extract_add(x, first, count);
	ret = ret ? track_extract_abort(x) : track_extract_finish(x, NULL);
	track_extract_free(x);
	track_stream_writer_free(w);
	return ret;
}

static void a_sparse_file_reads_back_with_holes_as_zero_runs(void **state)
{
	static unsigned char image[NBLK * BS], back[NBLK * BS];
	struct track_stream_reader *r;
	struct track_stream_record rec;
	struct track_stream_info info;
	struct buf b = { 0 };
	char p[128];
	uint64_t zero = 0;
	int ret;

	path(p, sizeof(p), "sparse");
	make_sparse(p, image);
	assert_int_equal(extract(p, &b, 0, NBLK, NULL, NULL), 0);
	assert_int_equal(track_stream_reader_new(buf_read, &b, &r), 0);
	assert_int_equal(track_stream_read_header(r, &info), 0);
	assert_int_equal(info.device_size, NBLK * BS);
	memset(back, 0xee, sizeof(back));
	while ((ret = track_stream_read_record(r, &rec)) == 1) {
		if (rec.type == TRACK_STREAM_DATA)
			memcpy(back + rec.first * BS, rec.data, rec.length);
		else
			memset(back + rec.first * BS, 0, rec.length);
		if (rec.type != TRACK_STREAM_DATA)
			zero += rec.count;
	}
	assert_int_equal(ret, 0);
	assert_memory_equal(back, image, sizeof(image));
	/* tmpfs and every common file system report the holes */
	assert_int_equal(zero, NBLK / 2);
	track_stream_reader_free(r);
	free(b.p);
}

/* Progress must only grow, and end at the bytes sent. */
static int count_progress(void *arg, uint64_t bytes, int final)
{
	uint64_t *last = arg;

	assert_true(bytes >= last[0]);
	last[0] = bytes;
	last[1]++;
	last[2] = final;
	return 0;
}

/* 24 MiB in runs with gaps: many 4 MiB windows through the four-window
 * ring between the reading and the writing thread (ThreadSanitizer runs
 * this, tests/threads.sh). */
static void many_windows_arrive_in_order(void **state)
{
	const uint64_t nblk = 6144;
	struct track_stream_info info = { .block_size = BS };
	struct track_stream_totals t;
	struct track_stream_reader *r;
	struct track_stream_writer *w;
	struct track_stream_record rec;
	struct track_extract *x;
	struct buf b = { 0 };
	unsigned char *img, *back;
	uint64_t sent = 0, got = 0, prog[3] = { 0 };
	char p[128];
	int fd, ret;

	path(p, sizeof(p), "big");
	img = malloc(nblk * BS);
	back = calloc(nblk, BS);
	assert_non_null(img);
	assert_non_null(back);
	for (uint64_t i = 0; i < nblk * BS; i++)
		img[i] = (unsigned char)(i * 2654435761u >> 13) | 1;
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(write(fd, img, nblk * BS), (ssize_t)(nblk * BS));
	close(fd);

	assert_int_equal(track_extract_new(p, BS, &x), 0);
	info.device_size = track_extract_size(x);
	assert_int_equal(track_stream_writer_new(&info, buf_write, &b, &w), 0);
	assert_int_equal(track_extract_set_progress(x, count_progress, prog), 0);
	assert_int_equal(track_extract_start(x, w), 0);
	assert_int_equal(track_extract_set_progress(x, NULL, NULL), -EBUSY);
	/* runs of 1 to 300 blocks, gaps of 0 to 40 (read through or not) */
	for (uint64_t first = 0, k = 1; first < nblk; k++) {
		uint64_t count = 1 + k * 37 % 300;

		if (count > nblk - first)
			count = nblk - first;
		assert_int_equal(track_extract_add(x, first, count), 0);
		sent += count;
		first += count + k * 11 % 41;
	}
	assert_int_equal(track_extract_finish(x, &t), 0);
	assert_int_equal(t.data_blocks, sent);
	assert_int_equal(prog[0], sent * BS);
	assert_true(prog[1] > 6);	/* a call per window, and the last */
	assert_int_equal(prog[2], 1);
	track_extract_free(x);
	track_stream_writer_free(w);

	assert_int_equal(track_stream_reader_new(buf_read, &b, &r), 0);
	assert_int_equal(track_stream_read_header(r, &info), 0);
	while ((ret = track_stream_read_record(r, &rec)) == 1) {
		assert_int_equal(rec.type, TRACK_STREAM_DATA);
		assert_memory_equal(rec.data, img + rec.first * BS,
				    rec.length);
		got += rec.count;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(got, sent);
	track_stream_reader_free(r);
	free(img);
	free(back);
	free(b.p);
}

/* Blocks far apart (more extents than one window holds, each read by
 * its own request, all of a window's requests in flight at once) and a
 * file that ends inside its last block: every block comes back as it is
 * on the disk, the last one cut where the file ends. */
#define SC_NBLK	8192
#define SC_TAIL	100
#define SC_SIZE	((SC_NBLK - 1) * BS + SC_TAIL)

/* A file of SC_SIZE bytes, the last block short, at P; its image in IMG. */
static unsigned char *make_scattered(const char *p)
{
	unsigned char *img = calloc(SC_NBLK, BS);
	int fd;

	assert_non_null(img);
	for (uint64_t i = 0; i < SC_SIZE; i++)
		img[i] = (unsigned char)(i * 40503u >> 7) | 1;
	fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(write(fd, img, SC_SIZE), (ssize_t)SC_SIZE);
	close(fd);
	return img;
}

/*
 * Extract 600 lone blocks 13 apart (more than a window's 256 extents) and
 * the short last block into B. No cmocka assertion: it runs on threads
 * other than cmocka's. Returns the blocks sent, or -errno.
 */
static int64_t extract_scattered(const char *p, struct buf *b)
{
	struct track_stream_info info = { .block_size = BS };
	struct track_stream_writer *w = NULL;
	struct track_stream_totals t;
	struct track_extract *x;
	int64_t sent = 0;
	uint64_t first;
	int ret;

	ret = track_extract_new(p, BS, &x);
	if (ret)
		goto out;
	if (track_extract_size(x) != SC_SIZE ||
	    track_extract_block_count(x) != SC_NBLK) {
		ret = -EBADMSG;
		goto out;
	}
	info.device_size = SC_SIZE;
	ret = track_stream_writer_new(&info, buf_write, b, &w);
	if (!ret)
		ret = track_extract_start(x, w);
	for (first = 5; !ret && first < SC_NBLK - 1; first += 13, sent++)
		ret = track_extract_add(x, first, 1);
	if (!ret)
		ret = track_extract_add(x, SC_NBLK - 1, 1);
	sent++;
	if (!ret)
		ret = track_extract_finish(x, &t);
	if (!ret && t.data_blocks != (uint64_t)sent)
		ret = -EBADMSG;
out:
	track_extract_free(x);
	track_stream_writer_free(w);
	return ret ? ret : sent;
}

/* B holds exactly SENT blocks of IMG, the last one short. */
static void check_scattered(struct buf *b, const unsigned char *img,
			    int64_t sent)
{
	struct track_stream_info info;
	struct track_stream_reader *r;
	struct track_stream_record rec;
	int64_t got = 0;
	int ret;

	assert_int_equal(track_stream_reader_new(buf_read, b, &r), 0);
	assert_int_equal(track_stream_read_header(r, &info), 0);
	while ((ret = track_stream_read_record(r, &rec)) == 1) {
		assert_int_equal(rec.type, TRACK_STREAM_DATA);
		assert_true(rec.first * BS + rec.length <= SC_SIZE);
		assert_memory_equal(rec.data, img + rec.first * BS,
				    rec.length);
		if (rec.first + rec.count == SC_NBLK)
			assert_int_equal(rec.length % BS, SC_TAIL);
		got += rec.count;
	}
	assert_int_equal(ret, 0);
	assert_int_equal(got, sent);
	track_stream_reader_free(r);
}

static void scattered_blocks_and_a_short_last_block_read_back(void **state)
{
	struct buf b = { 0 };
	unsigned char *img;
	int64_t sent;
	char p[128];

	(void)state;
	path(p, sizeof(p), "scattered");
	img = make_scattered(p);
	sent = extract_scattered(p, &b);
	assert_true(sent > 0);
	check_scattered(&b, img, sent);
	free(img);
	free(b.p);
}

struct no_uring {
	const char *path;
	struct buf *b;
	int setup_err;		/* what io_uring_setup() gave the thread */
	int64_t sent;
};

/* Refuse io_uring_setup() to this thread and the threads it starts, as a
 * container's seccomp profile does, then extract. */
static void *no_uring_main(void *arg)
{
	struct no_uring *nu = arg;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = 4, .filter = f };
	struct io_uring_params params = { 0 };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
		nu->setup_err = -errno;
		return NULL;
	}
	if (syscall(__NR_io_uring_setup, 4, &params) < 0)
		nu->setup_err = errno;
	nu->sent = extract_scattered(nu->path, nu->b);
	return NULL;
}

static void scattered_blocks_read_back_without_io_uring(void **state)
{
	struct buf b = { 0 };
	struct no_uring nu = { .b = &b };
	unsigned char *img;
	pthread_t thr;
	char p[128];

	(void)state;
	path(p, sizeof(p), "scattered-no-uring");
	img = make_scattered(p);
	nu.path = p;
	assert_int_equal(pthread_create(&thr, NULL, no_uring_main, &nu), 0);
	assert_int_equal(pthread_join(thr, NULL), 0);
	/* the filter was in place: io_uring refused, as in a container */
	assert_int_equal(nu.setup_err, ENOSYS);
	assert_true(nu.sent > 0);
	check_scattered(&b, img, nu.sent);
	free(img);
	free(b.p);
}

static void extraction_errors_name_the_file(void **state)
{
	struct track_extract *x;
	char p[128];
	int fd;

	path(p, sizeof(p), "missing");
	assert_int_equal(track_extract_new(p, BS, &x), -ENOENT);
	assert_non_null(strstr(track_extract_error(x), "cannot open"));
	assert_non_null(strstr(track_extract_error(x), p));
	track_extract_free(x);

	path(p, sizeof(p), "empty");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	close(fd);
	assert_int_equal(track_extract_new(p, BS, &x), -EINVAL);
	assert_non_null(strstr(track_extract_error(x), "is empty"));
	track_extract_free(x);

	assert_int_equal(track_extract_new(p, 0, &x), -EINVAL);
	assert_null(x);
}

static void runs_out_of_order_are_refused(void **state)
{
	static unsigned char image[NBLK * BS];
	struct track_stream_info info = { .block_size = BS };
	struct track_stream_writer *w;
	struct track_extract *x;
	struct buf b = { 0 };
	char p[128];

	path(p, sizeof(p), "order");
	make_sparse(p, image);
	assert_int_equal(track_extract_new(p, BS, &x), 0);
	assert_int_equal(track_extract_block_count(x), NBLK);
	info.device_size = track_extract_size(x);
	assert_int_equal(track_stream_writer_new(&info, buf_write, &b, &w), 0);
	assert_int_equal(track_extract_start(x, w), 0);
	assert_int_equal(track_extract_start(x, w), -EBUSY);
	assert_int_equal(track_extract_add(x, 10, 2), 0);
	assert_int_equal(track_extract_add(x, 5, 1), -EINVAL);
	assert_non_null(strstr(track_extract_error(x), "out of order"));
	/* the first error sticks */
	assert_int_equal(track_extract_add(x, 20, 1), -EINVAL);
	assert_int_equal(track_extract_finish(x, NULL), -EINVAL);
	track_extract_free(x);
	track_stream_writer_free(w);
	free(b.p);
}

static int stop_at_once(void *arg, uint64_t bytes, int final)
{
	(*(int *)arg)++;
	return final ? 0 : -EINTR;
}

static void progress_can_stop_and_abort_leaves_a_cut_stream(void **state)
{
	static unsigned char image[NBLK * BS];
	struct track_stream_reader *r;
	struct track_stream_record rec;
	struct track_stream_info info;
	struct buf b = { 0 };
	char p[128];
	int calls = 0, ret;

	path(p, sizeof(p), "stop");
	make_sparse(p, image);
	/* 4 MiB windows: 64 blocks fill one, submitted by finish */
	assert_int_equal(extract(p, &b, 0, NBLK, stop_at_once, &calls),
			 -EINTR);
	assert_int_equal(calls, 1);
	assert_int_equal(track_stream_reader_new(buf_read, &b, &r), 0);
	/* cut after the header, or before it was flushed: truncated
	 * either way, not corrupt */
	ret = track_stream_read_header(r, &info);
	while (!ret && (ret = track_stream_read_record(r, &rec)) == 1)
		;
	assert_int_equal(ret, -ENODATA);
	track_stream_reader_free(r);
	free(b.p);
}

/* --- applying ------------------------------------------------------------ */

struct log {
	char all[4096];
};

static void log_cb(void *arg, const char *msg)
{
	struct log *l = arg;

	strncat(l->all, msg, sizeof(l->all) - strlen(l->all) - 2);
	strcat(l->all, "\n");
}

static void apply_params_are_checked(void **state)
{
	struct track_apply_params p;
	struct track_apply *a;

	track_apply_params_init(&p);
	assert_int_equal(track_apply_new(&p, &a), -EINVAL);	/* no target */
	p.target = "/nonexistent";
	p.reserved[3] = 1;
	assert_int_equal(track_apply_new(&p, &a), -EINVAL);
	p.reserved[3] = 0;
	p.flags = 0x80;
	assert_int_equal(track_apply_new(&p, &a), -EINVAL);
	p.flags = TRACK_APPLY_VERIFY;
	p.undo_path = "/tmp/u";
	assert_int_equal(track_apply_new(&p, &a), -EINVAL);
	p.undo_path = NULL;
	assert_int_equal(track_apply_new(&p, &a), 0);
	assert_int_equal(track_apply_get_info(a, NULL, NULL, NULL), -ENODATA);
	track_apply_free(a);
	track_apply_free(NULL);
}

static void a_stream_applies_once_other_targets_and_sources_are_refused(void **state)
{
	static unsigned char image[NBLK * BS], got[NBLK * BS];
	struct track_apply_params p;
	struct track_stream_totals t;
	struct track_apply *a;
	struct log l = { "" };
	struct buf b = { 0 };
	char src[128], tgt[128], st[128];
	uint64_t runs;
	int fd;

	path(src, sizeof(src), "asrc");
	path(tgt, sizeof(tgt), "atgt");
	path(st, sizeof(st), "astate");
	make_sparse(src, image);
	assert_int_equal(extract(src, &b, 0, NBLK, NULL, NULL), 0);

	/* a target of another size: refused, untouched, explained */
	fd = open(tgt, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_int_equal(ftruncate(fd, BS), 0);
	close(fd);
	track_apply_params_init(&p);
	p.target = tgt;
	p.log = log_cb;
	p.log_arg = &l;
	assert_int_equal(track_apply_new(&p, &a), 0);
	assert_int_equal(track_apply_run(a, buf_read, &b, "memory"),
			 -EMEDIUMTYPE);
	assert_non_null(strstr(l.all, "wrong target?"));
	track_apply_free(a);

	/* a new file, with a state file */
	unlink(tgt);
	b.pos = 0;
	p.state_path = st;
	assert_int_equal(track_apply_new(&p, &a), 0);
	assert_int_equal(track_apply_run(a, buf_read, &b, "memory"), 0);
	assert_int_equal(track_apply_run(a, buf_read, &b, "memory"), -EBUSY);
	assert_int_equal(track_apply_get_info(a, NULL, &t, &runs), 0);
	assert_int_equal(t.data_blocks, NBLK / 2);
	assert_true(runs > 0);
	track_apply_free(a);
	fd = open(tgt, O_RDONLY);
	assert_int_equal(read(fd, got, sizeof(got)), sizeof(got));
	close(fd);
	assert_memory_equal(got, image, sizeof(image));

	/* a state file naming another source: refused */
	fd = open(st, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_true(dprintf(fd, "source-id other\nepoch 1\nblock-size %d\n"
			    "device-size %d\n", BS, NBLK * BS) > 0);
	close(fd);
	b.pos = 0;
	l.all[0] = 0;
	assert_int_equal(track_apply_new(&p, &a), 0);
	assert_int_equal(track_apply_run(a, buf_read, &b, "memory"), -EPERM);
	assert_non_null(strstr(l.all, "refusing the stream: the stream comes "
				"from \"test\", but"));
	track_apply_free(a);
	free(b.p);
}

static int setup(void **state)
{
	snprintf(dir, sizeof(dir), "%s/test_dsync.XXXXXX",
		 access("/var/tmp", W_OK) ? "/tmp" : "/var/tmp");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_sparse_file_reads_back_with_holes_as_zero_runs),
		cmocka_unit_test(many_windows_arrive_in_order),
		cmocka_unit_test(scattered_blocks_and_a_short_last_block_read_back),
		cmocka_unit_test(scattered_blocks_read_back_without_io_uring),
		cmocka_unit_test(extraction_errors_name_the_file),
		cmocka_unit_test(runs_out_of_order_are_refused),
		cmocka_unit_test(progress_can_stop_and_abort_leaves_a_cut_stream),
		cmocka_unit_test(apply_params_are_checked),
		cmocka_unit_test(a_stream_applies_once_other_targets_and_sources_are_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
