// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The pieces of uds-plus that can be checked without running it: the
 * range set, the journal's escaping and replay, settings, conflict names,
 * the block delta, and the confinement of paths to a root.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include "uds.h"

static void sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

/* --- hmap -------------------------------------------------------------- */

static void map_survives_churn_and_renames_trees(void **state)
{
	struct hmap m;
	char key[64];
	char **keys;
	size_t n;

	hmap_init(&m);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 5000; i++) {
			snprintf(key, sizeof(key), "dir%d/file%d", i % 7, i);
			assert_int_equal(hmap_put(&m, key, (void *)1, NULL), 0);
		}
		for (int i = 0; i < 5000; i += 2) {
			snprintf(key, sizeof(key), "dir%d/file%d", i % 7, i);
			assert_non_null(hmap_del(&m, key));
		}
	}
	assert_int_equal(m.len, 2500);
	hmap_put(&m, "dir1", (void *)1, NULL);
	hmap_put(&m, "dir10", (void *)1, NULL);	/* not below dir1 */
	assert_int_equal(hmap_rename_tree(&m, "dir1", "moved", NULL), 0);
	assert_null(hmap_get(&m, "dir1"));
	assert_non_null(hmap_get(&m, "moved"));
	assert_non_null(hmap_get(&m, "dir10"));
	assert_non_null(hmap_get(&m, "moved/file1"));
	hmap_del_tree(&m, "moved", NULL);
	assert_null(hmap_get(&m, "moved/file1"));
	keys = hmap_sorted_keys(&m, &n);
	assert_non_null(keys);
	for (size_t i = 1; i < n; i++)
		assert_true(strcmp(keys[i - 1], keys[i]) < 0);
	hmap_free_keys(keys, n);
	hmap_clear(&m, NULL);
}

/* --- journal ----------------------------------------------------------- */

static void any_name_survives_escaping(void **state)
{
	const char *names[] = {
		"plain", "with space", "new\nline", "tab\there", "100%",
		"caf\xc3\xa9", "\x01\x7f\xff", "a/b/c", "%41",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char *e = journal_escape(names[i]), *d;

		assert_non_null(e);
		assert_null(strpbrk(e, " \n\t"));
		d = journal_unescape(e);
		assert_non_null(d);
		assert_string_equal(d, names[i]);
		free(e);
		free(d);
	}
	assert_null(journal_unescape("bad%0"));
	assert_null(journal_unescape("nul%00byte"));
}

static void free_entry(void *e)
{
	free(e);
}

static void journal_replays_renames_drops_and_torn_tails(void **state)
{
	char dir[] = "/tmp/test-journal.XXXXXX", path[128];
	struct journal j;
	struct hmap m;
	struct entry e = { 0 }, *got;
	int fd;

	assert_non_null(mkdtemp(dir));
	hmap_init(&m);
	assert_int_equal(journal_open(&j, dir, "/s", "/d", &m, false), 0);
	e.s.type = 'd';
	e.d.type = 'd';
	journal_set(&j, "dir", &e);
	e.s.type = e.d.type = 'f';
	e.s.size = 42;
	e.s.ino = 7;
	journal_set(&j, "dir/new\nline file", &e);
	journal_set(&j, "other", &e);
	journal_rename(&j, "dir", "renamed dir");
	journal_drop(&j, "other");
	journal_begin(&j, "renamed dir/new\nline file");
	assert_int_equal(journal_commit(&j), 0);
	journal_close(&j);

	/* A crash in the middle of the next record. */
	snprintf(path, sizeof(path), "%s/journal", dir);
	fd = open(path, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "E half", 6), 6);
	close(fd);

	assert_int_equal(journal_open(&j, dir, "/s", "/d", &m, false), 0);
	assert_int_equal(m.len, 2);
	got = hmap_get(&m, "renamed dir/new\nline file");
	assert_non_null(got);
	assert_int_equal(got->s.size, 42);
	assert_int_equal(got->s.ino, 7);
	assert_true(got->inflight);
	assert_null(hmap_get(&m, "other"));
	journal_close(&j);
	hmap_clear(&m, free_entry);

	/* Another pair of folders must not reuse this state. */
	assert_int_equal(journal_open(&j, dir, "/s", "/elsewhere", &m, false),
			 -EEXIST);
	sh("rm -rf %s", dir);
}

/* --- settings ------------------------------------------------------- */

