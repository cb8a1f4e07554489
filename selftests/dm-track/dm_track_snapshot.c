// SPDX-License-Identifier: GPL-2.0
/*
 * Snapshot mode: "freeze snapshot" keeps the frozen blocks readable as they
 * were at the freeze through a track-view device, while the application
 * goes on writing them; when the preserved data reaches its limit the
 * snapshot fails, never a write, and the epoch can only be aborted.
 *
 * With LIBTRACK_SNAP_BASELINE=1 the same checks run without snapshot mode
 * (plain freeze, the copy read from the track device, as before): they
 * fail, which is what the mode is for.
 */
#include <sys/mman.h>
#include <sys/syscall.h>

#include <linux/aio_abi.h>

#include "kselftest_harness.h"
#include "track_test.h"

#define BS		4096ULL
#define SECTORS		8192ULL			/* 4 MiB: 1024 blocks */
#define NBLOCKS		(SECTORS * 512 / BS)
#define FROZEN		512ULL			/* blocks 0..511 are frozen */
#define VIEW_NAME	"lt-view"
#define VIEW_PATH	"/dev/mapper/" VIEW_NAME
#define SEED_FROZEN	1
#define SEED_NEW	2
#define COW_NAME	"lt-cow"
#define COW_PATH	"/dev/mapper/" COW_NAME
#define UNDER_NAME	"lt-under"		/* dm-dust or dm-delay */
#define UNDER_PATH	"/dev/mapper/" UNDER_NAME

static int baseline(void)
{
	const char *s = getenv("LIBTRACK_SNAP_BASELINE");

	return s && *s == '1';
}

/* The device the copier reads: the view, or the track device itself. */
static const char *copy_path(void)
{
	return baseline() ? TT_PATH : VIEW_PATH;
}

/* Send "freeze snapshot LIMIT" (or a plain freeze in baseline mode). */
static int snap_freeze(const char *limit, uint64_t *epoch)
{
	char cmd[256], out[64] = "";
	FILE *f;
	int st;

	if (baseline())
		snprintf(cmd, sizeof(cmd), "dmsetup message %s 0 freeze",
			 TT_NAME);
	else
		snprintf(cmd, sizeof(cmd),
			 "dmsetup message %s 0 freeze snapshot %s", TT_NAME,
			 limit);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (!fgets(out, sizeof(out), f))
		out[0] = 0;
	st = pclose(f);
	if (st)
		return -1;
	*epoch = strtoull(out, NULL, 10);
	return *epoch ? 0 : -1;
}

static int view_create_sectors(unsigned long long sectors)
{
	vm_run("dmsetup remove --noudevsync " VIEW_NAME " 2>/dev/null");
	return vm_run("dmsetup create --noudevsync " VIEW_NAME
		      " --table '0 %llu track-view " TT_PATH "'", sectors);
}

static int view_create(void)
{
	return view_create_sectors(SECTORS);
}

static void view_remove(void)
{
	vm_run("dmsetup remove --noudevsync " VIEW_NAME " 2>/dev/null");
}

/* The snapshot fields of the status line: state, preserved bytes, limit. */
static int snap_status(char *state, size_t n, long long *bytes,
		       long long *limit)
{
	char line[512], f[13][64];
	FILE *p = popen("dmsetup status " TT_NAME, "r");
	int k;

	if (!p)
		return -1;
	if (!fgets(line, sizeof(line), p)) {
		pclose(p);
		return -1;
	}
	pclose(p);
	/* <start> <len> track + 10 fields + 3 */
	k = sscanf(line, "%*s %*s %*s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s %63s",
		   f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9],
		   f[10], f[11], f[12]);
	if (k != 13)
		return -1;
	snprintf(state, n, "%s", f[10]);
	*bytes = strcmp(f[11], "-") ? atoll(f[11]) : -1;
	*limit = strcmp(f[12], "-") ? atoll(f[12]) : -1;
	return 0;
}

/* Write SEED's pattern over blocks FIRST..FIRST+COUNT-1 of the track device. */
static int write_blocks(unsigned int seed, uint64_t first, uint64_t count)
{
	size_t len = count * BS;
	void *buf;
	ssize_t n;
	int fd;

	if (posix_memalign(&buf, 4096, len))
		return -1;
	vm_fill(buf, len, seed, first * BS);
	fd = open(TT_PATH, O_WRONLY | O_DIRECT);
	if (fd < 0) {
		free(buf);
		return -1;
	}
	n = pwrite(fd, buf, len, first * BS);
	close(fd);
	free(buf);
	return n == (ssize_t)len ? 0 : -1;
}

/* Does BUF hold SEED's pattern for LEN bytes at OFF? First bad offset or -1. */
static long long first_mismatch(const unsigned char *buf, size_t len,
				unsigned int seed, unsigned long long off)
{
	unsigned char *want = malloc(len);
	long long bad = -1;
	size_t i;

	vm_fill(want, len, seed, off);
	for (i = 0; i < len; i++)
		if (buf[i] != want[i]) {
			bad = off + i;
			break;
		}
	free(want);
	return bad;
}

FIXTURE(snap) {
	struct track_dm *dm;
};

FIXTURE_SETUP(snap)
{
	struct track_dm_params p = {
		.data_dev = VM_DISK_B, .length = SECTORS, .clean = 1,
	};

	TT_REQUIRE_TARGET();
	if (!baseline() && !vm_dm_target_present("track-view"))
		SKIP(return, "no track-view target: no snapshot mode");
	view_remove();
	tt_remove(TT_NAME);
	ASSERT_EQ(0, track_dm_create(TT_NAME, &p));
	ASSERT_EQ(0, track_dm_open(TT_NAME, &self->dm));
	/* Before the freeze: a probe of the new view marks nothing read. */
	if (!baseline())
		ASSERT_EQ(0, view_create());
}

FIXTURE_TEARDOWN(snap)
{
	/* What a failed file system test may leave mounted or frozen. */
	vm_run("fsfreeze --unfreeze /mnt/lt-snap 2>/dev/null; umount /mnt/lt-snap-img /mnt/lt-snap 2>/dev/null");
	if (self->dm)
		track_dm_free(self->dm);
	view_remove();
	tt_remove(TT_NAME);
	vm_run("dmsetup remove --noudevsync " COW_NAME " 2>/dev/null");
	vm_run("dmsetup remove --noudevsync " UNDER_NAME " 2>/dev/null");
}

