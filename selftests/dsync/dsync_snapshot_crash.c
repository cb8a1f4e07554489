// SPDX-License-Identifier: GPL-2.0
/*
 * A power loss on both sides in the middle of a snapshot-mode sync loses
 * nothing, and leaves a replica that is an image of one instant.
 *
 * Sync N (small) makes the replica the image of freeze N. Then 20 MiB are
 * written (durably), and sync N+1 runs as dmsync runs it, with the stream
 * relayed slowly by this test: dmextract --snapshot --no-commit on the
 * source, dmmerge --undo --state on the replica side (undo and state files
 * on an ext4), while a writer overwrites every frozen block. Four devices
 * sit on dm-log-writes (source data, source metadata, replica, the ext4 of
 * the undo and state files) and get a mark every few MiB of stream (every
 * other one after a sync(1), so that the replica's writes so far are
 * durable and the apply is caught half way), and once after dmmerge
 * exited. For each mark, the four logs are replayed up
 * to it (the disks as a power cut at that moment leaves them), and:
 *
 *   - source: every block where the replayed origin differs from the image
 *     of freeze N (what the replica had at the last commit) is dirty in
 *     the target loaded from the replayed metadata;
 *   - replica: it is the image of freeze N+1 (the apply completed), or,
 *     after the ext4 is mounted (journal replay) and
 *     dmmerge --rollback UNDO --state STATE, the image of freeze N.
 *
 * LIBTRACK_CRASH_BASELINE=nosnap copies the live device (--no-snapshot),
 * =noundo applies without --undo: the code before snapshot mode and
 * without undo. Each fails the replica check.
 */
#include <signal.h>
#include <sys/mount.h>

#include "kselftest_harness.h"
#include "../dm-track/track_test.h"
#include "../dm-track/log_writes.h"

#define BS		4096ULL
#define NBLK		5120ULL			/* 20 MiB: two undo batches */
#define DEV_SECT	(NBLK * 8)
#define META_SECT	4096ULL			/* 2 MiB */
#define FS_SECT		81920ULL		/* 40 MiB ext4: undo, state */
#define MIB_SECT	2048ULL
#define FIRST_BLOCKS	16ULL			/* sync N: blocks 0..15 */
#define CHUNK		(256 * 1024)
#define MARK_EVERY	(2 << 20)		/* bytes of stream */
#define MAX_MARKS	16
#define SEED_N		1
#define SEED_N1		2
#define SEED_AFTER	3

#define DATA_LOG_SECT	(384 * MIB_SECT)
#define REP_LOG_SECT	(192 * MIB_SECT)
#define FS_LOG_SECT	(320 * MIB_SECT)
#define META_LOG_SECT	(64 * MIB_SECT)

#define FSMNT		"/mnt/lt-sc"
#define UNDO		FSMNT "/undo"
#define STATE		FSMNT "/state"
#define LW(x)		"/dev/mapper/lt-sc-" x

struct scx {
	char marks[MAX_MARKS][32];
	int nr_marks;
	unsigned char *image_n, *image_n1, *buf;
};

static const char *baseline(void)
{
	const char *s = getenv("LIBTRACK_CRASH_BASELINE");

	return s ? s : "";
}

static int slice(const char *name, const char *disk, uint64_t start,
		 uint64_t len)
{
	return vm_run("echo '0 %llu linear %s %llu' | dmsetup create --noudevsync lt-sc-%s",
		      (unsigned long long)len, disk, (unsigned long long)start,
		      name);
}

static int zero(const char *path, uint64_t sectors)
{
	return vm_run("dd if=/dev/zero of=%s bs=1M count=%llu oflag=direct status=none",
		      path, (unsigned long long)(sectors / MIB_SECT));
}

static int logwrites(const char *name, const char *base, const char *log,
		     uint64_t sect)
{
	return vm_run("echo '0 %llu log-writes %s %s' | dmsetup create --noudevsync lt-sc-%s",
		      (unsigned long long)sect, base, log, name);
}

#define TRACK_TABLE(data, meta, extra)					\
	"0 40960 track " data " 0 8 " extra " metadata " meta " region_size 128"

