// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * track_watch_*: the record parser on synthetic buffers in both kernel
 * formats, and the watcher on real directories (plain inotify, as on any
 * stock host) with kernel output injected where a test needs a format or a
 * condition the host cannot produce: ranges, overflow, split renames,
 * garbage, an exhausted watch limit.
 */
/* wrap: -Wl,--wrap=read -Wl,--wrap=inotify_init1 -Wl,--wrap=inotify_add_watch */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>
#include <setjmp.h>
#include <cmocka.h>

#include <libtrack.h>

/* --- link-time seams ------------------------------------------------- */

ssize_t __real_read(int fd, void *buf, size_t n);
int __real_inotify_init1(int flags);
int __real_inotify_add_watch(int fd, const char *path, uint32_t mask);
ssize_t __wrap_read(int fd, void *buf, size_t n);
int __wrap_inotify_init1(int flags);
int __wrap_inotify_add_watch(int fd, const char *path, uint32_t mask);

#define MAX_INJECT 8
static struct {
	unsigned char data[4096];
	size_t len;
} inject[MAX_INJECT];
static int inject_head, inject_tail, inject_fd = -1;
static bool kernel_has_ranges;
static int add_watch_error;

ssize_t __wrap_read(int fd, void *buf, size_t n)
{
	if (fd == inject_fd && inject_head != inject_tail) {
		size_t len = inject[inject_head].len;

		assert_true(len <= n);
		memcpy(buf, inject[inject_head].data, len);
		inject_head++;
		return (ssize_t)len;
	}
	return __real_read(fd, buf, n);
}

int __wrap_inotify_init1(int flags)
{
	if (flags & IN_REPORT_RANGE) {
		if (!kernel_has_ranges) {
			errno = EINVAL;
			return -1;
		}
		flags &= ~IN_REPORT_RANGE;
	}
	return __real_inotify_init1(flags);
}

int __wrap_inotify_add_watch(int fd, const char *path, uint32_t mask)
{
	if (add_watch_error) {
		errno = add_watch_error;
		return -1;
	}
	return __real_inotify_add_watch(fd, path, mask);
}

/* --- building kernel output ------------------------------------------ */

/* Append one record to BUF at *OFF, in the range format if RANGE. */
static void put(unsigned char *buf, size_t *off, int wd, uint32_t mask,
		uint32_t cookie, const char *name, bool range, uint64_t roff,
		uint64_t rlen)
{
	struct inotify_event hdr = { .wd = wd, .mask = mask,
				     .cookie = cookie };
	size_t nl = name ? strlen(name) : 0;
	size_t area = nl ? (nl + 1 + 15) / 16 * 16 : (range ? 16 : 0);

	hdr.len = (uint32_t)(area + (range ? 16 : 0));
	if (range)
		hdr.mask |= IN_RANGE;
	memcpy(buf + *off, &hdr, sizeof(hdr));
	memset(buf + *off + sizeof(hdr), 0, hdr.len);
	if (nl)
		memcpy(buf + *off + sizeof(hdr), name, nl);
	if (range) {
		memcpy(buf + *off + sizeof(hdr) + area, &roff, 8);
		memcpy(buf + *off + sizeof(hdr) + area + 8, &rlen, 8);
	}
	*off += sizeof(hdr) + hdr.len;
}

static unsigned char *inject_next(size_t **lenp)
{
	assert_true(inject_tail < MAX_INJECT);
	inject[inject_tail].len = 0;
	*lenp = &inject[inject_tail].len;
	return inject[inject_tail++].data;
}

/* --- the parser ------------------------------------------------------ */

static void plain_named_event_parses(void **state)
{
	unsigned char buf[256] __attribute__((aligned(8)));
	struct track_inotify_event e;
	size_t len = 0;

	put(buf, &len, 3, IN_MODIFY, 0, "file", false, 0, 0);
	assert_int_equal(len, 16 + 16);
	assert_int_equal(track_watch_parse(buf, len, &e), 32);
	assert_int_equal(e.wd, 3);
	assert_int_equal(e.mask, IN_MODIFY);
	assert_string_equal(e.name, "file");
	assert_int_equal(e.name_len, 4);
	assert_int_equal(e.offset, 0);
	assert_int_equal(e.length, 0);
}