/*
 * Write a pattern, freeze in snapshot mode, then overwrite every frozen
 * block and others while a slow copy reads the view block by block: every
 * block read is the pre-freeze pattern. The next snapshot brings the new
 * data, and the preserved bytes never exceed the frozen blocks written.
 */
TEST_F(snap, overwritten_frozen_blocks_read_as_at_freeze)
{
	long long bytes, limit, bad_at = -1;
	uint64_t b, e, bad = 0;
	struct track_dm_status st;
	char state[64];
	unsigned char *buf;
	pid_t writer;
	int fd, status;

	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, FROZEN));
	ASSERT_EQ(0, snap_freeze("16M", &e));

	/* Half overwritten before the copy starts, all of it during. */
	ASSERT_EQ(0, write_blocks(SEED_NEW, 0, FROZEN / 2));
	writer = fork();
	ASSERT_LE(0, writer);
	if (!writer) {
		/* Every frozen block and the unfrozen ones, back to front. */
		for (b = NBLOCKS; b-- > 0;)
			if (write_blocks(SEED_NEW, b, 1))
				_exit(1);
		_exit(0);
	}

	ASSERT_EQ(0, posix_memalign((void **)&buf, 4096, BS));
	fd = open(copy_path(), O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	for (b = 0; b < FROZEN; b++) {
		long long m;

		ASSERT_EQ((ssize_t)BS, pread(fd, buf, BS, b * BS))
			TH_LOG("reading block %" PRIu64 ": %m", b);
		m = first_mismatch(buf, BS, SEED_FROZEN, b * BS);
		if (m >= 0) {
			if (!bad++)
				bad_at = m;
		}
		usleep(2000);	/* a slow copy */
	}
	close(fd);
	ASSERT_EQ(writer, waitpid(writer, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("an application write failed");
	EXPECT_EQ(0, bad) TH_LOG("%" PRIu64 " of %llu frozen blocks were not the pre-freeze data (first at byte %lld)",
				 bad, FROZEN, bad_at);

	if (!baseline()) {
		ASSERT_EQ(0, snap_status(state, sizeof(state), &bytes, &limit));
		EXPECT_STREQ("active", state);
		EXPECT_EQ(16LL << 20, limit);
		/* Only frozen blocks written before the copy read them. */
		EXPECT_GE((long long)(FROZEN * BS), bytes);
		EXPECT_LT(0, bytes);
		TH_LOG("preserved %lld bytes for %llu frozen blocks", bytes,
		       FROZEN);
	}
	ASSERT_EQ(0, track_dm_commit(self->dm, e));

	/* The next sync brings the new pattern. */
	ASSERT_EQ(0, snap_freeze("16M", &e));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(NBLOCKS, st.dirty_frozen);
	fd = open(copy_path(), O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	bad = 0;
	for (b = 0; b < NBLOCKS; b++) {
		ASSERT_EQ((ssize_t)BS, pread(fd, buf, BS, b * BS));
		bad += first_mismatch(buf, BS, SEED_NEW, b * BS) >= 0;
	}
	close(fd);
	EXPECT_EQ(0, bad);
	ASSERT_EQ(0, track_dm_commit(self->dm, e));
	free(buf);
}

/*
 * A limit of 16 blocks, and every frozen block written: the snapshot
 * fails, the writes do not. The view then fails reads, commit is refused,
 * abort gives every block back, and the next snapshot converges.
 */
TEST_F(snap, limit_reached_fails_the_snapshot_not_the_writes)
{
	long long bytes, limit;
	struct track_dm_status st;
	unsigned char *buf;
	char state[64];
	uint64_t b, e;
	ssize_t n;
	int fd;

	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, FROZEN));
	ASSERT_EQ(0, snap_freeze("64K", &e));

	/* The copy has read a few blocks when the writes come. */
	ASSERT_EQ(0, posix_memalign((void **)&buf, 4096, 4 * BS));
	fd = open(copy_path(), O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)(4 * BS), pread(fd, buf, 4 * BS, 0));
	for (b = 0; b < NBLOCKS; b += 8)
		ASSERT_EQ(0, write_blocks(SEED_NEW, b, 8))
			TH_LOG("an application write failed at block %" PRIu64, b);

	n = pread(fd, buf, BS, 100 * BS);
	if (baseline()) {
		/* Nothing says the copy is no longer the frozen image. */
		EXPECT_EQ(-1, n) TH_LOG("the copy read on: block 100 is %s",
					first_mismatch(buf, BS, SEED_FROZEN, 100 * BS) < 0 ?
					"the frozen data" : "new data");
		close(fd);
		free(buf);
		return;
	}
	EXPECT_EQ(-1, n);
	EXPECT_EQ(EIO, errno);
	close(fd);

	ASSERT_EQ(0, snap_status(state, sizeof(state), &bytes, &limit));
	EXPECT_STREQ("failed", state);
	EXPECT_GE(64LL << 10, bytes);
	EXPECT_EQ(64LL << 10, limit);
	EXPECT_EQ(-EIO, track_dm_commit(self->dm, e));
	ASSERT_EQ(0, track_dm_abort(self->dm, e));
	ASSERT_EQ(0, snap_status(state, sizeof(state), &bytes, &limit));
	EXPECT_STREQ("-", state);
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(NBLOCKS, st.dirty_active);

	/* The next sync converges on what the application wrote. */
	ASSERT_EQ(0, snap_freeze("16M", &e));
	fd = open(copy_path(), O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	for (b = 0; b < NBLOCKS; b++) {
		ASSERT_EQ((ssize_t)BS, pread(fd, buf, BS, b * BS));
		ASSERT_GT(0, first_mismatch(buf, BS, SEED_NEW, b * BS))
			TH_LOG("block %" PRIu64 " after the retry", b);
	}
	close(fd);
	ASSERT_EQ(0, track_dm_commit(self->dm, e));
	free(buf);
}

/*
 * Commit and abort drop the preserved data; a new freeze ends a snapshot
 * whose copier went away, and its epoch can no longer be committed.
 */
TEST_F(snap, commit_abort_and_refreeze_drop_preserved_data)
{
	long long bytes, limit;
	char state[64];
	uint64_t e, e2;

	if (baseline())
		SKIP(return, "snapshot mode only");
	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, FROZEN));
	ASSERT_EQ(0, snap_freeze("1M", &e));
	ASSERT_EQ(0, write_blocks(SEED_NEW, 0, 16));
	ASSERT_EQ(0, snap_status(state, sizeof(state), &bytes, &limit));
	EXPECT_STREQ("active", state);
	EXPECT_EQ(16 * BS, bytes);
	EXPECT_EQ(1 << 20, limit);

	ASSERT_EQ(0, snap_freeze("1M", &e2));
	EXPECT_EQ(e + 1, e2);
	ASSERT_EQ(0, snap_status(state, sizeof(state), &bytes, &limit));
	EXPECT_EQ(0, bytes);
	EXPECT_EQ(-ESTALE, track_dm_commit(self->dm, e));
	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, 4));
	ASSERT_EQ(0, snap_status(state, sizeof(state), &bytes, &limit));
	EXPECT_EQ(4 * BS, bytes);
	ASSERT_EQ(0, track_dm_abort(self->dm, e2));
	ASSERT_EQ(0, snap_status(state, sizeof(state), &bytes, &limit));
	EXPECT_STREQ("-", state);
	EXPECT_EQ(-1, bytes);

	/* Bad limits are refused and change nothing. */
	EXPECT_NE(0, vm_run("dmsetup message " TT_NAME " 0 freeze snapshot 12x 2>/dev/null"));
	EXPECT_NE(0, vm_run("dmsetup message " TT_NAME " 0 freeze shapshot 2>/dev/null"));
}