static void teardown_all(void)
{
	static const char * const names[] = {
		"lt-sc-check", TT_NAME "-view", TT_NAME, "lt-sc-lwd",
		"lt-sc-lwm", "lt-sc-lwr", "lt-sc-lwf", "lt-sc-data",
		"lt-sc-datar", "lt-sc-datal", "lt-sc-meta", "lt-sc-metar",
		"lt-sc-metal", "lt-sc-rep", "lt-sc-repr", "lt-sc-repl",
		"lt-sc-fs", "lt-sc-fsr", "lt-sc-fsl",
	};
	unsigned int i;

	umount2(FSMNT, MNT_DETACH);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		tt_remove(names[i]);
}

static int mark_all(struct scx *x, const char *name)
{
	static const char * const lw[] = {
		"lt-sc-lwd", "lt-sc-lwm", "lt-sc-lwr", "lt-sc-lwf",
	};
	unsigned int i;

	if (x->nr_marks == MAX_MARKS)
		return 0;
	snprintf(x->marks[x->nr_marks++], 32, "%s", name);
	for (i = 0; i < 4; i++)
		if (vm_run("dmsetup message %s 0 mark %s", lw[i], name))
			return -EIO;
	return 0;
}

static int write_blocks(unsigned int seed, uint64_t first, uint64_t n)
{
	size_t len = n * BS;
	void *buf;
	int fd, r = 0;

	if (posix_memalign(&buf, 4096, len))
		return -ENOMEM;
	vm_fill(buf, len, seed, first * BS);
	fd = open(TT_PATH, O_WRONLY | O_DIRECT);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	if (pwrite(fd, buf, len, first * BS) != (ssize_t)len)
		r = -EIO;
	close(fd);
	free(buf);
	return r;
}

static int read_dev(const char *path, unsigned char *buf)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (pread(fd, buf, NBLK * BS, 0) != (ssize_t)(NBLK * BS))
		r = -EIO;
	close(fd);
	return r;
}

/* Blocks of BUF that differ from IMAGE; *FIRST is set to the first. */
static uint64_t differ(const unsigned char *buf, const unsigned char *image,
		       uint64_t *first)
{
	uint64_t b, n = 0;

	for (b = 0; b < NBLK; b++)
		if (memcmp(buf + b * BS, image + b * BS, BS) && !n++)
			*first = b;
	return n;
}

/* Blocks of the replayed origin in X->buf that differ from freeze N's
 * image and are not dirty in D: lost. */
static uint64_t source_lost(const struct scx *x, const struct tt_extents *d,
			    uint64_t *first)
{
	uint64_t b, lost = 0;

	for (b = 0; b < NBLK; b++)
		if (memcmp(x->buf + b * BS, x->image_n + b * BS, BS) &&
		    !tt_has(d, b) && !lost++)
			*first = b;
	return lost;
}

