// SPDX-License-Identifier: GPL-2.0
/*
 * After a crash, exactly the write-intent regions written in the last two
 * checkpoint intervals come back dirty, on top of the checkpointed set (a
 * checkpoint keeps the bits of regions written in the interval before it,
 * so that a region in use does not wait for an intent write after every
 * sync).
 *
 *   dm_track_crash write    (boot crash1) writes, then crashes the VM
 *   dm_track_crash verify   (boot crash2) checks what the device reports
 *
 * The write phase records what it did on VM_DISK_C, which survives the
 * crash like every disk of the run.
 */
#include <pthread.h>
#include <sys/mount.h>

#include "kselftest_harness.h"
#include "track_test.h"

#define BS		4096ULL
#define REGION		256ULL		/* blocks: region_size 2048 sectors */
/* dm-delay under dm-track holds every write for DELAY_MS. */
#define DELAY_MS	600
#define DELAY_TABLE	"0 2097152 delay " VM_DISK_B " 0 0 " VM_DISK_B " 0 %d"
#define TABLE		"0 2097152 track /dev/mapper/lt-delay 0 8 5 metadata " \
			VM_DISK_D " region_size 2048 clean"
#define LOG_MAGIC	0x6c6f6763726173ULL

/* What the write phase did, stored in the first sector of VM_DISK_C. */
struct crash_log {
	uint64_t magic;
	uint64_t checkpointed;		/* dirty at the last checkpoint */
	uint64_t after[8];		/* written after it */
	uint64_t nr_after;
	uint64_t before[2];		/* written in the interval before */
	uint64_t last_frozen;		/* the last epoch handed out */
	char track_id[40];
} __attribute__((aligned(4096)));

static const char *phase;

static void *inflight_write(void *arg)
{
	return (void *)(long)tt_pwrite(TT_PATH, O_DIRECT, *(uint64_t *)arg * BS,
				       BS);
}

static int delay_device(int ms)
{
	tt_remove("lt-delay");
	return vm_run("echo '" DELAY_TABLE "' | dmsetup create --noudevsync lt-delay",
		      ms);
}

static int write_log(const struct crash_log *log)
{
	int fd = open(VM_DISK_C, O_WRONLY | O_DIRECT | O_SYNC);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (pwrite(fd, log, sizeof(*log), 0) != sizeof(*log))
		r = -EIO;
	close(fd);
	return r;
}

static int read_log(struct crash_log *log)
{
	int fd = open(VM_DISK_C, O_RDONLY | O_DIRECT);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (pread(fd, log, sizeof(*log), 0) != sizeof(*log))
		r = -EIO;
	close(fd);
	return r;
}

