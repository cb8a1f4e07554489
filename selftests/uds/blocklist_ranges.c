// SPDX-License-Identifier: GPL-2.0
/*
 * examples/blocklist.c on the patched kernel: fed real IN_REPORT_RANGE
 * events, its Syncthing-style block lists equal a from-scratch hash after a
 * random workload, and small writes re-hash only the blocks they overlap.
 * Skips on a kernel without IN_REPORT_RANGE.
 */
#define BLOCKLIST_NO_MAIN
#include "../../examples/blocklist.c"

#include "kselftest_harness.h"
#include "vmtest.h"

static char *list_text(struct blocklist *bl)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	bl_dump(bl, f);
	fclose(f);
	return text;
}

/* Feed every event the watcher has until it is quiet for 300 ms. */
static int drain(struct track_watch *w, struct blocklist *bl, int *ranged)
{
	struct track_event ev;
	int n;

	while ((n = track_watch_next(w, &ev, 300)) == 1) {
		if (ev.kind == TRACK_EVENT_MODIFY &&
		    (ev.flags & TRACK_EVENT_RANGE))
			(*ranged)++;
		if (bl_event(bl, &ev))
			return -1;
	}
	return n;
}

TEST(ranged_block_lists_equal_a_fresh_hash)
{
	char dir[] = "/tmp/blocklist.XXXXXX", path[128];
	const uint64_t bs = 128 * 1024, size = 4 << 20;
	static unsigned char buf[1 << 16];
	struct blocklist *bl, *fresh;
	struct track_watch *w;
	uint64_t writes = 0, seed = 14;
	char *kept, *want;
	int ranged = 0;

	ASSERT_NE(NULL, mkdtemp(dir));
	ASSERT_EQ(0, track_watch_new(0, &w));
	if (track_watch_get_mode(w) == TRACK_WATCH_PLAIN)
		SKIP(return, "this kernel reports no write ranges");
	vm_fill(buf, sizeof(buf), 1, 0);
	for (int i = 0; i < 3; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		fd = open(path, O_CREAT | O_WRONLY, 0644);
		ASSERT_LE(0, fd);
		for (uint64_t off = 0; off < size; off += sizeof(buf))
			ASSERT_EQ((ssize_t)sizeof(buf), write(fd, buf, sizeof(buf)));
		close(fd);
	}
	ASSERT_LE(0, track_watch_add(w, dir));
	ASSERT_EQ(0, bl_new(dir, bs, &bl));
	ASSERT_EQ(0, bl_rescan(bl));
	ASSERT_EQ(0, bl_update(bl));
	bl->bytes_read = bl->blocks_hashed = 0;

	for (int round = 0; round < 10; round++) {
		for (int op = 0; op < 10; op++) {
			uint64_t off, len;
			int fd;

			seed = seed * 6364136223846793005ull + 1;
			snprintf(path, sizeof(path), "%s/f%d", dir,
				 (int)(seed >> 60) % 3);
			off = (seed >> 20) % (size + 8192);
			len = 1 + (seed >> 8) % 8192;
			fd = open(path, O_WRONLY);
			ASSERT_LE(0, fd);
			if (op == 9 && round % 3 == 2) {
				ASSERT_EQ(0, ftruncate(fd, (off_t)off));
			} else {
				ASSERT_EQ((ssize_t)len,
					  pwrite(fd, buf, len, (off_t)off));
			}
			close(fd);
			writes++;
		}
		ASSERT_EQ(0, drain(w, bl, &ranged));
		ASSERT_EQ(0, bl_update(bl));
	}
	kept = list_text(bl);
	ASSERT_EQ(0, bl_new(dir, bs, &fresh));
	ASSERT_EQ(0, bl_rescan(fresh));
	ASSERT_EQ(0, bl_update(fresh));
	want = list_text(fresh);
	ASSERT_NE(NULL, kept);
	ASSERT_NE(NULL, want);
	EXPECT_STREQ(want, kept);
	EXPECT_LT(0, ranged);
	TH_LOG("%llu writes: %llu blocks re-hashed, %llu bytes read "
	       "(whole files would read %llu per write)",
	       (unsigned long long)writes,
	       (unsigned long long)bl->blocks_hashed,
	       (unsigned long long)bl->bytes_read,
	       (unsigned long long)size);
	/* At most a few blocks per write, never whole files. */
	EXPECT_GE(writes * 4, bl->blocks_hashed);
	free(kept);
	free(want);
	bl_free(bl);
	bl_free(fresh);
	track_watch_free(w);
	vm_run("rm -rf %s", dir);
}

TEST_HARNESS_MAIN
