// SPDX-License-Identifier: GPL-2.0
/*
 * What asynchronous direct writes cost those who did not ask for ranges:
 * 4 KiB O_DIRECT writes, one in flight at a time, through native AIO and
 * through io_uring, to a file on ext4 that nobody watches, while
 *
 *   idle       nothing on the file system is watched;
 *   watched    plain inotify watches another directory of it (as udev
 *              watches device nodes, or a desktop a few folders);
 *   ranges     an IN_REPORT_RANGE instance watches that other directory;
 *
 * and, for scale, the cost for those who asked:
 *
 *   asked      an IN_REPORT_RANGE instance watches the file's directory,
 *              with a reader draining it as a sync client would.
 *
 * The same program runs on the patched kernel (boot "benchcount") and on the
 * same configuration without the series (boot "benchunpatched"), and says
 * which it ran on; bench/async-cost.sh puts the two side by side. Rounds
 * alternate the cases; best of each is kept. One line per result:
 *
 *   async-cost KERNEL INTERFACE CASE WRITES_PER_SECOND
 *
 * The ext4 is on a loop device over a tmpfs file, not on a VM disk: the
 * disk's latency under QEMU varies by more than the cost measured here
 * (in a run on a busy host the idle rows, the same code on both kernels,
 * differed by 2.8x), and a fast device makes the notification a larger
 * share of each write, so the ratios are the worst case. The loop device
 * completes each write from its worker, as real hardware completes from
 * an interrupt: AIO's completion is not in the submitter's task.
 *
 * Absolute numbers under QEMU TCG mean little; ratios measured in one run
 * do.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
/* <fcntl.h> has what <linux/inotify.h> wants of <linux/fcntl.h> */
#define _LINUX_FCNTL_H
#include <linux/aio_abi.h>
#include <linux/inotify.h>
#include <linux/loop.h>
#include <liburing.h>

#include "vmtest.h"
#include "bench_smoke.h"

/* glibc's <sys/inotify.h> would clash with the uapi header */
int inotify_init1(int flags);
int inotify_add_watch(int fd, const char *path, uint32_t mask);

#define BS		4096
#define NR_WRITES	BENCH_SIZE(4000, 16)
#define SPAN_BLOCKS	BENCH_SIZE(4096, 256)	/* a 16 MiB file, written first */
#define ROUNDS		BENCH_SIZE(5, 1)
#define BACKING_DIR	"/mnt/async-cost-backing"
#define BACKING		BACKING_DIR "/ext4.img"
#define BACKING_SIZE	(64 << 20)
#define MNT		"/mnt/async-cost"
#define DATA		MNT "/data"
#define OTHER		MNT "/other"
#define FILE_PATH	DATA "/file"

enum { IDLE, WATCHED, RANGES, ASKED, NR_CASES };
enum { AIO, URING, NR_IFACES };

static const char *const cases[NR_CASES] = {
	"idle", "watched", "ranges", "asked",
};
static const char *const ifaces[NR_IFACES] = { "aio", "io_uring" };

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static atomic_int stop;

/* The reader a sync client would be: drain until told to stop. */
static void *drain(void *arg)
{
	char buf[65536] __attribute__((aligned(8)));
	struct pollfd pfd = { .fd = *(int *)arg, .events = POLLIN };

	while (!atomic_load(&stop))
		if (poll(&pfd, 1, 50) == 1 &&
		    read(pfd.fd, buf, sizeof(buf)) < 0 && errno != EAGAIN)
			break;
	return NULL;
}

/* The offset of write I: a fixed pseudo-random walk over the file */
static off_t offset_of(int i)
{
	return (off_t)((i * 2654435761u) % SPAN_BLOCKS) * BS;
}

/* Seconds for NR_WRITES AIO writes of BUF to FD, one at a time */
static double run_aio(int fd, void *buf)
{
	aio_context_t ctx = 0;
	struct iocb cb = {
		.aio_fildes = fd,
		.aio_lio_opcode = IOCB_CMD_PWRITE,
		.aio_buf = (uintptr_t)buf,
		.aio_nbytes = BS,
	};
	struct iocb *cbs[1] = { &cb };
	struct io_event ev;
	double t;
	int i;

	if (syscall(__NR_io_setup, 1, &ctx))
		return -1;
	t = now();
	for (i = 0; i < NR_WRITES; i++) {
		cb.aio_offset = offset_of(i);
		if (syscall(__NR_io_submit, ctx, 1, cbs) != 1 ||
		    syscall(__NR_io_getevents, ctx, 1, 1, &ev, NULL) != 1 ||
		    ev.res != BS) {
			t = -1;
			break;
		}
	}
	if (t >= 0)
		t = now() - t;
	syscall(__NR_io_destroy, ctx);
	return t;
}

/* Seconds for NR_WRITES io_uring writes of BUF to FD, one at a time */
static double run_uring(int fd, void *buf)
{
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	double t;
	int i;

	if (io_uring_queue_init(4, &ring, 0))
		return -1;
	t = now();
	for (i = 0; i < NR_WRITES; i++) {
		sqe = io_uring_get_sqe(&ring);
		io_uring_prep_write(sqe, fd, buf, BS, offset_of(i));
		if (io_uring_submit(&ring) != 1 ||
		    io_uring_wait_cqe(&ring, &cqe) || cqe->res != BS) {
			t = -1;
			break;
		}
		io_uring_cqe_seen(&ring, cqe);
	}
	if (t >= 0)
		t = now() - t;
	io_uring_queue_exit(&ring);
	return t;
}