static void plain_unnamed_event_parses(void **state)
{
	unsigned char buf[64] __attribute__((aligned(8)));
	struct track_inotify_event e;
	size_t len = 0;

	put(buf, &len, 1, IN_MODIFY, 0, NULL, false, 0, 0);
	assert_int_equal(len, 16);
	assert_int_equal(track_watch_parse(buf, len, &e), 16);
	assert_string_equal(e.name, "");
	assert_int_equal(e.name_len, 0);
}

static void range_named_event_carries_its_range(void **state)
{
	unsigned char buf[256] __attribute__((aligned(8)));
	struct track_inotify_event e;
	size_t len = 0;

	put(buf, &len, 2, IN_MODIFY, 0, "data.bin", true, 4096, 123);
	/* roundup(strlen + 1, 16) + 16 */
	assert_int_equal(len, 16 + 16 + 16);
	assert_int_equal(track_watch_parse(buf, len, &e), 48);
	assert_true(e.mask & IN_RANGE);
	assert_string_equal(e.name, "data.bin");
	assert_int_equal(e.offset, 4096);
	assert_int_equal(e.length, 123);
}

static void range_unnamed_event_is_thirty_two_bytes(void **state)
{
	unsigned char buf[64] __attribute__((aligned(8)));
	struct track_inotify_event e;
	size_t len = 0;

	put(buf, &len, 1, IN_MODIFY, 0, NULL, true, 7, 1);
	assert_int_equal(len, 16 + 32);
	assert_int_equal(track_watch_parse(buf, len, &e), 48);
	assert_string_equal(e.name, "");
	assert_int_equal(e.offset, 7);
	assert_int_equal(e.length, 1);
}

static void every_name_length_round_trips(void **state)
{
	unsigned char buf[512] __attribute__((aligned(8)));
	char name[NAME_MAX + 1];

	for (size_t nl = 1; nl <= 80; nl++) {
		for (int range = 0; range < 2; range++) {
			struct track_inotify_event e;
			size_t len = 0;

			memset(name, 'a' + (int)(nl % 26), nl);
			name[nl] = '\0';
			put(buf, &len, 5, IN_MODIFY, 0, name, range, nl, 2 * nl);
			assert_int_equal(track_watch_parse(buf, len, &e),
					 (int)len);
			assert_int_equal(e.name_len, nl);
			assert_memory_equal(e.name, name, nl + 1);
			if (range) {
				assert_int_equal(e.offset, nl);
				assert_int_equal(e.length, 2 * nl);
			}
		}
	}
}

static void mixed_records_walk_in_order(void **state)
{
	unsigned char buf[1024] __attribute__((aligned(8)));
	struct track_inotify_event e;
	size_t len = 0, off = 0;
	int n, count = 0;

	put(buf, &len, 1, IN_CREATE, 0, "new", false, 0, 0);
	put(buf, &len, 1, IN_MODIFY, 0, "new", true, 0, 10);
	put(buf, &len, 1, IN_MODIFY, 0, "old", false, 0, 0); /* whole file */
	put(buf, &len, 2, IN_MODIFY, 0, NULL, true, 100, 0); /* truncate */
	put(buf, &len, 1, IN_MOVED_FROM, 42, "a name with spaces", false, 0, 0);
	while ((n = track_watch_parse(buf + off, len - off, &e)) > 0) {
		switch (count++) {
		case 1:
			assert_int_equal(e.length, 10);
			break;
		case 2:
			assert_false(e.mask & IN_RANGE);
			break;
		case 3:
			assert_int_equal(e.offset, 100);
			assert_int_equal(e.length, 0);
			break;
		case 4:
			assert_int_equal(e.cookie, 42);
			assert_string_equal(e.name, "a name with spaces");
			break;
		}
		off += (size_t)n;
	}
	assert_int_equal(n, 0);
	assert_int_equal(count, 5);
	assert_int_equal(off, len);
}

static void empty_buffer_has_no_record(void **state)
{
	struct track_inotify_event e;

	assert_int_equal(track_watch_parse("", 0, &e), 0);
}

static void truncated_records_are_refused(void **state)
{
	unsigned char buf[256] __attribute__((aligned(8)));
	struct track_inotify_event e;
	size_t len = 0;

	put(buf, &len, 1, IN_MODIFY, 0, "file", true, 1, 2);
	for (size_t cut = 1; cut < len; cut++)
		assert_int_equal(track_watch_parse(buf, cut, &e), -EMSGSIZE);
	assert_int_equal(track_watch_parse(buf, len, &e), (int)len);
}