static void durations_and_sizes_parse_with_units(void **state)
{
	uint64_t v;

	assert_int_equal(parse_duration_ms("5", &v), 0);
	assert_int_equal(v, 5000);
	assert_int_equal(parse_duration_ms("0.25", &v), 0);
	assert_int_equal(v, 250);
	assert_int_equal(parse_duration_ms("300ms", &v), 0);
	assert_int_equal(v, 300);
	assert_int_equal(parse_duration_ms("2m", &v), 0);
	assert_int_equal(v, 120000);
	assert_int_equal(parse_duration_ms("1h", &v), 0);
	assert_int_equal(v, 3600000);
	assert_int_equal(parse_duration_ms("-1", &v), -EINVAL);
	assert_int_equal(parse_duration_ms("5 parsecs", &v), -EINVAL);
	assert_int_equal(parse_size("250KB", &v), 0);
	assert_int_equal(v, 250000);
	assert_int_equal(parse_size("4K", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(parse_size("1.5MB", &v), 0);
	assert_int_equal(v, 1500000);
	assert_int_equal(parse_size("1G", &v), 0);
	assert_int_equal(v, 1ULL << 30);
	assert_int_equal(parse_size("lots", &v), -EINVAL);
}

static void config_keys_are_checked(void **state)
{
	struct config c;
	char msg[128];

	config_defaults(&c);
	assert_int_equal(config_set(&c, "timer", "2s", msg, sizeof(msg)), 0);
	assert_int_equal(c.timer_ms, 2000);
	assert_int_equal(config_set(&c, "ranges", "no", msg, sizeof(msg)), 0);
	assert_true(c.no_ranges);
	assert_int_equal(config_set(&c, "fsync", "maybe", msg, sizeof(msg)),
			 -EINVAL);
	assert_non_null(strstr(msg, "fsync"));
	assert_int_equal(config_set(&c, "colour", "blue", msg, sizeof(msg)),
			 -ENOENT);
	assert_non_null(strstr(msg, "colour"));
	config_free(&c);
}

/* --- files -------------------------------------------------------------- */

struct tree {
	char dir[64];
	int fd;
};

static int tree_setup(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));

	strcpy(t->dir, "/tmp/test-uds.XXXXXX");
	if (!mkdtemp(t->dir))
		return -1;
	t->fd = open(t->dir, O_RDONLY | O_DIRECTORY);
	*state = t;
	return t->fd < 0 ? -1 : 0;
}

static int tree_teardown(void **state)
{
	struct tree *t = *state;

	close(t->fd);
	sh("rm -rf %s", t->dir);
	free(t);
	return 0;
}

static void conflict_names_look_like_dropbox(void **state)
{
	struct tree *t = *state;
	char out[NAME_MAX + 1], longname[300];
	time_t when = 1700000000;	/* 2023-11-14 */
	struct tm tm;
	char date[16];

	localtime_r(&when, &tm);
	strftime(date, sizeof(date), "%Y-%m-%d", &tm);
	assert_int_equal(fsx_conflict_name(t->fd, t->fd, "report.txt", "box",
					   when, out, sizeof(out)), 0);
	assert_true(strstr(out, "report (box's conflicted copy ") == out);
	assert_non_null(strstr(out, date));
	assert_true(strlen(out) > 4 &&
		    !strcmp(out + strlen(out) - 4, ".txt"));
	assert_int_equal(fsx_conflict_name(t->fd, t->fd, ".bashrc", "box",
					   when, out, sizeof(out)), 0);
	assert_true(strstr(out, ".bashrc (box's") == out);
	/* Taken: the next number. */
	assert_int_equal(fsx_conflict_name(t->fd, t->fd, "a.txt", "box",
					   when, out, sizeof(out)), 0);
	close(openat(t->fd, out, O_CREAT | O_WRONLY, 0644));
	assert_int_equal(fsx_conflict_name(t->fd, t->fd, "a.txt", "box",
					   when, out, sizeof(out)), 0);
	assert_non_null(strstr(out, ") (2).txt"));
	/* A long name is cut to fit, never past NAME_MAX. */
	memset(longname, 'x', 250);
	strcpy(longname + 250, ".dat");
	assert_int_equal(fsx_conflict_name(t->fd, t->fd, longname, "box",
					   when, out, sizeof(out)), 0);
	assert_true(strlen(out) <= NAME_MAX);
	assert_non_null(strstr(out, "conflicted copy"));
}