/*
 * View reads and application writes on the same blocks at once, on every
 * CPU: writers write random runs, some of them partial blocks; readers
 * read random runs, partial ones first and then each block whole once.
 * Every byte read is the freeze-time pattern.
 */
#define ROUNDS	4
#define RSPAN	8

static int race_reader(int id, int nreaders, unsigned int seed)
{
	unsigned char *buf;
	int fd, bad = 0;
	uint64_t b;

	if (posix_memalign((void **)&buf, 4096, RSPAN * BS))
		return 2;
	fd = open(copy_path(), O_RDONLY | O_DIRECT);
	if (fd < 0)
		return 2;
	srand(seed * 31 + id);
	/*
	 * Partial reads of this reader's blocks, none read whole yet: a
	 * block read whole is no longer preserved, and a later read of it
	 * may return what a writer wrote since (as documented), so the 8
	 * sectors from 0 are never read here.
	 */
	for (b = (uint64_t)id * RSPAN; b < FROZEN; b += nreaders * RSPAN) {
		unsigned int s = rand() % 8, n = 1 + rand() % (8 - s);
		off_t off;

		if (!s && n == 8)
			n = 7;
		off = (b + rand() % RSPAN) * BS + s * 512;

		if (pread(fd, buf, n * 512, off) != (ssize_t)(n * 512))
			bad |= 4;
		else if (first_mismatch(buf, n * 512, SEED_FROZEN, off) >= 0)
			bad |= 1;
	}
	/* Then this reader's share, in runs of 1..RSPAN whole blocks. */
	for (b = (uint64_t)id * RSPAN; b < FROZEN;) {
		uint64_t chunk_end = b - b % RSPAN + RSPAN;
		unsigned int n = 1 + rand() % (chunk_end - b);

		if (pread(fd, buf, n * BS, b * BS) != (ssize_t)(n * BS))
			bad |= 4;
		else if (first_mismatch(buf, n * BS, SEED_FROZEN, b * BS) >= 0)
			bad |= 1;
		b += n;
		if (b == chunk_end)
			b += (uint64_t)(nreaders - 1) * RSPAN;
	}
	close(fd);
	free(buf);
	return bad;
}

static int race_writer(int id, volatile int *stop, unsigned int seed)
{
	unsigned char *buf;
	int fd;

	if (posix_memalign((void **)&buf, 4096, RSPAN * BS))
		return 2;
	fd = open(TT_PATH, O_WRONLY | O_DIRECT);
	if (fd < 0)
		return 2;
	srand(seed * 17 + id + 1000);
	while (!*stop) {
		uint64_t s = rand() % (NBLOCKS * 8 - 8);
		unsigned int n = 1 + rand() % (RSPAN * 8);
		off_t off = s * 512;

		if (s + n > NBLOCKS * 8)
			n = NBLOCKS * 8 - s;
		vm_fill(buf, n * 512, SEED_NEW + seed, off);
		if (pwrite(fd, buf, n * 512, off) != (ssize_t)(n * 512)) {
			close(fd);
			return 3;
		}
	}
	close(fd);
	free(buf);
	return 0;
}

TEST_F(snap, view_reads_race_writes_on_every_cpu)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int nproc = cpus < 2 ? 2 : cpus;
	int round, i, failed_reads = 0, failed_writes = 0;
	volatile int *stop;

	TH_LOG("%ld CPUs online, %d readers and %d writers", cpus, nproc, nproc);
	stop = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, (void *)stop);

	for (round = 0; round < ROUNDS; round++) {
		pid_t rd[64], wr[64];
		uint64_t e;
		int status;

		ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, NBLOCKS));
		ASSERT_EQ(0, snap_freeze("16M", &e));
		*stop = 0;
		for (i = 0; i < nproc; i++) {
			wr[i] = fork();
			ASSERT_LE(0, wr[i]);
			if (!wr[i])
				_exit(race_writer(i, stop, round));
		}
		for (i = 0; i < nproc; i++) {
			rd[i] = fork();
			ASSERT_LE(0, rd[i]);
			if (!rd[i])
				_exit(race_reader(i, nproc, round));
		}
		for (i = 0; i < nproc; i++) {
			ASSERT_EQ(rd[i], waitpid(rd[i], &status, 0));
			if (WEXITSTATUS(status))
				TH_LOG("round %d reader %d: %s", round, i,
				       WEXITSTATUS(status) & 1 ?
				       "read data that is not the frozen image" :
				       "a read failed");
			failed_reads += !!WEXITSTATUS(status);
		}
		*stop = 1;
		for (i = 0; i < nproc; i++) {
			ASSERT_EQ(wr[i], waitpid(wr[i], &status, 0));
			failed_writes += !!WEXITSTATUS(status);
		}
		ASSERT_EQ(0, track_dm_commit(self->dm, e));
	}
	EXPECT_EQ(0, failed_writes);
	EXPECT_EQ(0, failed_reads);
}

