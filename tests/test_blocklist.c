// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * examples/blocklist.c, the Syncthing-style client: after a random
 * workload its block lists equal a from-scratch hash of the tree, both when
 * events carry ranges (only overlapping blocks re-hashed) and with the
 * plain events of a stock kernel (whole files re-hashed).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#define BLOCKLIST_NO_MAIN
#include "../examples/blocklist.c"

static uint64_t rs = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(uint64_t n)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return n ? rs % n : 0;
}

static char *dump(struct blocklist *bl)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	bl_dump(bl, f);
	fclose(f);
	return text;
}

/* The list a client starting from nothing computes for DIR. */
static char *scratch(const char *dir, uint64_t bs)
{
	struct blocklist *bl;
	char *text;

	assert_int_equal(bl_new(dir, bs, &bl), 0);
	assert_int_equal(bl_rescan(bl), 0);
	assert_int_equal(bl_update(bl), 0);
	text = dump(bl);
	bl_free(bl);
	return text;
}

static void same_lists(struct blocklist *bl, const char *dir)
{
	char *a = dump(bl), *b = scratch(dir, bl->bs);

	if (strcmp(a, b))
		fail_msg("kept list differs from a fresh hash:\n--- kept\n%s"
			 "--- fresh\n%s", a, b);
	free(a);
	free(b);
}

static void path_of(char *buf, size_t n, const char *dir, int i)
{
	snprintf(buf, n, "%s/%s%d", dir, i % 3 ? "" : "sub/", i);
}

static void event(struct blocklist *bl, enum track_event_kind kind,
		  const char *path, bool range, uint64_t off, uint64_t len,
		  const char *old)
{
	struct track_event ev = { .kind = kind, .path = path,
				  .old_path = old, .offset = off,
				  .length = range ? len : TRACK_WHOLE_FILE,
				  .flags = range ? TRACK_EVENT_RANGE : 0 };

	assert_int_equal(bl_event(bl, &ev), 0);
}

/*
 * Writes, appends, truncations, creates, deletes, renames and rescans in a
 * random order, each told to the block list the way the ranges kernel
 * reports it: the kept list equals a fresh hash after every update, and
 * the blocks re-hashed for the writes are only those they overlap.
 */
static void ranges_rehash_only_overlapping_blocks_and_stay_exact(void **st)
{
	char dir[] = "/tmp/test-blocklist.XXXXXX", p[256], q[256];
	const uint64_t bs = 1024;
	static unsigned char data[64 * 1024];
	struct blocklist *bl;
	bool exists[24] = { false };

	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/sub", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	for (int i = 0; i < 24; i += 2) {
		int fd;

		path_of(p, sizeof(p), dir, i);
		fd = open(p, O_CREAT | O_WRONLY, 0644);
		for (size_t k = 0; k < sizeof(data); k++)
			data[k] = (unsigned char)rnd(256);
		assert_true(write(fd, data, rnd(20000)) >= 0);
		close(fd);
		exists[i] = true;
	}
	assert_int_equal(bl_new(dir, bs, &bl), 0);
	assert_int_equal(bl_rescan(bl), 0);
	assert_int_equal(bl_update(bl), 0);

	for (int round = 0; round < 60; round++) {
		uint64_t expect_max = 0, before = bl->blocks_hashed;
		bool only_writes = true;

		for (int op = 0; op < 8; op++) {
			int i = (int)rnd(24), j = (int)rnd(24), fd;
			const char *rel, *relq;
			uint64_t off, len, size;
			struct stat sb;

			path_of(p, sizeof(p), dir, i);
			rel = p + strlen(dir) + 1;
			if (!exists[i]) {
				fd = open(p, O_CREAT | O_WRONLY, 0644);
				assert_true(fd >= 0);
				len = rnd(5000);
				assert_int_equal(write(fd, data, len),
						 (ssize_t)len);
				close(fd);
				exists[i] = true;
				event(bl, TRACK_EVENT_CREATE, rel, false, 0, 0,
				      NULL);
				if (len)
					event(bl, TRACK_EVENT_MODIFY, rel,
					      true, 0, len, NULL);
				only_writes = false;
				continue;
			}
			assert_int_equal(stat(p, &sb), 0);
			size = (uint64_t)sb.st_size;
			switch (rnd(10)) {
			case 0:		/* truncate, either way */
				len = rnd(30000);
				assert_int_equal(truncate(p, (off_t)len), 0);
				off = len < size ? len : size;
				event(bl, TRACK_EVENT_MODIFY, rel, rnd(2), off,
				      (len > size ? len : size) - off, NULL);
				only_writes = false;
				break;
			case 1:		/* delete */
				assert_int_equal(unlink(p), 0);
				exists[i] = false;
				event(bl, TRACK_EVENT_DELETE, rel, false, 0, 0,
				      NULL);
				only_writes = false;
				break;
			case 2:		/* rename over whatever is there */
				if (i == j)
					break;
				path_of(q, sizeof(q), dir, j);
				relq = q + strlen(dir) + 1;
				assert_int_equal(rename(p, q), 0);
				exists[i] = false;
				exists[j] = true;
				event(bl, TRACK_EVENT_RENAME, relq, false, 0, 0,
				      rel);
				only_writes = false;
				break;
			case 3:		/* a plain (range-less) modify */
				fd = open(p, O_WRONLY);
				assert_int_equal(pwrite(fd, data, 10, 0), 10);
				close(fd);
				event(bl, TRACK_EVENT_MODIFY, rel, false, 0, 0,
				      NULL);
				only_writes = false;
				break;
			default:	/* pwrite somewhere, maybe past the end */
				off = rnd(size + 3000);
				len = 1 + rnd(4000);
				fd = open(p, O_WRONLY);
				for (uint64_t k = 0; k < len; k++)
					data[k] = (unsigned char)rnd(256);
				assert_int_equal(pwrite(fd, data, len,
							(off_t)off),
						 (ssize_t)len);
				close(fd);
				event(bl, TRACK_EVENT_MODIFY, rel, true, off,
				      len, NULL);
				/* Its blocks, a grown file's new ones and
				 * its old last block. */
				expect_max += (off + len - 1) / bs - off / bs +
					      1 + 1;
				if (off + len > size)
					expect_max += (off + len + bs - 1) / bs;
				break;
			}
		}
		if (rnd(15) == 0) {
			event(bl, TRACK_EVENT_RESCAN, "", false, 0, 0, NULL);
			only_writes = false;
		}
		assert_int_equal(bl_update(bl), 0);
		same_lists(bl, dir);
		if (only_writes && bl->blocks_hashed - before > expect_max)
			fail_msg("round %d: %" PRIu64 " blocks re-hashed for "
				 "writes overlapping at most %" PRIu64, round,
				 bl->blocks_hashed - before, expect_max);
	}
	bl_free(bl);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	assert_int_equal(system(p), 0);
}