static void symlinks_never_lead_out_of_the_root(void **state)
{
	struct tree *t = *state;
	const char *name;
	struct snap s;
	int fd;

	sh("mkdir -p %s/real && ln -s /etc %s/link && ln -s real %s/inlink",
	   t->dir, t->dir, t->dir);
	fd = fsx_open_parent(t->fd, "link/passwd", &name, false, -1);
	assert_true(fd == -ELOOP || fd == -ENOTDIR);
	fd = fsx_open_parent(t->fd, "link/x/y", &name, true, -1);
	assert_true(fd < 0);
	/* Even a link inside the root is not followed. */
	fd = fsx_open_parent(t->fd, "inlink/file", &name, false, -1);
	assert_true(fd < 0);
	fd = fsx_open_parent(t->fd, "../escape", &name, false, -1);
	assert_int_equal(fd, -EINVAL);
	assert_int_equal(fsx_snap(t->fd, "link/passwd", &s), 0);
	assert_int_equal(s.type, 0);
	assert_int_equal(fsx_snap(t->fd, "link", &s), 0);
	assert_int_equal(s.type, 'l');
	fd = fsx_open_parent(t->fd, "real/file", &name, false, -1);
	assert_true(fd >= 0);
	assert_string_equal(name, "file");
	close(fd);
}

static void very_long_paths_work(void **state)
{
	struct tree *t = *state;
	char *rel = malloc(8192), comp[201];
	const char *name;
	size_t len = 0;
	int fd;

	memset(comp, 'd', 200);
	comp[200] = '\0';
	for (int i = 0; i < 25; i++)	/* ~5000 bytes: more than PATH_MAX */
		len += (size_t)sprintf(rel + len, "%s%s", i ? "/" : "", comp);
	strcpy(rel + len, "/leaf");
	fd = fsx_open_parent(t->fd, rel, &name, true, -1);
	assert_true(fd >= 0);
	assert_string_equal(name, "leaf");
	close(fd);
	free(rel);
}

static void delta_writes_only_what_differs(void **state)
{
	struct tree *t = *state;
	struct copy_stats cs = { 0 };
	size_t size = 1 << 20;
	unsigned char *a = malloc(size), *b = malloc(size);
	struct track_extents *e;
	int fa, fb;

	for (size_t i = 0; i < size; i++)
		a[i] = (unsigned char)(i * 7);
	memcpy(b, a, size);
	a[5000] ^= 1;		/* one byte in block 1 */
	a[size - 1] ^= 1;	/* one byte in the last block */
	fa = openat(t->fd, "a", O_RDWR | O_CREAT, 0644);
	fb = openat(t->fd, "b", O_RDWR | O_CREAT, 0644);
	assert_int_equal(write(fa, a, size), (ssize_t)size);
	assert_int_equal(write(fb, b, size), (ssize_t)size);
	assert_int_equal(fsx_delta(fa, fb, size, NULL, &cs), 0);
	assert_int_equal(cs.written, 2);	/* trimmed to the bytes */
	assert_int_equal(cs.read, 2 * size);
	assert_int_equal(fsx_same_content(fa, fb, &cs), 1);

	/* With ranges, only those are read. */
	a[100000] ^= 1;
	assert_int_equal(pwrite(fa, a + 100000, 1, 100000), 1);
	memset(&cs, 0, sizeof(cs));
	assert_int_equal(track_extents_new(0, &e), 0);
	assert_int_equal(track_extents_add(e, 100000, 1), 0);
	assert_int_equal(fsx_delta(fa, fb, size, e, &cs), 0);
	assert_int_equal(cs.read, 2);
	assert_int_equal(cs.written, 1);
	assert_int_equal(fsx_same_content(fa, fb, &cs), 1);

	/* Shrinking truncates. */
	assert_int_equal(ftruncate(fa, 1000), 0);
	memset(&cs, 0, sizeof(cs));
	assert_int_equal(fsx_delta(fa, fb, 1000, NULL, &cs), 0);
	assert_int_equal(cs.written, 0);
	assert_int_equal(lseek(fb, 0, SEEK_END), 1000);
	track_extents_free(e);
	close(fa);
	close(fb);
	free(a);
	free(b);
}

/*
 * Fallback mode's block hashes: whatever changes between pushes (bytes
 * across the 1 MiB read chunks, the partial last block, shrinking,
 * growing, nothing), the target ends equal to the source, and with valid
 * hashes the target is read only where a block changed.
 */