static void name_without_nul_is_refused(void **state)
{
	unsigned char buf[64] __attribute__((aligned(8)));
	struct inotify_event hdr = { .wd = 1, .mask = IN_CREATE, .len = 16 };
	struct track_inotify_event e;

	memcpy(buf, &hdr, sizeof(hdr));
	memset(buf + 16, 'x', 16);
	assert_int_equal(track_watch_parse(buf, 32, &e), -EBADMSG);
	/* The same in the range format: the NUL must be before the record. */
	hdr.mask = IN_MODIFY | IN_RANGE;
	hdr.len = 32;
	memcpy(buf, &hdr, sizeof(hdr));
	memset(buf + 16, 'x', 16);
	memset(buf + 32, 0, 16);
	assert_int_equal(track_watch_parse(buf, 48, &e), -EBADMSG);
}

static void range_flag_without_room_is_refused(void **state)
{
	unsigned char buf[64] __attribute__((aligned(8)));
	struct inotify_event hdr = { .wd = 1, .mask = IN_MODIFY | IN_RANGE,
				     .len = 8 };
	struct track_inotify_event e;

	memcpy(buf, &hdr, sizeof(hdr));
	memset(buf + 16, 0, 8);
	assert_int_equal(track_watch_parse(buf, 24, &e), -EBADMSG);
}

static void wrapping_range_is_refused(void **state)
{
	unsigned char buf[64] __attribute__((aligned(8)));
	struct track_inotify_event e;
	size_t len = 0;

	put(buf, &len, 1, IN_MODIFY, 0, NULL, true, UINT64_MAX - 1, 2);
	assert_int_equal(track_watch_parse(buf, len, &e), -EBADMSG);
	len = 0;
	put(buf, &len, 1, IN_MODIFY, 0, NULL, true, UINT64_MAX - 1, 1);
	assert_int_equal(track_watch_parse(buf, len, &e), (int)len);
}

static void garbage_len_is_refused(void **state)
{
	unsigned char buf[64] __attribute__((aligned(8)));
	struct inotify_event hdr = { .wd = 1, .mask = IN_MODIFY,
				     .len = 0xffffffffu };
	struct track_inotify_event e;

	memcpy(buf, &hdr, sizeof(hdr));
	assert_true(track_watch_parse(buf, sizeof(buf), &e) < 0);
	hdr.len = 1000;
	memcpy(buf, &hdr, sizeof(hdr));
	assert_int_equal(track_watch_parse(buf, sizeof(buf), &e), -EMSGSIZE);
}

/* --- the watcher on real directories -------------------------------- */

struct fixture {
	char dir[64];		/* the watched tree */
	char out[64];		/* a directory outside it */
	struct track_watch *w;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/test-watch.XXXXXX");
	strcpy(f->out, "/tmp/test-watch-out.XXXXXX");
	if (!mkdtemp(f->dir) || !mkdtemp(f->out))
		return -1;
	kernel_has_ranges = false;
	add_watch_error = 0;
	inject_head = inject_tail = 0;
	inject_fd = -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[256];

	track_watch_free(f->w);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", f->dir, f->out);
	if (system(cmd))
		return -1;
	free(f);
	return 0;
}

/*
 * Tests that inject inotify records or wrap inotify calls cannot run when
 * LIBTRACK_WATCH_BACKEND=fanotify makes the watcher use fanotify (as
 * tests/watch_fanotify.sh does); the rest run on either backend.
 */
static bool inotify_only(void)
{
	const char *b = getenv("LIBTRACK_WATCH_BACKEND");

	return b && !strcmp(b, "fanotify");
}

static void open_watch(struct fixture *f, unsigned int flags)
{
	assert_int_equal(track_watch_new(flags, &f->w), 0);
	assert_int_equal(track_watch_add(f->w, f->dir), 0);
	inject_fd = track_watch_fd(f->w);
}

static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

/* The next event that is not CLOSE_WRITE or an ATTRIB, within a second. */
static int next(struct fixture *f, struct track_event *ev)
{
	return track_watch_next(f->w, ev, 1000);
}

static void expect(struct fixture *f, enum track_event_kind kind,
		   const char *path)
{
	struct track_event ev;

	assert_int_equal(next(f, &ev), 1);
	if (ev.kind != kind || strcmp(ev.path, path))
		fail_msg("expected kind %d '%s', got kind %d '%s'", kind, path,
			 ev.kind, ev.path);
}