/* One 4 KiB write into a 4 MiB file re-hashes one 128 KiB block. */
static void one_small_write_costs_one_block(void **st)
{
	char dir[] = "/tmp/test-blocklist.XXXXXX", p[256];
	static unsigned char data[1 << 20];
	struct blocklist *bl;
	int fd;

	assert_non_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/big", dir);
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	for (int i = 0; i < 4; i++)
		assert_int_equal(write(fd, data, sizeof(data)),
				 (ssize_t)sizeof(data));
	assert_int_equal(bl_new(dir, 128 * 1024, &bl), 0);
	assert_int_equal(bl_rescan(bl), 0);
	assert_int_equal(bl_update(bl), 0);
	bl->blocks_hashed = bl->bytes_read = 0;
	memset(data, 0x5a, 4096);
	assert_int_equal(pwrite(fd, data, 4096, 1000000), 4096);
	close(fd);
	event(bl, TRACK_EVENT_MODIFY, "big", true, 1000000, 4096, NULL);
	assert_int_equal(bl_update(bl), 0);
	assert_int_equal(bl->blocks_hashed, 1);
	assert_int_equal(bl->bytes_read, 128 * 1024);
	same_lists(bl, dir);
	bl_free(bl);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	assert_int_equal(system(p), 0);
}

/*
 * With the real watcher on this (stock) kernel: plain events, whole files
 * re-hashed, and the list still exact after a random shell workload.
 */
static void plain_events_from_the_watcher_keep_the_list_exact(void **st)
{
	char dir[] = "/tmp/test-blocklist.XXXXXX", cmd[4096];
	struct track_watch *w;
	struct track_event ev;
	struct blocklist *bl;
	int n;

	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "cd %s && mkdir d && seq 1 3000 >a && seq 1 90000 >d/b", dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(track_watch_new(0, &w), 0);
	assert_true(track_watch_add(w, dir) >= 0);
	assert_int_equal(bl_new(dir, 4096, &bl), 0);
	assert_int_equal(bl_rescan(bl), 0);
	assert_int_equal(bl_update(bl), 0);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && printf x | dd of=a bs=1 seek=5000 conv=notrunc "
		 "2>/dev/null && seq 5 7 >>d/b && mv a d/a2 && "
		 "mkdir e && seq 1 100 >e/c && truncate -s 100 d/b && "
		 "cp d/b d/b3 && mv d e/d && rm e/d/b3 && "
		 "echo new >tmp && mv tmp e/c", dir);
	assert_int_equal(system(cmd), 0);
	while ((n = track_watch_next(w, &ev, 300)) == 1)
		assert_int_equal(bl_event(bl, &ev), 0);
	assert_int_equal(n, 0);
	assert_int_equal(bl_update(bl), 0);
	same_lists(bl, dir);
	bl_free(bl);
	track_watch_free(w);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ranges_rehash_only_overlapping_blocks_and_stay_exact),
		cmocka_unit_test(one_small_write_costs_one_block),
		cmocka_unit_test(plain_events_from_the_watcher_keep_the_list_exact),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