static void block_sums_never_miss_a_change(void **state)
{
	struct tree *t = *state;
	struct blocksums bs = { 0 };
	size_t cap = (3 << 20) + 8192, size = (3 << 20) + 123;
	unsigned char *a = malloc(cap);
	unsigned int seed = 42;
	int fa, fb;

	for (size_t i = 0; i < cap; i++)
		a[i] = (unsigned char)rand_r(&seed);
	fa = openat(t->fd, "sa", O_RDWR | O_CREAT, 0644);
	fb = openat(t->fd, "sb", O_RDWR | O_CREAT, 0644);
	assert_int_equal(write(fa, a, size), (ssize_t)size);
	for (int round = 0; round < 300; round++) {
		struct copy_stats cs = { 0 };
		size_t changed = 0;
		int what = rand_r(&seed) % 8;

		if (round == 0) {
			/* First push: nothing known, both read. */
		} else if (what == 0 && size > 10000) {
			size -= (size_t)rand_r(&seed) % 5000;
			assert_int_equal(ftruncate(fa, (off_t)size), 0);
			changed = 4096;
		} else if (what == 1 && size + 5000 < cap) {
			size_t old = size;

			size += (size_t)rand_r(&seed) % 5000;
			assert_int_equal(pwrite(fa, a + old, size - old,
						(off_t)old),
					 (ssize_t)(size - old));
			changed = size - old + 8192;
		} else if (what == 2) {
			/* Nothing changed. */
		} else {
			int n = 1 + rand_r(&seed) % 3;

			for (int k = 0; k < n; k++) {
				size_t off = (size_t)rand_r(&seed) % size;

				if (k == 0 && what == 3)
					off = (1 << 20) - 1;	/* a chunk edge */
				if (off >= size)
					off = size - 1;
				a[off] ^= (unsigned char)(1 + rand_r(&seed) % 255);
				assert_int_equal(pwrite(fa, a + off, 1,
							(off_t)off), 1);
				changed += 2 * 4096;
			}
		}
		assert_int_equal(fsx_delta_sums(fa, fb, size, &bs, round > 0,
						&cs), 0);
		assert_int_equal(fsx_same_content(fa, fb, &(struct copy_stats){ 0 }),
				 1);
		assert_int_equal(bs.n, (size + 4095) / 4096);
		if (round > 0)
			assert_true(cs.read <= size + changed);
		else
			assert_int_equal(cs.read, size);	/* target empty */
	}
	/* Hashes that do not describe the target: read both, still equal. */
	assert_int_equal(pwrite(fb, "zz", 2, 12345), 2);
	{
		struct copy_stats cs = { 0 };

		assert_int_equal(fsx_delta_sums(fa, fb, size, &bs, false, &cs),
				 0);
		assert_int_equal(cs.read, 2 * size);
		assert_int_equal(fsx_same_content(fa, fb,
						  &(struct copy_stats){ 0 }),
				 1);
	}
	fsx_sums_free(&bs);
	close(fa);
	close(fb);
	free(a);
}

static void new_files_appear_complete(void **state)
{
	struct tree *t = *state;
	char tmpname[64];
	struct stat st;
	int fd;

	fd = fsx_tmpfile(t->fd, tmpname);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "complete", 8), 8);
	/* Not visible before it is published. */
	assert_int_equal(fstatat(t->fd, "new", &st, 0), -1);
	assert_int_equal(fsx_publish(t->fd, fd, tmpname, "new", false), 0);
	assert_int_equal(fstatat(t->fd, "new", &st, 0), 0);
	assert_int_equal(st.st_size, 8);
	/* Publishing over an existing name needs REPLACE. */
	close(fd);
	fd = fsx_tmpfile(t->fd, tmpname);
	assert_int_equal(fsx_publish(t->fd, fd, tmpname, "new", false),
			 -EEXIST);
	assert_int_equal(write(fd, "v2", 2), 2);
	assert_int_equal(fsx_publish(t->fd, fd, tmpname, "new", true), 0);
	assert_int_equal(fstatat(t->fd, "new", &st, 0), 0);
	assert_int_equal(st.st_size, 2);
	close(fd);
	sh("test $(ls -A %s | wc -l) = 1", t->dir);
}

static void temp_names_are_recognised_exactly(void **state)
{
	assert_true(fsx_is_temp_name(".uds-plus-tmp.abcDEF012345"));
	assert_false(fsx_is_temp_name(".uds-plus-tmp.abcDEF01234"));
	assert_false(fsx_is_temp_name(".uds-plus-tmp.abcDEF0123456"));
	assert_false(fsx_is_temp_name(".uds-plus-tmp.abcDEF01234-"));
	assert_false(fsx_is_temp_name("uds-plus-tmp.abcDEF012345"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(map_survives_churn_and_renames_trees),
		cmocka_unit_test(any_name_survives_escaping),
		cmocka_unit_test(journal_replays_renames_drops_and_torn_tails),
		cmocka_unit_test(durations_and_sizes_parse_with_units),
		cmocka_unit_test(config_keys_are_checked),
#define T(f) cmocka_unit_test_setup_teardown(f, tree_setup, tree_teardown)
		T(conflict_names_look_like_dropbox),
		T(symlinks_never_lead_out_of_the_root),
		T(very_long_paths_work),
		T(delta_writes_only_what_differs),
		T(block_sums_never_miss_a_change),
		T(new_files_appear_complete),
#undef T
		cmocka_unit_test(temp_names_are_recognised_exactly),
	};

	log_setup("test", false, LOG_ERR_);
	return cmocka_run_group_tests_name("uds_parts", tests, NULL, NULL);
}