static void quiet(struct fixture *f)
{
	struct track_event ev;
	int n = track_watch_next(f->w, &ev, 200);

	if (n == 1)
		fail_msg("unexpected event kind %d '%s'", ev.kind, ev.path);
	assert_int_equal(n, 0);
}

/* Nothing but ATTRIB events for a while. */
static void quiet_but_attrib(struct fixture *f)
{
	struct track_event ev;
	int n;

	while ((n = track_watch_next(f->w, &ev, 200)) == 1)
		if (ev.kind != TRACK_EVENT_ATTRIB)
			fail_msg("unexpected event kind %d '%s'", ev.kind,
				 ev.path);
	assert_int_equal(n, 0);
}

static void plain_kernel_gives_plain_mode(void **state)
{
	struct fixture *f = *state;

	open_watch(f, 0);
	assert_int_equal(track_watch_get_mode(f->w), TRACK_WATCH_PLAIN);
	assert_string_equal(track_watch_root(f->w, 0), f->dir);
	assert_null(track_watch_root(f->w, 1));
	assert_int_equal(track_watch_count(f->w), 1);
}

static void range_kernel_gives_ranges_mode_unless_refused(void **state)
{
	struct fixture *f = *state;
	struct track_watch *w;

	if (inotify_only())
		skip();
	kernel_has_ranges = true;
	assert_int_equal(track_watch_new(0, &w), 0);
	assert_int_equal(track_watch_get_mode(w), TRACK_WATCH_RANGES);
	track_watch_free(w);
	assert_int_equal(track_watch_new(TRACK_WATCH_NO_RANGES, &w), 0);
	assert_int_equal(track_watch_get_mode(w), TRACK_WATCH_PLAIN);
	track_watch_free(w);
	assert_int_equal(track_watch_new(0x100, &w), -EINVAL);
	(void)f;
}

static void plain_write_is_a_whole_file_modify(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;

	open_watch(f, 0);
	sh("printf hello >%s/file", f->dir);
	expect(f, TRACK_EVENT_CREATE, "file");
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_MODIFY);
	assert_string_equal(ev.path, "file");
	assert_false(ev.flags & TRACK_EVENT_RANGE);
	assert_int_equal(ev.offset, 0);
	assert_true(ev.length == TRACK_WHOLE_FILE);
	quiet(f);
}

static void ranges_reach_the_caller(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	size_t *len;
	unsigned char *b;

	if (inotify_only())
		skip();
	kernel_has_ranges = true;
	open_watch(f, 0);
	b = inject_next(&len);
	put(b, len, 1, IN_MODIFY, 0, "log", true, 1000, 24);
	put(b, len, 1, IN_MODIFY, 0, "log", false, 0, 0);
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_MODIFY);
	assert_string_equal(ev.path, "log");
	assert_true(ev.flags & TRACK_EVENT_RANGE);
	assert_int_equal(ev.offset, 1000);
	assert_int_equal(ev.length, 24);
	/* A write path that does not know its range: the whole file. */
	assert_int_equal(next(f, &ev), 1);
	assert_false(ev.flags & TRACK_EVENT_RANGE);
	assert_true(ev.length == TRACK_WHOLE_FILE);
}

static void new_directory_contents_are_not_missed(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	int files = 0, dirs = 0;

	open_watch(f, 0);
	/* All of it exists before the watcher hears of the first mkdir. */
	sh("mkdir -p %s/d/sub/deeper && echo a >%s/d/a && echo b >%s/d/sub/b",
	   f->dir, f->dir, f->dir);
	expect(f, TRACK_EVENT_CREATE, "d");
	while (track_watch_next(f->w, &ev, 300) == 1) {
		if (ev.kind != TRACK_EVENT_CREATE)
			continue;
		if (!strcmp(ev.path, "d/a") || !strcmp(ev.path, "d/sub/b"))
			files++;
		if (!strcmp(ev.path, "d/sub") || !strcmp(ev.path, "d/sub/deeper"))
			dirs++;
	}
	assert_true(files >= 2);
	assert_true(dirs >= 2);
	assert_int_equal(track_watch_count(f->w), 4);
	/* And the new directories are watched. */
	sh("echo c >%s/d/sub/deeper/c", f->dir);
	expect(f, TRACK_EVENT_CREATE, "d/sub/deeper/c");
}

static void rename_inside_is_one_event(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;

	sh("echo x >%s/a", f->dir);
	open_watch(f, 0);
	sh("mv %s/a %s/b", f->dir, f->dir);
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_RENAME);
	assert_string_equal(ev.old_path, "a");
	assert_string_equal(ev.path, "b");
	quiet(f);
}