static void flush_dev(const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

static pid_t spawn(const char *cmd, int in, int out)
{
	pid_t pid = fork();

	if (!pid) {
		int fd;

		if (in >= 0)
			dup2(in, 0);
		if (out >= 0)
			dup2(out, 1);
		/* No pipe end of the other side: dmmerge must see EOF. */
		for (fd = 3; fd < 256; fd++)
			close(fd);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/*
 * Sync N+1: dmextract | (this test, slowly, marking) | dmmerge, with a
 * writer overwriting every frozen block from the last one down. Returns
 * dmmerge's exit status; the epoch is left frozen.
 */
static int relay_sync(struct __test_metadata *_metadata, struct scx *x,
		      const char *xopt, const char *mopt)
{
	char cmd[512], *buf = malloc(CHUNK), name[32];
	int px[2], pm[2], st, rc = -1, m = 0;
	pid_t ex, mg, writer = -1;
	size_t total = 0, next_mark = MARK_EVERY;
	ssize_t n;

	if (!buf || pipe(px) || pipe(pm))
		return -1;
	snprintf(cmd, sizeof(cmd), "dmextract %s --no-commit --no-progress " TT_NAME " 2>/tmp/sc-x.err",
		 xopt);
	ex = spawn(cmd, -1, px[1]);
	close(px[1]);
	snprintf(cmd, sizeof(cmd), "dmmerge %s --state " STATE " " LW("lwr") " 2>/tmp/sc-m.err",
		 mopt);
	mg = spawn(cmd, pm[0], -1);
	close(pm[0]);
	signal(SIGPIPE, SIG_IGN);
	while ((n = read(px[0], buf, CHUNK)) > 0) {
		if (write(pm[1], buf, n) != n)
			break;
		total += n;
		if (writer < 0) {
			writer = fork();
			if (!writer) {
				uint64_t b;

				for (b = NBLK; b-- > 0;)
					if (write_blocks(SEED_AFTER, b, 1))
						_exit(1);
				_exit(0);
			}
		}
		if (total >= next_mark) {
			/*
			 * dm-log-writes keeps only flushed writes: every other
			 * mark, flush everything first, as a disk that had
			 * written its cache out would leave it.
			 */
			m++;
			if (m % 2) {
				/* sync(1) writes back, fsync of a block
				 * device also flushes its cache. */
				vm_run("sync");
				flush_dev(LW("lwr"));
				flush_dev(TT_PATH);
			}
			snprintf(name, sizeof(name), "copy-%d%s", m,
				 m % 2 ? "-flushed" : "");
			EXPECT_EQ(0, mark_all(x, name));
			next_mark += MARK_EVERY;
		}
		usleep(20000);
	}
	close(px[0]);
	close(pm[1]);
	if (waitpid(ex, &st, 0) == ex) {
		EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st))
			TH_LOG("dmextract failed");
	}
	if (waitpid(mg, &st, 0) == mg && WIFEXITED(st))
		rc = WEXITSTATUS(st);
	if (writer > 0) {
		EXPECT_EQ(writer, waitpid(writer, &st, 0));
		EXPECT_TRUE(WIFEXITED(st) && !WEXITSTATUS(st))
			TH_LOG("an application write failed");
	}
	vm_run("sed 's/^/# dmextract: /' /tmp/sc-x.err; sed 's/^/# dmmerge: /' /tmp/sc-m.err");
	TH_LOG("relayed %zu bytes of stream, %d marks during the copy", total,
	       m);
	free(buf);
	return rc;
}

FIXTURE(sc)
{
	struct scx x;
};

FIXTURE_SETUP(sc)
{
	TT_REQUIRE_TARGET();
	if (!vm_dm_target_present("log-writes"))
		SKIP(return, "no dm-log-writes in this kernel (CONFIG_DM_LOG_WRITES)");
	if (!*baseline() && !vm_dm_target_present("track-view"))
		SKIP(return, "no track-view target: no snapshot mode");
	if (vm_run("command -v dmextract >/dev/null && command -v dmmerge >/dev/null && command -v mkfs.ext4 >/dev/null"))
		SKIP(return, "dmextract, dmmerge or mkfs.ext4 is missing");
	teardown_all();
	memset(&self->x, 0, sizeof(self->x));

	/* Source data and its replay copy and log on vda, the replica and
	 * the undo ext4 on vdb, the source metadata on vdd. */
	ASSERT_EQ(0, slice("data", VM_DISK_A, 0, DEV_SECT));
	ASSERT_EQ(0, slice("datar", VM_DISK_A, DEV_SECT, DEV_SECT));
	ASSERT_EQ(0, slice("datal", VM_DISK_A, 2 * DEV_SECT, DATA_LOG_SECT));
	ASSERT_EQ(0, slice("rep", VM_DISK_B, 0, DEV_SECT));
	ASSERT_EQ(0, slice("repr", VM_DISK_B, DEV_SECT, DEV_SECT));
	ASSERT_EQ(0, slice("repl", VM_DISK_B, 2 * DEV_SECT, REP_LOG_SECT));
	ASSERT_EQ(0, slice("fs", VM_DISK_B, 512 * MIB_SECT, FS_SECT));
	ASSERT_EQ(0, slice("fsr", VM_DISK_B, 512 * MIB_SECT + FS_SECT, FS_SECT));
	ASSERT_EQ(0, slice("fsl", VM_DISK_B, 512 * MIB_SECT + 2 * FS_SECT,
			   FS_LOG_SECT));
	ASSERT_EQ(0, slice("meta", VM_DISK_D, 0, META_SECT));
	ASSERT_EQ(0, slice("metar", VM_DISK_D, META_SECT, META_SECT));
	ASSERT_EQ(0, slice("metal", VM_DISK_D, 2 * META_SECT, META_LOG_SECT));
	ASSERT_EQ(0, zero(LW("data"), DEV_SECT));
	ASSERT_EQ(0, zero(LW("rep"), DEV_SECT));
	ASSERT_EQ(0, zero(LW("fs"), FS_SECT));
	ASSERT_EQ(0, zero(LW("meta"), META_SECT));
	ASSERT_EQ(0, zero(LW("datal"), MIB_SECT));
	ASSERT_EQ(0, zero(LW("repl"), MIB_SECT));
	ASSERT_EQ(0, zero(LW("fsl"), MIB_SECT));
	ASSERT_EQ(0, zero(LW("metal"), MIB_SECT));
	ASSERT_EQ(0, logwrites("lwd", LW("data"), LW("datal"), DEV_SECT));
	ASSERT_EQ(0, logwrites("lwm", LW("meta"), LW("metal"), META_SECT));
	ASSERT_EQ(0, logwrites("lwr", LW("rep"), LW("repl"), DEV_SECT));
	ASSERT_EQ(0, logwrites("lwf", LW("fs"), LW("fsl"), FS_SECT));
	/* Both sides start blank and equal: "clean". */
	ASSERT_EQ(0, vm_run("echo '" TRACK_TABLE(LW("lwd"), LW("lwm"), "5")
			    " clean' | dmsetup create --noudevsync " TT_NAME));
	ASSERT_EQ(0, vm_run("mkfs.ext4 -q -F -E nodiscard " LW("lwf")));
	mkdir(FSMNT, 0755);
	ASSERT_EQ(0, mount(LW("lwf"), FSMNT, "ext4", 0, NULL));

	self->x.image_n = calloc(NBLK, BS);
	self->x.image_n1 = malloc(NBLK * BS);
	ASSERT_EQ(0, posix_memalign((void **)&self->x.buf, 4096, NBLK * BS));
	ASSERT_NE(NULL, self->x.image_n);
	ASSERT_NE(NULL, self->x.image_n1);
}

FIXTURE_TEARDOWN(sc)
{
	teardown_all();
	free(self->x.image_n);
	free(self->x.image_n1);
	free(self->x.buf);
}

TEST_F_TIMEOUT(sc, power_loss_mid_snapshot_sync, 1500)
{
	struct scx *x = &self->x;
	const char *xopt = strcmp(baseline(), "nosnap") ? "--snapshot" :
			   "--no-snapshot";
	const char *mopt = strcmp(baseline(), "noundo") ? "--undo " UNDO : "";
	int i, rc, src_lost = 0, rep_bad = 0, at_n = 0, at_n1 = 0, rolled = 0;
	struct tt_extents d = { 0 };
	uint64_t first = 0, n;
	struct lw_stats s;

	TH_LOG("sync N+1 with dmextract %s and dmmerge %s", xopt,
	       *mopt ? mopt : "(no --undo)");

	/* Sync N: a few blocks, made durable, synced and committed. */
	ASSERT_EQ(0, write_blocks(SEED_N, 0, FIRST_BLOCKS));
	vm_fill(x->image_n, FIRST_BLOCKS * BS, SEED_N, 0);
	ASSERT_EQ(0, vm_run("sync; dmextract %s --no-commit --no-progress " TT_NAME
			    " | dmmerge --force --state " STATE " " LW("lwr"), xopt));
	ASSERT_EQ(0, vm_run("dmsetup message " TT_NAME " 0 commit"));
	ASSERT_EQ(0, vm_run("sync"));

	/* Freeze N+1's image: every block, durable before the freeze. */
	ASSERT_EQ(0, write_blocks(SEED_N1, 0, NBLK));
	ASSERT_EQ(0, vm_run("sync"));
	vm_fill(x->image_n1, NBLK * BS, SEED_N1, 0);
	ASSERT_EQ(0, mark_all(x, "before"));

	rc = relay_sync(_metadata, x, xopt, mopt);
	EXPECT_EQ(0, rc) TH_LOG("dmmerge failed");
	ASSERT_EQ(0, vm_run("sync"));
	/* Applied and synced, not committed yet: a crash here. */
	ASSERT_EQ(0, mark_all(x, "applied"));
	/* The sync's own verdict, before any crash: the image of N+1. */
	ASSERT_EQ(0, read_dev(LW("lwr"), x->buf));
	n = differ(x->buf, x->image_n1, &first);
	TH_LOG("after the sync, the replica differs from the image of freeze N+1 in %llu blocks (first %llu)",
	       (unsigned long long)n, (unsigned long long)first);
	EXPECT_EQ(0, n);
	ASSERT_EQ(0, vm_run("dmsetup message " TT_NAME " 0 commit"));

	/* Everything logged: the logs are complete once the targets go. */
	umount2(FSMNT, 0);
	tt_remove(TT_NAME "-view");
	tt_remove(TT_NAME);
	tt_remove("lt-sc-lwd");
	tt_remove("lt-sc-lwm");
	tt_remove("lt-sc-lwr");
	tt_remove("lt-sc-lwf");

	for (i = 0; i < x->nr_marks; i++) {
		const char *mk = x->marks[i];

		/* The source: what differs from freeze N's image is dirty. */
		EXPECT_EQ(0, zero(LW("datar"), DEV_SECT));
		EXPECT_EQ(0, zero(LW("metar"), META_SECT));
		EXPECT_EQ(0, lw_replay(LW("datal"), LW("datar"), mk, &s));
		EXPECT_TRUE(s.found) TH_LOG("mark %s missing from the data log", mk);
		EXPECT_EQ(0, lw_replay(LW("metal"), LW("metar"), mk, &s));
		EXPECT_TRUE(s.found) TH_LOG("mark %s missing from the metadata log", mk);
		tt_remove("lt-sc-check");
		EXPECT_EQ(0, vm_run("echo '" TRACK_TABLE(LW("datar"), LW("metar"), "4")
				    "' | dmsetup create --noudevsync lt-sc-check"));
		EXPECT_EQ(0, tt_extents("lt-sc-check", TRACK_DM_ACTIVE, &d));
		EXPECT_EQ(0, read_dev(LW("datar"), x->buf));
		tt_remove("lt-sc-check");
		n = source_lost(x, &d, &first);
		EXPECT_EQ(0, n)
			TH_LOG("power loss at %s: %llu source blocks differ from the replica's last commit and are not dirty (first %llu)",
			       mk, (unsigned long long)n,
			       (unsigned long long)first);
		src_lost += n;

		/* The replica: N+1, or rolled back to N. */
		EXPECT_EQ(0, zero(LW("repr"), DEV_SECT));
		EXPECT_EQ(0, zero(LW("fsr"), FS_SECT));
		EXPECT_EQ(0, lw_replay(LW("repl"), LW("repr"), mk, &s));
		EXPECT_EQ(0, lw_replay(LW("fsl"), LW("fsr"), mk, &s));
		EXPECT_EQ(0, read_dev(LW("repr"), x->buf));
		if (!differ(x->buf, x->image_n1, &first)) {
			at_n1++;
			TH_LOG("power loss at %-8s: source dirty %s; the replica is the image of freeze N+1",
			       mk, tt_str(&d));
			continue;
		}
		if (!differ(x->buf, x->image_n, &first)) {
			at_n++;
			TH_LOG("power loss at %-8s: source dirty %s; the replica is the image of freeze N (untouched)",
			       mk, tt_str(&d));
			continue;
		}
		rc = -1;
		if (*mopt && !mount(LW("fsr"), FSMNT, "ext4", 0, NULL)) {
			rc = vm_run("dmmerge --rollback " UNDO " --state " STATE
				    " " LW("repr") " 2>/tmp/sc-rb.err");
			vm_run("sed 's/^/# rollback: /' /tmp/sc-rb.err");
			umount2(FSMNT, 0);
		}
		EXPECT_EQ(0, read_dev(LW("repr"), x->buf));
		n = differ(x->buf, x->image_n, &first);
		EXPECT_EQ(0, rc) TH_LOG("power loss at %s: rollback failed", mk);
		EXPECT_EQ(0, n)
			TH_LOG("power loss at %s: after the rollback the replica differs from the image of freeze N in %llu blocks (first %llu)",
			       mk, (unsigned long long)n,
			       (unsigned long long)first);
		if (!rc && !n)
			rolled++;
		else
			rep_bad++;
		TH_LOG("power loss at %-8s: source dirty %s; the replica mixed N and N+1, %s",
		       mk, tt_str(&d),
		       !rc && !n ? "rolled back to the image of freeze N" :
		       "NOT an image of freeze N or N+1");
	}
	free(d.e);
	TH_LOG("%d power losses: source blocks lost %d; replica at N+1 %d, at N %d, rolled back to N %d, neither %d",
	       x->nr_marks, src_lost, at_n1, at_n, rolled, rep_bad);
	EXPECT_EQ(0, src_lost);
	EXPECT_EQ(0, rep_bad);
	/* The marks must have caught the apply half way at least once. */
	EXPECT_LT(0, rolled + rep_bad)
		TH_LOG("no power loss fell inside the apply: the test saw no interrupted sync");
}

TEST_HARNESS_MAIN