/* Seconds for one round of interface IFACE in case CASE; -1 on failure */
static double run(int iface, int c, void *buf)
{
	pthread_t th;
	int fd, ifd = -1;
	double t;

	if (c != IDLE) {
		ifd = inotify_init1(IN_NONBLOCK |
				    (c == WATCHED ? 0 : IN_REPORT_RANGE));
		if (ifd < 0 ||
		    inotify_add_watch(ifd, c == ASKED ? DATA : OTHER,
				      IN_MODIFY | IN_CREATE | IN_DELETE) < 0)
			return -1;
		atomic_store(&stop, 0);
		pthread_create(&th, NULL, drain, &ifd);
	}
	fd = open(FILE_PATH, O_WRONLY | O_DIRECT);
	if (fd < 0)
		t = -1;
	else
		t = iface == AIO ? run_aio(fd, buf) : run_uring(fd, buf);
	if (fd >= 0)
		close(fd);
	if (ifd >= 0) {
		atomic_store(&stop, 1);
		pthread_join(th, NULL);
		close(ifd);
	}
	return t;
}

static char loop_dev[32];

/* A loop device over BACKING, a file on tmpfs; its name in loop_dev */
static int loop_setup(void)
{
	int ctl, n, fd, lfd, ret = -1;

	mkdir(BACKING_DIR, 0755);
	if (mount("tmpfs", BACKING_DIR, "tmpfs", 0, "size=80m"))
		return -1;
	fd = open(BACKING, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, BACKING_SIZE))
		return -1;
	ctl = open("/dev/loop-control", O_RDWR);
	n = ctl < 0 ? -1 : ioctl(ctl, LOOP_CTL_GET_FREE);
	if (n >= 0) {
		snprintf(loop_dev, sizeof(loop_dev), "/dev/loop%d", n);
		lfd = open(loop_dev, O_RDWR);
		if (lfd >= 0) {
			ret = ioctl(lfd, LOOP_SET_FD, fd);
			close(lfd);
		}
	}
	if (ctl >= 0)
		close(ctl);
	close(fd);
	return ret;
}

static void loop_teardown(void)
{
	int lfd = open(loop_dev, O_RDWR);

	if (lfd >= 0) {
		ioctl(lfd, LOOP_CLR_FD, 0);
		close(lfd);
	}
	umount(BACKING_DIR);
}

/* ext4 on the loop device, DATA/file written in full, OTHER empty */
static int setup(void)
{
	static char block[BS];
	int fd, i;

	if (loop_setup())
		return -1;
	mkdir(MNT, 0755);
	if (vm_run("mkfs.ext4 -q -F %s >/dev/null 2>&1", loop_dev) ||
	    mount(loop_dev, MNT, "ext4", 0, NULL))
		return -1;
	if (mkdir(DATA, 0755) || mkdir(OTHER, 0755))
		return -1;
	fd = open(FILE_PATH, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	memset(block, 'x', sizeof(block));
	for (i = 0; i < SPAN_BLOCKS; i++)
		if (write(fd, block, BS) != BS)
			return -1;
	if (fsync(fd))
		return -1;
	return close(fd);
}

int main(void)
{
	double best[NR_IFACES][NR_CASES];
	const char *kernel;
	bool has_ranges;
	int r, i, c, fd;
	void *buf;

	fd = inotify_init1(IN_REPORT_RANGE);
	has_ranges = fd >= 0;
	if (fd >= 0)
		close(fd);
	kernel = has_ranges ? "patched" : "unpatched";
	if (setup()) {
		fprintf(stderr,
			"async-cost: cannot set up ext4 on a loop device over tmpfs: %s\n",
			strerror(errno));
		return 1;
	}
	if (posix_memalign(&buf, BS, BS))
		return 1;
	memset(buf, 'w', BS);
	for (i = 0; i < NR_IFACES; i++)
		for (c = 0; c < NR_CASES; c++)
			best[i][c] = 1e9;
	for (r = 0; r < ROUNDS; r++)
		for (i = 0; i < NR_IFACES; i++)
			for (c = 0; c < NR_CASES; c++) {
				double t;

				/* no ranged instance without the series */
				if (!has_ranges && (c == RANGES || c == ASKED))
					continue;
				t = run(i, c, buf);
				if (t < 0) {
					fprintf(stderr, "async-cost: %s %s: %s\n",
						ifaces[i], cases[c],
						strerror(errno));
					return 1;
				}
				if (t < best[i][c])
					best[i][c] = t;
			}
	printf("%d O_DIRECT writes of 4 KiB, one in flight, to an unwatched file on ext4 on a loop device over tmpfs, best of %d (QEMU TCG), %s kernel\n",
	       NR_WRITES, ROUNDS, kernel);
	for (i = 0; i < NR_IFACES; i++)
		for (c = 0; c < NR_CASES; c++)
			if (best[i][c] < 1e9)
				printf("async-cost %s %s %s %.0f\n", kernel,
				       ifaces[i], cases[c],
				       NR_WRITES / best[i][c]);
	free(buf);
	umount(MNT);
	loop_teardown();
	return 0;
}