TEST(crash_marks_exactly_the_intent_regions)
{
	static struct crash_log log;
	struct track_dm_status st;
	struct tt_extents x = { 0 };
	struct track_dm *dm;
	uint64_t e, b, i;

	TT_REQUIRE_TARGET();

	if (!strcmp(phase, "write")) {
		static uint64_t inflight = 150000;
		pthread_t t;
		void *ret;

		tt_remove(TT_NAME);
		ASSERT_EQ(0, vm_run("/sbin/blkdiscard -z " VM_DISK_D));
		memset(&log, 0, sizeof(log));
		ASSERT_EQ(0, write_log(&log));
		ASSERT_EQ(0, delay_device(DELAY_MS));
		ASSERT_EQ(0, vm_run("echo '%s' | dmsetup create --noudevsync "
				    TT_NAME, TABLE));
		ASSERT_EQ(0, track_dm_open(TT_NAME, &dm));

		/* Written, frozen, committed: gone for good. */
		ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 10 * BS, BS));
		ASSERT_EQ(0, track_dm_freeze(dm, &e));
		ASSERT_EQ(0, track_dm_commit(dm, e));
		ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT, 1000 * BS, BS));
		log.before[0] = 1000;
		log.before[1] = inflight;

		/*
		 * A write in flight across a freeze and the commit that
		 * checkpoints: the copier may have read the old block, so the
		 * completed write must be in the checkpoint, although its
		 * region's intent bit is cleared by it.
		 */
		ASSERT_EQ(0, pthread_create(&t, NULL, inflight_write, &inflight));
		usleep(DELAY_MS * 1000 / 3);
		ASSERT_EQ(0, track_dm_freeze(dm, &e));
		ASSERT_EQ(0, track_dm_commit(dm, e));	/* checkpoints */
		ASSERT_EQ(0, pthread_join(t, &ret));
		ASSERT_EQ(NULL, ret);
		log.checkpointed = inflight;

		/* After the checkpoint: three regions. */
		log.after[log.nr_after++] = 300;
		log.after[log.nr_after++] = 301;
		log.after[log.nr_after++] = 70000;
		log.after[log.nr_after++] = 200000;
		for (i = 0; i < log.nr_after; i++)
			ASSERT_EQ(0, tt_pwrite(TT_PATH, O_DIRECT,
					       log.after[i] * BS, BS));
		/* A freeze without a commit does not checkpoint. */
		ASSERT_EQ(0, track_dm_freeze(dm, &e));
		log.last_frozen = e;

		ASSERT_EQ(0, track_dm_get_status(dm, &st));
		memcpy(log.track_id, st.track_id, sizeof(log.track_id));
		log.magic = LOG_MAGIC;
		ASSERT_EQ(0, write_log(&log));
		track_dm_free(dm);

		printf("LIBTRACK-REBOOTING\n");
		fflush(stdout);
		sleep(1);
		/* No sync, no unmount, no device-mapper teardown. */
		vm_run("echo b > /proc/sysrq-trigger");
		sleep(10);
		ASSERT_TRUE(0) TH_LOG("still running after sysrq-b");
	}

	ASSERT_EQ(0, read_log(&log));
	ASSERT_EQ(LOG_MAGIC, log.magic) TH_LOG("the write phase did not finish");
	vm_kmsg_mark("crash-verify");
	ASSERT_EQ(0, delay_device(0));
	ASSERT_EQ(0, vm_run("echo '%s' | dmsetup create --noudevsync "
			    TT_NAME, TABLE));
	EXPECT_TRUE(vm_kmsg_has("crash-verify", "not shut down cleanly: 5 write-intent regions"));
	ASSERT_EQ(0, tt_status(TT_NAME, &st));
	EXPECT_STREQ(log.track_id, st.track_id);
	EXPECT_LT(log.last_frozen, st.epoch) TH_LOG("an epoch would be handed out twice");
	ASSERT_EQ(0, tt_extents(TT_NAME, TRACK_DM_ACTIVE, &x));

	/*
	 * Exactly: the checkpointed block, the whole regions written after
	 * the checkpoint, and those written in the interval before it.
	 */
	EXPECT_TRUE(tt_has(&x, log.checkpointed));
	for (i = 0; i < 2; i++)
		for (b = log.before[i] / REGION * REGION;
		     b < (log.before[i] / REGION + 1) * REGION; b++)
			ASSERT_TRUE(tt_has(&x, b))
				TH_LOG("block %llu of a region of the interval before is clean: %s",
				       (unsigned long long)b, tt_str(&x));
	for (i = 0; i < log.nr_after; i++)
		for (b = log.after[i] / REGION * REGION;
		     b < (log.after[i] / REGION + 1) * REGION; b++)
			ASSERT_TRUE(tt_has(&x, b))
				TH_LOG("block %llu of a written region is clean: %s",
				       (unsigned long long)b, tt_str(&x));
	/* The checkpointed block lies in a region of the interval before. */
	EXPECT_EQ(5 * REGION, tt_blocks(&x)) TH_LOG("%s", tt_str(&x));
	tt_remove(TT_NAME);
	tt_remove("lt-delay");
	free(x.e);
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "write") && strcmp(argv[1], "verify"))) {
		fprintf(stderr, "usage: %s write|verify\n", argv[0]);
		return 2;
	}
	phase = argv[1];
	return test_harness_run(1, argv);
}