static void renamed_directory_paths_follow(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;

	sh("mkdir -p %s/old/inner", f->dir);
	open_watch(f, 0);
	sh("mv %s/old %s/new && echo x >%s/new/inner/f", f->dir, f->dir,
	   f->dir);
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_RENAME);
	assert_true(ev.flags & TRACK_EVENT_DIR);
	assert_string_equal(ev.old_path, "old");
	assert_string_equal(ev.path, "new");
	expect(f, TRACK_EVENT_CREATE, "new/inner/f");
}

static void move_out_is_a_delete_and_unwatched(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;

	sh("mkdir -p %s/gone/x", f->dir);
	open_watch(f, 0);
	assert_int_equal(track_watch_set_rename_timeout(f->w, 20), 0);
	sh("mv %s/gone %s/", f->dir, f->out);
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_DELETE);
	assert_string_equal(ev.path, "gone");
	assert_true(ev.flags & TRACK_EVENT_DIR);
	assert_int_equal(track_watch_count(f->w), 1);
	/* What happens to it out there is none of our business. */
	sh("echo x >%s/gone/x/f", f->out);
	quiet(f);
}

static void move_in_is_a_create_and_watched(void **state)
{
	struct fixture *f = *state;

	sh("mkdir -p %s/come/y && echo 1 >%s/come/y/old", f->out, f->out);
	open_watch(f, 0);
	sh("mv %s/come %s/", f->out, f->dir);
	expect(f, TRACK_EVENT_CREATE, "come");
	expect(f, TRACK_EVENT_CREATE, "come/y");
	expect(f, TRACK_EVENT_CREATE, "come/y/old");
	sh("echo 2 >>%s/come/y/old", f->dir);
	expect(f, TRACK_EVENT_MODIFY, "come/y/old");
}

static void rename_halves_pair_across_reads(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	size_t *len;
	unsigned char *b;

	if (inotify_only())
		skip();
	open_watch(f, 0);
	b = inject_next(&len);
	put(b, len, 1, IN_MOVED_FROM, 7, "before", false, 0, 0);
	b = inject_next(&len);
	put(b, len, 1, IN_MOVED_TO, 7, "after", false, 0, 0);
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_RENAME);
	assert_string_equal(ev.old_path, "before");
	assert_string_equal(ev.path, "after");
}

static void events_behind_a_held_half_keep_their_order(void **state)
{
	struct fixture *f = *state;
	size_t *len;
	unsigned char *b;

	if (inotify_only())
		skip();
	open_watch(f, 0);
	b = inject_next(&len);
	put(b, len, 1, IN_MOVED_FROM, 9, "a", false, 0, 0);
	put(b, len, 1, IN_CREATE, 0, "other", false, 0, 0);
	put(b, len, 1, IN_MOVED_TO, 9, "b", false, 0, 0);
	put(b, len, 1, IN_MODIFY, 0, "b", false, 0, 0);
	expect(f, TRACK_EVENT_RENAME, "b");
	expect(f, TRACK_EVENT_CREATE, "other");
	expect(f, TRACK_EVENT_MODIFY, "b");
}

static void unpaired_halves_time_out(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	size_t *len;
	unsigned char *b;

	if (inotify_only())
		skip();
	open_watch(f, 0);
	track_watch_set_rename_timeout(f->w, 30);
	b = inject_next(&len);
	put(b, len, 1, IN_MOVED_FROM, 11, "left", false, 0, 0);
	put(b, len, 1, IN_MOVED_TO, 12, "arrived", false, 0, 0);
	/* Nothing yet: the first half may still find its partner. */
	assert_int_equal(track_watch_next(f->w, &ev, 0), 0);
	assert_true(track_watch_timeout(f->w) >= 0);
	assert_true(track_watch_timeout(f->w) <= 30);
	expect(f, TRACK_EVENT_DELETE, "left");
	expect(f, TRACK_EVENT_CREATE, "arrived");
	assert_int_equal(track_watch_timeout(f->w), -ENODATA);
}