/*
 * Run "dmextract ARGS lt-track" into STREAM, reading its output slowly
 * (DELAY_US per 64 KiB); once the first bytes came (the epoch is frozen),
 * fork a writer that overwrites every block with SEED_NEW, the frozen ones
 * first and back to front, so that it meets the copy halfway.
 * Returns dmextract's exit status; *WRITES_OK whether every write worked.
 */
#define TSECTORS	98304ULL		/* 48 MiB */
#define TBLOCKS		(TSECTORS * 512 / BS)
#define TFROZEN		8192ULL			/* 32 MiB: more than dmextract reads ahead */
#define CHUNK		65536

static int extract_slowly(const char *args, const char *stream, int delay_us,
			  int *writes_ok)
{
	char cmd[512], *buf = malloc(CHUNK);
	pid_t x, writer = -1;
	int p[2], out, st;
	ssize_t n;

	*writes_ok = 0;
	if (!buf || pipe(p))
		return -1;
	snprintf(cmd, sizeof(cmd), "exec dmextract %s " TT_NAME " 2>/tmp/x.err",
		 args);
	x = fork();
	if (x < 0)
		return -1;
	if (!x) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	out = open(stream, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	while ((n = read(p[0], buf, CHUNK)) > 0) {
		if (write(out, buf, n) != n)
			break;
		if (writer < 0) {
			writer = fork();
			if (!writer) {
				uint64_t b;

				/* The frozen blocks the copy reaches last first. */
				for (b = TFROZEN; b-- > 0;)
					if (write_blocks(SEED_NEW, b, 1))
						_exit(1);
				for (b = TFROZEN; b < TBLOCKS; b++)
					if (write_blocks(SEED_NEW, b, 1))
						_exit(1);
				_exit(0);
			}
		}
		usleep(delay_us);
	}
	close(p[0]);
	close(out);
	free(buf);
	if (writer > 0 && waitpid(writer, &st, 0) == writer)
		*writes_ok = WIFEXITED(st) && !WEXITSTATUS(st);
	if (waitpid(x, &st, 0) != x || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Blocks FIRST..FIRST+COUNT-1 of PATH that do not hold SEED's pattern. */
static uint64_t bad_blocks(const char *path, unsigned int seed, uint64_t first,
			   uint64_t count)
{
	unsigned char buf[BS];
	uint64_t b, bad = 0;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return count;
	for (b = first; b < first + count; b++)
		if (pread(fd, buf, BS, b * BS) != (ssize_t)BS ||
		    first_mismatch(buf, BS, seed, b * BS) >= 0)
			bad++;
	close(fd);
	return bad;
}

/* The tool tests need a frozen set larger than dmextract reads ahead. */
static int big_device(struct track_dm **dm)
{
	struct track_dm_params p = {
		.data_dev = VM_DISK_B, .length = TSECTORS, .clean = 1,
	};

	track_dm_free(*dm);
	*dm = NULL;
	view_remove();
	tt_remove(TT_NAME);
	if (track_dm_create(TT_NAME, &p))
		return -1;
	return track_dm_open(TT_NAME, dm);
}

#define REPLICA	"/tmp/snap-replica"
#define STREAM	"/tmp/snap-stream"

/*
 * The tools: dmextract --snapshot copies slowly while every block is
 * overwritten, and the replica is the pre-freeze pattern in every frozen
 * block; the next sync brings the new pattern.
 */
TEST_F(snap, dmextract_snapshot_replica_is_the_freeze_image)
{
	int rc, writes_ok;

	if (vm_run("command -v dmextract >/dev/null && command -v dmmerge >/dev/null"))
		SKIP(return, "dmextract or dmmerge is not installed");
	ASSERT_EQ(0, big_device(&self->dm));	/* dmextract makes its view */
	ASSERT_EQ(0, vm_run("dd if=/dev/zero of=" REPLICA " bs=1M count=48 2>/dev/null"));
	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, TFROZEN));

	rc = extract_slowly(baseline() ? "--no-snapshot" : "--snapshot=64M",
			    STREAM, 20000, &writes_ok);
	vm_run("sed 's/^/# dmextract: /' /tmp/x.err");
	ASSERT_EQ(0, rc);
	EXPECT_EQ(1, writes_ok);
	ASSERT_EQ(0, vm_run("dmmerge " REPLICA " <" STREAM));
	EXPECT_EQ(0, bad_blocks(REPLICA, SEED_FROZEN, 0, TFROZEN))
		TH_LOG("frozen blocks of the replica that are not the pre-freeze data");

	ASSERT_EQ(0, vm_run("dmextract %s " TT_NAME " >" STREAM,
			    baseline() ? "--no-snapshot" : "--snapshot"));
	ASSERT_EQ(0, vm_run("dmmerge " REPLICA " <" STREAM));
	EXPECT_EQ(0, bad_blocks(REPLICA, SEED_NEW, 0, TBLOCKS));
	unlink(STREAM);
	unlink(REPLICA);
}

/*
 * A snapshot limit the writes exceed mid-copy: dmextract says the snapshot
 * failed and exits 1, the epoch is aborted, no write failed, and the next
 * sync converges.
 */
TEST_F(snap, dmextract_snapshot_limit_fails_the_copy_clearly)
{
	struct track_dm_status st;
	int rc, writes_ok;

	if (baseline())
		SKIP(return, "snapshot mode only");
	if (vm_run("command -v dmextract >/dev/null && command -v dmmerge >/dev/null"))
		SKIP(return, "dmextract or dmmerge is not installed");
	ASSERT_EQ(0, big_device(&self->dm));
	ASSERT_EQ(0, vm_run("dd if=/dev/zero of=" REPLICA " bs=1M count=48 2>/dev/null"));
	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, TFROZEN));

	rc = extract_slowly("--snapshot=64K", STREAM, 20000, &writes_ok);
	vm_run("sed 's/^/# dmextract: /' /tmp/x.err");
	EXPECT_EQ(1, rc);
	EXPECT_EQ(1, writes_ok) TH_LOG("an application write failed");
	EXPECT_EQ(0, vm_run("grep -q 'snapshot of epoch .* failed' /tmp/x.err"));
	EXPECT_EQ(0, vm_run("grep -q 'abort' /tmp/x.err"));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(0, st.frozen_epoch);
	EXPECT_EQ(TRACK_DM_SNAP_NONE, st.snapshot);
	EXPECT_EQ(TBLOCKS, st.dirty_active);
	EXPECT_NE(0, vm_run("dmsetup ls | grep -q '^" TT_NAME "-view'"))
		TH_LOG("dmextract left its view device behind");

	/* The next sync converges (the stream of the failed one is not used). */
	ASSERT_EQ(0, vm_run("dmextract --snapshot " TT_NAME " >" STREAM));
	ASSERT_EQ(0, vm_run("dmmerge " REPLICA " <" STREAM));
	EXPECT_EQ(0, bad_blocks(REPLICA, SEED_NEW, 0, TBLOCKS));
	unlink(STREAM);
	unlink(REPLICA);
}

