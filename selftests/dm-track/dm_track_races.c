// SPDX-License-Identifier: GPL-2.0
/*
 * Races between track devices and their readers, run on every CPU the VM
 * has: two creates over one metadata device, and a dump of a set that a
 * message changes halfway.
 */
#include <sys/mman.h>

#include "kselftest_harness.h"
#include "track_test.h"

#define BS		4096ULL
#define CREATORS	4
#define ROUNDS		12

/*
 * Creates of several devices over one metadata device, released at once:
 * only one may get it. Two that shared it would each load the other's set
 * after a restart, and lose writes.
 */
TEST(concurrent_creates_never_share_a_metadata_device)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int round, i, shared = 0;
	volatile int *go;

	TT_REQUIRE_TARGET();
	TH_LOG("%ld CPUs online", cpus);
	go = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, (void *)go);

	for (round = 0; round < ROUNDS; round++) {
		int ok = 0, status;
		pid_t pid[CREATORS];

		for (i = 0; i < CREATORS; i++)
			vm_run("dmsetup remove --noudevsync lt-race%d 2>/dev/null", i);
		ASSERT_EQ(0, vm_run("/sbin/blkdiscard -z " VM_DISK_D));
		*go = 0;
		for (i = 0; i < CREATORS; i++) {
			pid[i] = fork();
			ASSERT_LE(0, pid[i]);
			if (!pid[i]) {
				struct track_dm_params p = {
					.data_dev = VM_DISK_B,
					.offset = (uint64_t)i * 8192,
					.length = 8192,
					.metadata_dev = VM_DISK_D,
				};
				char name[32];

				snprintf(name, sizeof(name), "lt-race%d", i);
				while (!*go)
					;
				_exit(track_dm_create(name, &p) ? 1 : 0);
			}
		}
		*go = 1;
		for (i = 0; i < CREATORS; i++) {
			ASSERT_EQ(pid[i], waitpid(pid[i], &status, 0));
			ok += WIFEXITED(status) && !WEXITSTATUS(status);
		}
		EXPECT_EQ(1, ok) TH_LOG("round %d: %d devices got the metadata device",
					round, ok);
		shared += ok > 1;
	}
	for (i = 0; i < CREATORS; i++)
		vm_run("dmsetup remove --noudevsync lt-race%d 2>/dev/null", i);
	EXPECT_EQ(0, shared);
}

struct clear_midway {
	const char *name;
	unsigned long seen;
};

static int clear_after_first(uint64_t first, uint64_t count, void *arg)
{
	struct clear_midway *c = arg;

	if (!c->seen++)
		tt_message(c->name, "clear");
	return 0;
}

/*
 * A dump of the active set that "clear" interrupts must not end as if it
 * had read the whole set: the reader would take a partial set for all.
 */
TEST(dump_interrupted_by_clear_says_stale)
{
	struct track_dm_params p = { .data_dev = VM_DISK_B, .length = 262144,
				     .clean = 1 };
	struct clear_midway c = { .name = TT_NAME };
	struct track_dm *dm;
	unsigned char *buf;
	uint64_t b;
	int fd, r;

	TT_REQUIRE_TARGET();
	tt_remove(TT_NAME);
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
	/* Every other block: enough runs to need several messages. */
	ASSERT_EQ(0, posix_memalign((void **)&buf, 4096, BS));
	memset(buf, 0x5a, BS);
	fd = open(TT_PATH, O_WRONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	for (b = 0; b < 2 * 6000; b += 2)
		ASSERT_EQ((ssize_t)BS, pwrite(fd, buf, BS, b * BS));
	close(fd);
	free(buf);

	ASSERT_EQ(0, track_dm_open(TT_NAME, &dm));
	r = track_dm_for_each_extent(dm, TRACK_DM_ACTIVE, clear_after_first, &c);
	track_dm_free(dm);
	tt_remove(TT_NAME);
	EXPECT_EQ(-ESTALE, r)
		TH_LOG("the dump ended with %d after %lu of 6000 runs", r, c.seen);
	EXPECT_GT(6000, c.seen);
}

static int write_knob(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY), r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) != (ssize_t)strlen(val))
		r = -EIO;
	close(fd);
	return r;
}

#define FAILSLAB "/sys/kernel/debug/failslab/"

/*
 * Every allocation the write path may not sleep for fails (failslab, for
 * the writing task only): the write is still marked, coarsely, never lost.
 */
TEST(allocation_failure_on_the_write_path_over_marks)
{
	struct track_dm_params p = { .data_dev = VM_DISK_B, .length = 2097152,
				     .clean = 1 };
	struct track_dm_status st;
	struct tt_extents x = { 0 };
	const uint64_t block = 200000;
	int status;
	pid_t pid;

	TT_REQUIRE_TARGET();
	if (access(FAILSLAB "probability", W_OK))
		SKIP(return, "no failslab (CONFIG_FAILSLAB, debugfs)");
	tt_remove(TT_NAME);
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
	ASSERT_EQ(0, write_knob(FAILSLAB "task-filter", "Y"));
	ASSERT_EQ(0, write_knob(FAILSLAB "ignore-gfp-wait", "Y"));
	ASSERT_EQ(0, write_knob(FAILSLAB "verbose", "0"));
	ASSERT_EQ(0, write_knob(FAILSLAB "times", "-1"));
	ASSERT_EQ(0, write_knob(FAILSLAB "interval", "1"));
	ASSERT_EQ(0, write_knob(FAILSLAB "probability", "100"));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (write_knob("/proc/self/make-it-fail", "1"))
			_exit(2);
		_exit(tt_pwrite(TT_PATH, O_DIRECT, block * BS, BS) ? 1 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	write_knob(FAILSLAB "probability", "0");
	ASSERT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("the write under failslab failed: %d", status);

	ASSERT_EQ(0, tt_status(TT_NAME, &st));
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &x));
	tt_remove(TT_NAME);
	EXPECT_TRUE(tt_has(&x, block)) TH_LOG("the write is not marked: %s",
					      tt_str(&x));
	/* The allocations did fail: the mark is a whole group or leaf. */
	EXPECT_LT(1, st.dirty_active);
	TH_LOG("one write, no memory: %llu blocks marked (%s)",
	       (unsigned long long)st.dirty_active, tt_str(&x));
	free(x.e);
}

TEST_HARNESS_MAIN