static void overflow_is_a_rescan_with_watches_restored(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	size_t *len;
	unsigned char *b;

	open_watch(f, 0);
	/* A directory whose IN_CREATE the overflow swallowed... */
	sh("mkdir %s/lost", f->dir);
	b = inject_next(&len);
	put(b, len, -1, IN_Q_OVERFLOW, 0, NULL, false, 0, 0);
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_RESCAN);
	assert_int_equal(ev.root, 0);
	/* ...is watched by the time the caller rescans. */
	assert_int_equal(track_watch_count(f->w), 2);
	while (track_watch_next(f->w, &ev, 100) == 1)
		;	/* the real IN_CREATE of "lost" */
	sh("echo x >%s/lost/f", f->dir);
	expect(f, TRACK_EVENT_CREATE, "lost/f");
}

static void garbage_from_the_kernel_is_a_rescan(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	struct inotify_event hdr = { .wd = 1, .mask = IN_MODIFY, .len = 16 };
	size_t *len;
	unsigned char *b;

	open_watch(f, 0);
	b = inject_next(&len);
	memcpy(b, &hdr, sizeof(hdr));
	memset(b + 16, 'z', 16);	/* no NUL */
	*len = 32;
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_RESCAN);
	assert_non_null(strstr(track_watch_error(f->w), "malformed"));
}

static void unknown_watch_descriptors_are_ignored(void **state)
{
	struct fixture *f = *state;
	size_t *len;
	unsigned char *b;

	if (inotify_only())
		skip();
	open_watch(f, 0);
	b = inject_next(&len);
	put(b, len, 999, IN_MODIFY, 0, "ghost", false, 0, 0);
	put(b, len, 1, IN_CREATE, 0, "real", false, 0, 0);
	expect(f, TRACK_EVENT_CREATE, "real");
}

static void watch_limit_error_names_the_sysctl(void **state)
{
	struct fixture *f = *state;
	struct track_watch *w;

	if (inotify_only())
		skip();
	assert_int_equal(track_watch_new(0, &w), 0);
	add_watch_error = ENOSPC;
	assert_int_equal(track_watch_add(w, f->dir), -ENOSPC);
	assert_non_null(strstr(track_watch_error(w),
			       "fs.inotify.max_user_watches"));
	assert_non_null(strstr(track_watch_error(w), f->dir));
	track_watch_free(w);
}

static void watch_limit_while_running_is_reported(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	int n;

	if (inotify_only())
		skip();
	open_watch(f, 0);
	add_watch_error = ENOSPC;
	sh("mkdir %s/toomany", f->dir);
	expect(f, TRACK_EVENT_CREATE, "toomany");
	n = next(f, &ev);
	assert_int_equal(n, -ENOSPC);
	assert_non_null(strstr(track_watch_error(f->w), "toomany"));
	assert_non_null(strstr(track_watch_error(f->w),
			       "max_user_watches"));
}

static void symlinks_inside_are_not_followed(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;

	sh("ln -s %s %s/link", f->out, f->dir);
	open_watch(f, 0);
	assert_int_equal(track_watch_count(f->w), 1);
	sh("echo x >%s/outside", f->out);
	quiet(f);
	/* A symlink to a directory made later is reported, not entered. */
	sh("ln -s %s %s/link2", f->out, f->dir);
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_CREATE);
	assert_false(ev.flags & TRACK_EVENT_DIR);
	assert_int_equal(track_watch_count(f->w), 1);
}

static void deleted_root_is_gone(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;

	open_watch(f, 0);
	sh("rmdir %s", f->dir);
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_GONE);
	assert_int_equal(ev.root, 0);
	assert_int_equal(track_watch_count(f->w), 0);
	sh("mkdir %s", f->dir);	/* for teardown */
}

static void single_file_root_reports_its_own_changes(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	char path[128];

	snprintf(path, sizeof(path), "%s/solo", f->dir);
	sh("echo 1 >%s", path);
	assert_int_equal(track_watch_new(0, &f->w), 0);
	assert_int_equal(track_watch_add(f->w, path), 0);
	sh("echo 2 >>%s", path);
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(ev.kind, TRACK_EVENT_MODIFY);
	assert_string_equal(ev.path, "");
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* A signal handler (SIGTERM in a daemon) must be able to break a wait. */
static void signal_interrupts_the_wait(void **state)
{
	struct fixture *f = *state;
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	struct itimerval it = { .it_value = { .tv_usec = 100000 } };
	struct track_event ev;

	open_watch(f, 0);
	assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);	/* no SA_RESTART */
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	assert_int_equal(track_watch_next(f->w, &ev, 3000), -EINTR);
	sigaction(SIGALRM, &old, NULL);
	/* The watcher still works afterwards. */
	sh("touch %s/after", f->dir);
	expect(f, TRACK_EVENT_CREATE, "after");
}