/*
 * A file system mounted on the track device holds it exclusively: the
 * view must not need to open it. ext4 is written, the view is made while
 * it is mounted, the freeze is taken with the file system frozen
 * (FIFREEZE), and every file is then rewritten, before and while the view
 * is copied: the copy is a clean file system (e2fsck -fn, no journal to
 * replay) holding every file as it was at the freeze.
 */
#define MNT		"/mnt/lt-snap"
#define IMG		"/tmp/snap-img"
#define IMG_MNT		"/mnt/lt-snap-img"
#define NFILES		32
#define FILE_BYTES	(256 * 1024)

static int write_file(const char *dir, int i, unsigned int seed)
{
	char path[128];
	void *buf = malloc(FILE_BYTES);
	ssize_t n;
	int fd;

	if (!buf)
		return -1;
	vm_fill(buf, FILE_BYTES, seed, (unsigned long long)i * FILE_BYTES);
	snprintf(path, sizeof(path), "%s/f%02d", dir, i);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		free(buf);
		return -1;
	}
	n = write(fd, buf, FILE_BYTES);
	if (fsync(fd))
		n = -1;
	close(fd);
	free(buf);
	return n == FILE_BYTES ? 0 : -1;
}

/* Files of DIR that do not hold SEED's content. */
static int bad_files(const char *dir, unsigned int seed)
{
	unsigned char *buf = malloc(FILE_BYTES + 1);
	char path[128];
	int i, fd, bad = 0;
	ssize_t n;

	for (i = 0; i < NFILES; i++) {
		snprintf(path, sizeof(path), "%s/f%02d", dir, i);
		fd = open(path, O_RDONLY);
		n = fd < 0 ? -1 : read(fd, buf, FILE_BYTES + 1);
		if (fd >= 0)
			close(fd);
		if (n != FILE_BYTES ||
		    first_mismatch(buf, FILE_BYTES, seed,
				   (unsigned long long)i * FILE_BYTES) >= 0)
			bad++;
	}
	free(buf);
	return bad;
}

static int churn(unsigned int seed)
{
	int i;

	for (i = NFILES; i-- > 0;)
		if (write_file(MNT, i, seed))
			return -1;
	return vm_run("rm -f " MNT "/extra; dd if=/dev/urandom of=" MNT
		      "/extra bs=64k count=64 conv=fsync 2>/dev/null");
}

static void fs_cleanup(void)
{
	vm_run("fsfreeze --unfreeze " MNT " 2>/dev/null");
	vm_run("umount " IMG_MNT " 2>/dev/null");
	vm_run("umount " MNT " 2>/dev/null");
	unlink(IMG);
}