/* 100,000 failed adds use up no root id, keep no path, grow no heap. */
static void failed_adds_leave_nothing_behind(void **state)
{
	struct fixture *f = *state;
	size_t before;
	char path[128];

	snprintf(path, sizeof(path), "%s/missing", f->dir);
	assert_int_equal(track_watch_new(0, &f->w), 0);
	assert_int_equal(track_watch_add(f->w, path), -ENOENT);
	before = mallinfo2().uordblks;
	for (int i = 0; i < 100000; i++)
		assert_int_equal(track_watch_add(f->w, path), -ENOENT);
	if (mallinfo2().uordblks > before + 4096)
		fail_msg("the heap grew by %zu bytes",
			 mallinfo2().uordblks - before);
	assert_null(track_watch_root(f->w, 0));
	assert_int_equal(track_watch_add(f->w, f->dir), 0);
	assert_string_equal(track_watch_root(f->w, 0), f->dir);
	assert_null(track_watch_root(f->w, 1));
	assert_int_equal(track_watch_count(f->w), 1);
}

/* After track_watch_remove() nothing of that root comes out, queued or new. */
static void removed_root_reports_nothing_more(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;

	open_watch(f, 0);
	assert_int_equal(track_watch_add(f->w, f->out), 1);
	sh("mkdir %s/sub && touch %s/queued %s/other", f->dir, f->dir, f->out);
	/* Read the queue (the first event) so the rest sits in the watcher. */
	assert_int_equal(next(f, &ev), 1);
	assert_int_equal(track_watch_remove(f->w, 0), 0);
	assert_int_equal(track_watch_remove(f->w, 0), -ENOENT);
	assert_int_equal(track_watch_remove(f->w, 7), -ENOENT);
	assert_null(track_watch_root(f->w, 0));
	assert_int_equal(track_watch_count(f->w), 1);	/* f->out only */
	sh("touch %s/new %s/sub/deeper", f->dir, f->dir);
	for (;;) {
		int n = track_watch_next(f->w, &ev, 200);

		if (n == 0)
			break;
		assert_int_equal(n, 1);
		assert_int_equal(ev.root, 1);
	}
	/* The free id is used again. */
	assert_int_equal(track_watch_add(f->w, f->dir), 0);
	assert_int_equal(track_watch_count(f->w), 3);
}

/*
 * An editor saves by writing a temporary file and renaming it over the
 * original: a single-file root follows the path to the new file and says
 * the whole file changed.
 */
static void single_file_root_follows_a_rename_over(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	char path[128];

	snprintf(path, sizeof(path), "%s/solo", f->dir);
	sh("echo 1 >%s", path);
	assert_int_equal(track_watch_new(0, &f->w), 0);
	assert_int_equal(track_watch_add(f->w, path), 0);
	for (int round = 0; round < 3; round++) {
		sh("echo %d >%s/.solo.tmp && mv %s/.solo.tmp %s", round,
		   f->dir, f->dir, path);
		do {
			assert_int_equal(next(f, &ev), 1);
		} while (ev.kind == TRACK_EVENT_ATTRIB);
		if (ev.kind != TRACK_EVENT_MODIFY)
			fail_msg("round %d: expected MODIFY, got kind %d flags "
				 "%#x", round, ev.kind, ev.flags);
		assert_string_equal(ev.path, "");
		assert_int_equal(ev.flags, 0);
		assert_true(ev.length == TRACK_WHOLE_FILE);
		quiet_but_attrib(f);
		sh("echo more >>%s", path);
		expect(f, TRACK_EVENT_MODIFY, "");
	}
	assert_int_equal(track_watch_count(f->w), 1);
}

/*
 * A single-file root replaced while the kernel queue overflowed (its
 * events lost) is found replaced by the rescan and watched again.
 */
static void file_root_replaced_during_overflow_is_followed(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	bool modify = false, rescan = false;
	unsigned char lost[4096];
	char path[128];
	size_t *len;
	unsigned char *b;
	int n;

	snprintf(path, sizeof(path), "%s/solo", f->dir);
	sh("echo 1 >%s", path);
	assert_int_equal(track_watch_new(0, &f->w), 0);
	assert_int_equal(track_watch_add(f->w, path), 0);
	inject_fd = track_watch_fd(f->w);
	sh("echo 2 >%s/.t && mv %s/.t %s", f->dir, f->dir, path);
	/* The events of the save are lost ... */
	while (read(inject_fd, lost, sizeof(lost)) > 0)
		;
	/* ... and the kernel says so. */
	b = inject_next(&len);
	put(b, len, -1, IN_Q_OVERFLOW, 0, NULL, false, 0, 0);
	while ((n = track_watch_next(f->w, &ev, 200)) == 1) {
		assert_int_not_equal(ev.kind, TRACK_EVENT_GONE);
		modify |= ev.kind == TRACK_EVENT_MODIFY && !ev.path[0];
		rescan |= ev.kind == TRACK_EVENT_RESCAN;
	}
	assert_true(modify && rescan);
	sh("echo more >>%s", path);
	expect(f, TRACK_EVENT_MODIFY, "");
}

/* A deleted single-file root is GONE, and not a directory. */
static void deleted_file_root_is_gone_without_dir_flag(void **state)
{
	struct fixture *f = *state;
	struct track_event ev;
	char path[128];

	snprintf(path, sizeof(path), "%s/solo", f->dir);
	sh("echo 1 >%s", path);
	assert_int_equal(track_watch_new(0, &f->w), 0);
	assert_int_equal(track_watch_add(f->w, path), 0);
	sh("rm %s", path);
	do {
		assert_int_equal(next(f, &ev), 1);
	} while (ev.kind == TRACK_EVENT_ATTRIB);
	assert_int_equal(ev.kind, TRACK_EVENT_GONE);
	assert_int_equal(ev.flags & TRACK_EVENT_DIR, 0);
	assert_int_equal(track_watch_count(f->w), 0);
}

static void odd_names_come_through_intact(void **state)
{
	struct fixture *f = *state;
	static const char *names[] = {
		"with space", "new\nline", "caf\xc3\xa9 \xe2\x9c\x93",
		"-dash", "*star?", "trailing ",
	};

	open_watch(f, 0);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[256];
		int fd;

		snprintf(path, sizeof(path), "%s/%s", f->dir, names[i]);
		fd = open(path, O_CREAT | O_WRONLY, 0644);
		assert_true(fd >= 0);
		close(fd);
		expect(f, TRACK_EVENT_CREATE, names[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plain_named_event_parses),
		cmocka_unit_test(plain_unnamed_event_parses),
		cmocka_unit_test(range_named_event_carries_its_range),
		cmocka_unit_test(range_unnamed_event_is_thirty_two_bytes),
		cmocka_unit_test(every_name_length_round_trips),
		cmocka_unit_test(mixed_records_walk_in_order),
		cmocka_unit_test(empty_buffer_has_no_record),
		cmocka_unit_test(truncated_records_are_refused),
		cmocka_unit_test(name_without_nul_is_refused),
		cmocka_unit_test(range_flag_without_room_is_refused),
		cmocka_unit_test(wrapping_range_is_refused),
		cmocka_unit_test(garbage_len_is_refused),
#define W(t) cmocka_unit_test_setup_teardown(t, setup, teardown)
		W(plain_kernel_gives_plain_mode),
		W(range_kernel_gives_ranges_mode_unless_refused),
		W(plain_write_is_a_whole_file_modify),
		W(ranges_reach_the_caller),
		W(new_directory_contents_are_not_missed),
		W(rename_inside_is_one_event),
		W(renamed_directory_paths_follow),
		W(move_out_is_a_delete_and_unwatched),
		W(move_in_is_a_create_and_watched),
		W(rename_halves_pair_across_reads),
		W(events_behind_a_held_half_keep_their_order),
		W(unpaired_halves_time_out),
		W(overflow_is_a_rescan_with_watches_restored),
		W(garbage_from_the_kernel_is_a_rescan),
		W(unknown_watch_descriptors_are_ignored),
		W(watch_limit_error_names_the_sysctl),
		W(watch_limit_while_running_is_reported),
		W(symlinks_inside_are_not_followed),
		W(deleted_root_is_gone),
		W(signal_interrupts_the_wait),
		W(failed_adds_leave_nothing_behind),
		W(removed_root_reports_nothing_more),
		W(single_file_root_follows_a_rename_over),
		W(deleted_file_root_is_gone_without_dir_flag),
		W(file_root_replaced_during_overflow_is_followed),
		W(single_file_root_reports_its_own_changes),
		W(odd_names_come_through_intact),
#undef W
	};

	return cmocka_run_group_tests_name("watch", tests, NULL, NULL);
}