TEST_F(snap, view_of_a_mounted_ext4_reads_the_freeze_image)
{
	unsigned char *buf;
	int fd, out, i, status;
	uint64_t b, e;
	pid_t writer;

	if (baseline())
		SKIP(return, "snapshot mode only");
	ASSERT_EQ(0, big_device(&self->dm));
	ASSERT_EQ(0, vm_run("mkfs.ext4 -q -F -b 4096 " TT_PATH " >/dev/null 2>&1"));
	ASSERT_EQ(0, vm_run("mkdir -p " MNT " " IMG_MNT " && mount -t ext4 " TT_PATH " " MNT));
	for (i = 0; i < NFILES; i++)
		ASSERT_EQ(0, write_file(MNT, i, SEED_FROZEN));

	/* Made while mounted: the view does not open the track device. */
	EXPECT_EQ(0, view_create_sectors(TSECTORS)) {
		vm_run("dmesg | grep -i track | tail -n 3 | sed 's/^/# /'");
		fs_cleanup();
		return;
	}
	ASSERT_EQ(0, vm_run("fsfreeze --freeze " MNT));
	if (snap_freeze("32M", &e)) {
		fs_cleanup();
		ASSERT_TRUE(0) TH_LOG("freeze snapshot failed");
	}
	ASSERT_EQ(0, vm_run("fsfreeze --unfreeze " MNT));

	/* Every file rewritten before the copy, and again while it runs. */
	ASSERT_EQ(0, churn(SEED_NEW));
	writer = fork();
	ASSERT_LE(0, writer);
	if (!writer)
		_exit(churn(SEED_NEW + 1) ? 1 : 0);

	ASSERT_EQ(0, posix_memalign((void **)&buf, 4096, CHUNK));
	fd = open(VIEW_PATH, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	out = open(IMG, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ASSERT_LE(0, out);
	for (b = 0; b < TSECTORS * 512; b += CHUNK) {
		ASSERT_EQ(CHUNK, pread(fd, buf, CHUNK, b))
			TH_LOG("reading the view at %" PRIu64 ": %m", b);
		ASSERT_EQ(CHUNK, pwrite(out, buf, CHUNK, b));
		usleep(1000);	/* a slow copy */
	}
	close(fd);
	close(out);
	free(buf);
	ASSERT_EQ(writer, waitpid(writer, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("an application write failed");
	ASSERT_EQ(0, track_dm_commit(self->dm, e));

	EXPECT_EQ(0, vm_run("e2fsck -fn " IMG " >/tmp/snap-fsck 2>&1"))
		vm_run("tail -n 20 /tmp/snap-fsck | sed 's/^/# /'");
	ASSERT_EQ(0, vm_run("mount -t ext4 -o ro,loop " IMG " " IMG_MNT));
	EXPECT_EQ(0, bad_files(IMG_MNT, SEED_FROZEN))
		TH_LOG("files of the copy that are not as at the freeze");
	EXPECT_NE(0, vm_run("test -e " IMG_MNT "/extra"));
	/* The live file system has the new data. */
	EXPECT_EQ(0, bad_files(MNT, SEED_NEW + 1));
	view_remove();
	fs_cleanup();
}

/*
 * The view holds no open of the track device: the track device can be
 * reloaded or removed under it. A reload ends the snapshot and a removal
 * the target: the view's reads then fail with EIO (KASAN checks that
 * nothing freed is touched), and the view is removed after.
 */
TEST_F(snap, view_reads_fail_after_the_track_device_is_reloaded_or_removed)
{
	unsigned char *buf;
	uint64_t e;
	char table[256];
	FILE *p;
	int fd;

	if (baseline())
		SKIP(return, "snapshot mode only");
	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, FROZEN));
	ASSERT_EQ(0, snap_freeze("16M", &e));
	ASSERT_EQ(0, posix_memalign((void **)&buf, 4096, BS));
	fd = open(VIEW_PATH, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)BS, pread(fd, buf, BS, 0));
	EXPECT_GT(0, first_mismatch(buf, BS, SEED_FROZEN, 0));
	ASSERT_EQ(0, write_blocks(SEED_NEW, 1, 1));

	/* Reload the same table: the snapshot ends, the view fails reads. */
	p = popen("dmsetup table " TT_NAME " | cut -d' ' -f3-", "r");
	ASSERT_NE(NULL, p);
	ASSERT_NE(NULL, fgets(table, sizeof(table), p));
	pclose(p);
	table[strcspn(table, "\n")] = 0;
	ASSERT_EQ(0, vm_run("dmsetup reload " TT_NAME " --table '0 %llu %s' && dmsetup resume " TT_NAME,
			    SECTORS, table));
	errno = 0;
	EXPECT_EQ(-1, pread(fd, buf, BS, BS));
	EXPECT_EQ(EIO, errno);
	EXPECT_NE(0, track_dm_commit(self->dm, e));
	EXPECT_EQ(0, track_dm_abort(self->dm, e));

	/* A new view of the reloaded device works, and sees the writes. */
	close(fd);
	view_remove();
	ASSERT_EQ(0, view_create());
	fd = open(VIEW_PATH, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	ASSERT_EQ((ssize_t)BS, pread(fd, buf, BS, BS));
	EXPECT_GT(0, first_mismatch(buf, BS, SEED_NEW, BS));

	/* Freeze again, then remove the track device while the view is open. */
	ASSERT_EQ(0, snap_freeze("16M", &e));
	track_dm_free(self->dm);
	self->dm = NULL;
	ASSERT_EQ(0, vm_run("dmsetup remove --noudevsync " TT_NAME))
		TH_LOG("the view must not keep the track device from removal");
	errno = 0;
	EXPECT_EQ(-1, pread(fd, buf, BS, 0));
	EXPECT_EQ(EIO, errno);
	close(fd);
	/* Nothing is left to make a view of. */
	view_remove();
	EXPECT_NE(0, view_create());
	free(buf);
}

/*
 *--------------------------------------------------------------
 * The COW device: preserved data past the memory limit.
 *--------------------------------------------------------------
 */

/* A track device of SECTORS with a COW device of COW_SECTORS, and a view. */
static int cow_device(struct track_dm **dm, unsigned long long sectors,
		      unsigned long long cow_sectors)
{
	track_dm_free(*dm);
	*dm = NULL;
	view_remove();
	tt_remove(TT_NAME);
	vm_run("dmsetup remove --noudevsync " COW_NAME " 2>/dev/null");
	if (vm_run("dmsetup create --noudevsync " COW_NAME
		   " --table '0 %llu linear " VM_DISK_C " 0'", cow_sectors))
		return -1;
	if (vm_run("dmsetup create --noudevsync " TT_NAME " --table '0 %llu track "
		   VM_DISK_B " 0 8 3 clean cow_dev " COW_PATH "'", sectors))
		return -1;
	if (track_dm_open(TT_NAME, dm))
		return -1;
	return view_create_sectors(sectors);
}

/* Blocks FIRST..FIRST+COUNT-1 of the view, read in 64 KiB, not SEED's. */
static uint64_t bad_view_blocks(unsigned int seed, uint64_t first,
				uint64_t count)
{
	uint64_t b, i, n, bad = 0;
	unsigned char *buf;
	int fd;

	if (posix_memalign((void **)&buf, 4096, CHUNK))
		return count;
	fd = open(VIEW_PATH, O_RDONLY | O_DIRECT);
	if (fd < 0) {
		free(buf);
		return count;
	}
	for (b = first; b < first + count; b += n) {
		n = first + count - b < CHUNK / BS ? first + count - b : CHUNK / BS;
		if (pread(fd, buf, n * BS, b * BS) != (ssize_t)(n * BS)) {
			bad += n;
			continue;
		}
		for (i = 0; i < n; i++)
			bad += first_mismatch(buf + i * BS, BS, seed,
					      (b + i) * BS) >= 0;
	}
	close(fd);
	free(buf);
	return bad;
}

/*
 * A memory limit of 16 blocks, a COW device, and every frozen block
 * overwritten before the copy and again during it: 16 blocks are kept in
 * memory, the other 496 on the COW device, and the view, read in reads of
 * 16 blocks that mix both, returns the freeze-time data of every one. The
 * status shows what went where; the next snapshot starts with an empty
 * COW device and reads the new data.
 */
TEST_F(snap, cow_device_holds_what_the_memory_limit_cannot)
{
	long long bytes, limit;
	struct track_dm_status st;
	int status, writes_ok;
	char state[64];
	pid_t writer;
	uint64_t e;

	if (baseline())
		SKIP(return, "snapshot mode only");
	ASSERT_EQ(0, cow_device(&self->dm, SECTORS, SECTORS));
	ASSERT_EQ(0, vm_run("dmsetup table " TT_NAME " | grep -q ' cow_dev [0-9]*:[0-9]*$'"))
		TH_LOG("dmsetup table shows the COW device as major:minor");
	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, FROZEN));
	ASSERT_EQ(0, snap_freeze("64K", &e));
	ASSERT_EQ(0, write_blocks(SEED_NEW, 0, NBLOCKS));

	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(TRACK_DM_SNAP_ACTIVE, st.snapshot);
	EXPECT_EQ(FROZEN * BS, st.snap_bytes);
	EXPECT_EQ(65536, st.snap_limit);
	EXPECT_EQ((FROZEN - 16) * BS, st.snap_cow_bytes);
	EXPECT_EQ(SECTORS * 512, st.snap_cow_size);
	ASSERT_EQ(0, snap_status(state, sizeof(state), &bytes, &limit));
	EXPECT_STREQ("active", state);

	writer = fork();
	ASSERT_LE(0, writer);
	if (!writer) {
		uint64_t b;

		for (b = NBLOCKS; b-- > 0;)
			if (write_blocks(SEED_NEW, b, 1))
				_exit(1);
		_exit(0);
	}
	EXPECT_EQ(0, bad_view_blocks(SEED_FROZEN, 0, FROZEN))
		TH_LOG("frozen blocks of the view that are not as at the freeze");
	ASSERT_EQ(writer, waitpid(writer, &status, 0));
	writes_ok = WIFEXITED(status) && !WEXITSTATUS(status);
	EXPECT_EQ(1, writes_ok) TH_LOG("an application write failed");
	ASSERT_EQ(0, track_dm_commit(self->dm, e));

	/* The next snapshot: an empty COW device, the new data. */
	ASSERT_EQ(0, snap_freeze("64K", &e));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(0, st.snap_bytes);
	EXPECT_EQ(0, st.snap_cow_bytes);
	EXPECT_EQ(0, bad_view_blocks(SEED_NEW, 0, NBLOCKS));
	ASSERT_EQ(0, track_dm_commit(self->dm, e));
}

/* The COW device must be a device of this track device's own. */
TEST_F(snap, cow_device_must_be_its_own)
{
	if (baseline())
		SKIP(return, "snapshot mode only");
	ASSERT_EQ(0, cow_device(&self->dm, SECTORS, SECTORS));
	/* Another track device on the same COW device, or its data device. */
	EXPECT_NE(0, vm_run("dmsetup create --noudevsync lt-track2 --table '0 8 track "
			    VM_DISK_D " 0 8 2 cow_dev " COW_PATH "' 2>/dev/null"));
	EXPECT_NE(0, vm_run("dmsetup create --noudevsync lt-track2 --table '0 8 track "
			    VM_DISK_D " 0 8 2 cow_dev " VM_DISK_D "' 2>/dev/null"));
	EXPECT_NE(0, vm_run("dmsetup create --noudevsync lt-track2 --table '0 8 track "
			    VM_DISK_D " 0 8 1 cow_dev' 2>/dev/null"));
	vm_run("dmsetup remove --noudevsync lt-track2 2>/dev/null");
}

/*
 * A COW device of 64 blocks and a memory limit of 16 that writes during a
 * slow dmextract exceed: the copy fails naming the COW device, the epoch
 * is aborted, no application write fails, and the next sync converges.
 */
TEST_F(snap, cow_device_full_fails_the_copy_not_the_writes)
{
	struct track_dm_status st;
	int rc, writes_ok;

	if (baseline())
		SKIP(return, "snapshot mode only");
	if (vm_run("command -v dmextract >/dev/null && command -v dmmerge >/dev/null"))
		SKIP(return, "dmextract or dmmerge is not installed");
	ASSERT_EQ(0, cow_device(&self->dm, TSECTORS, 512));
	view_remove();	/* dmextract makes its own */
	ASSERT_EQ(0, vm_run("dd if=/dev/zero of=" REPLICA " bs=1M count=48 2>/dev/null"));
	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, TFROZEN));

	rc = extract_slowly("--snapshot=64K", STREAM, 20000, &writes_ok);
	vm_run("sed 's/^/# dmextract: /' /tmp/x.err");
	EXPECT_EQ(1, rc);
	EXPECT_EQ(1, writes_ok) TH_LOG("an application write failed");
	EXPECT_EQ(0, vm_run("grep -q 'snapshot of epoch .* failed.*COW device' /tmp/x.err"));
	EXPECT_EQ(0, vm_run("grep -q 'abort' /tmp/x.err"));
	EXPECT_EQ(0, vm_run("dmesg | grep -q 'the COW device is full'"));
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(0, st.frozen_epoch);
	EXPECT_EQ(TRACK_DM_SNAP_NONE, st.snapshot);
	EXPECT_EQ(TBLOCKS, st.dirty_active);

	ASSERT_EQ(0, vm_run("dmextract --snapshot " TT_NAME " >" STREAM));
	ASSERT_EQ(0, vm_run("dmmerge " REPLICA " <" STREAM));
	EXPECT_EQ(0, bad_blocks(REPLICA, SEED_NEW, 0, TBLOCKS));
	unlink(STREAM);
	unlink(REPLICA);
}

/*
 *--------------------------------------------------------------
 * The preservation reads: started by the writes themselves, several at
 * once; a write that comes while its block is being preserved waits for
 * that one read.
 *--------------------------------------------------------------
 */

/* The track device and its view on UNDER_TABLE, a device over VM_DISK_B. */
static int under_device(struct track_dm **dm, const char *under_table)
{
	track_dm_free(*dm);
	*dm = NULL;
	view_remove();
	tt_remove(TT_NAME);
	vm_run("dmsetup remove --noudevsync " UNDER_NAME " 2>/dev/null");
	if (vm_run("dmsetup create --noudevsync " UNDER_NAME " --table '0 %llu %s'",
		   SECTORS, under_table))
		return -1;
	if (vm_run("dmsetup create --noudevsync " TT_NAME " --table '0 %llu track "
		   UNDER_PATH " 0 8 1 clean'", SECTORS))
		return -1;
	if (track_dm_open(TT_NAME, dm))
		return -1;
	return view_create();
}

#define WRITE_MAX	128

/*
 * NR writes of SEED's pattern at once (Linux AIO, O_DIRECT): write i covers
 * COUNT[i] blocks from FIRST[i]. 0 when all of them wrote everything.
 */
static int write_together(unsigned int seed, const uint64_t *first,
			  const uint64_t *count, int nr)
{
	struct iocb cbs[WRITE_MAX], *cbp[WRITE_MAX];
	struct io_event ev[WRITE_MAX];
	aio_context_t ctx = 0;
	void *bufs[WRITE_MAX] = { 0 };
	int i, fd, got = 0, bad = 0;

	if (nr > WRITE_MAX || syscall(__NR_io_setup, nr, &ctx))
		return -1;
	fd = open(TT_PATH, O_WRONLY | O_DIRECT);
	if (fd < 0)
		return -1;
	for (i = 0; i < nr; i++) {
		if (posix_memalign(&bufs[i], 4096, count[i] * BS))
			return -1;
		vm_fill(bufs[i], count[i] * BS, seed, first[i] * BS);
		memset(&cbs[i], 0, sizeof(cbs[i]));
		cbs[i].aio_lio_opcode = IOCB_CMD_PWRITE;
		cbs[i].aio_fildes = fd;
		cbs[i].aio_buf = (uintptr_t)bufs[i];
		cbs[i].aio_nbytes = count[i] * BS;
		cbs[i].aio_offset = first[i] * BS;
		cbp[i] = &cbs[i];
	}
	if (syscall(__NR_io_submit, ctx, nr, cbp) != nr)
		bad = 1;
	while (!bad && got < nr) {
		int n = syscall(__NR_io_getevents, ctx, 1, nr - got, ev, NULL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			bad = 1;
			break;
		}
		for (i = 0; i < n; i++)
			if (ev[i].res != (__s64)((struct iocb *)(uintptr_t)ev[i].obj)->aio_nbytes)
				bad = 1;
		got += n;
	}
	syscall(__NR_io_destroy, ctx);
	close(fd);
	for (i = 0; i < nr; i++)
		free(bufs[i]);
	return bad ? -1 : 0;
}

/*
 * Reads from the data device slowed down to 200 ms (dm-delay), writes not:
 * four writes at once to each of 16 frozen blocks, and one over 16 blocks
 * (more than a write starts reads for itself) with two more inside it.
 * Every write that comes while its block is being preserved waits for
 * that read: had one gone on, the slow read would have preserved its new
 * data. The view reads the freeze-time data of every block, and each block
 * was preserved once.
 */
TEST_F(snap, writes_to_a_block_being_preserved_wait_for_its_one_read)
{
	uint64_t first[WRITE_MAX], count[WRITE_MAX];
	struct track_dm_status st;
	int i, nr = 0;
	uint64_t e;

	if (baseline())
		SKIP(return, "snapshot mode only");
	if (vm_run("dmsetup targets | grep -q '^delay '"))
		SKIP(return, "no dm-delay target");
	ASSERT_EQ(0, under_device(&self->dm, "delay " VM_DISK_B " 0 200 "
					     VM_DISK_B " 0 0"));
	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, FROZEN));
	ASSERT_EQ(0, snap_freeze("16M", &e));

	for (i = 0; i < 64; i++) {
		first[nr] = i / 4;
		count[nr++] = 1;
	}
	first[nr] = 16;
	count[nr++] = 16;
	first[nr] = 20;
	count[nr++] = 1;
	first[nr] = 31;
	count[nr++] = 1;
	ASSERT_EQ(0, write_together(SEED_NEW, first, count, nr))
		TH_LOG("an application write failed");

	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(TRACK_DM_SNAP_ACTIVE, st.snapshot);
	EXPECT_EQ(32 * BS, st.snap_bytes)
		TH_LOG("each of the 32 blocks written is preserved once");
	EXPECT_EQ(0, bad_view_blocks(SEED_FROZEN, 0, FROZEN))
		TH_LOG("frozen blocks of the view that are not as at the freeze");
	EXPECT_EQ(0, bad_blocks(TT_PATH, SEED_NEW, 0, 32))
		TH_LOG("blocks the application wrote that do not hold its data");
	ASSERT_EQ(0, track_dm_commit(self->dm, e));
}

/*
 * The data device fails the read of one frozen block (dm-dust): the write
 * that needs it preserved fails the snapshot, not itself: it and a write
 * over it and its neighbours land. The view fails, commit is refused, the
 * epoch is aborted, and the next snapshot reads the new data.
 */
TEST_F(snap, preservation_read_error_fails_the_snapshot_not_the_write)
{
	struct track_dm_status st;
	uint64_t first[2] = { 5, 3 }, count[2] = { 1, 8 };
	unsigned char *buf;
	uint64_t e;
	int fd;

	if (baseline())
		SKIP(return, "snapshot mode only");
	if (vm_run("dmsetup targets | grep -q '^dust '"))
		SKIP(return, "no dm-dust target");
	ASSERT_EQ(0, under_device(&self->dm, "dust " VM_DISK_B " 0 4096"));
	ASSERT_EQ(0, write_blocks(SEED_FROZEN, 0, FROZEN));
	ASSERT_EQ(0, snap_freeze("16M", &e));
	ASSERT_EQ(0, vm_run("dmsetup message " UNDER_NAME " 0 addbadblock 5 && dmsetup message " UNDER_NAME " 0 enable"));

	ASSERT_EQ(0, write_together(SEED_NEW, first, count, 2))
		TH_LOG("an application write failed");
	ASSERT_EQ(0, track_dm_get_status(self->dm, &st));
	EXPECT_EQ(TRACK_DM_SNAP_FAILED, st.snapshot);
	EXPECT_EQ(0, vm_run("dmesg | grep -q 'reading a block to preserve failed'"));
	EXPECT_EQ(0, bad_blocks(TT_PATH, SEED_NEW, 3, 8))
		TH_LOG("the writes did not land");
	ASSERT_EQ(0, posix_memalign((void **)&buf, 4096, BS));
	fd = open(VIEW_PATH, O_RDONLY | O_DIRECT);
	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, pread(fd, buf, BS, 100 * BS));
	EXPECT_EQ(EIO, errno);
	close(fd);
	free(buf);
	EXPECT_EQ(-EIO, track_dm_commit(self->dm, e));
	ASSERT_EQ(0, track_dm_abort(self->dm, e));

	ASSERT_EQ(0, vm_run("dmsetup message " UNDER_NAME " 0 disable"));
	ASSERT_EQ(0, snap_freeze("16M", &e));
	EXPECT_EQ(0, bad_view_blocks(SEED_NEW, 3, 8));
	EXPECT_EQ(0, bad_view_blocks(SEED_FROZEN, 11, FROZEN - 11));
	ASSERT_EQ(0, track_dm_commit(self->dm, e));
}

TEST_HARNESS_MAIN
