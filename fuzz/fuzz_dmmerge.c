// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libFuzzer target: dmmerge itself (tools/dmmerge.c, its main() renamed)
 * applying any input as a stream, with --state and --undo, to a 64 KiB
 * file on tmpfs; then --rollback of the undo file it left.
 *
 * What must hold, besides no crash, sanitizer report or hang: whatever the
 * apply did (refused, failed half way, or succeeded on a stream whose
 * checksums the fuzz build ignores), the rollback gives back the target
 * byte for byte, and the state file its epoch, not marked unfinished (or
 * is removed, when the undo file has no epochs). That is dmmerge's
 * promise for --undo.
 */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsync_util.h"

#define DEV_SIZE	(64 << 10)

int dmmerge_main(int argc, char **argv);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static char target[64], undo[64], state[64];
static unsigned char orig[DEV_SIZE], now[DEV_SIZE];
static const char state_text[] =
	"source-id fuzz\nepoch 1\nblock-size 512\ndevice-size 65536\n";

static void cleanup(void)
{
	unlink(target);
	unlink(undo);
	unlink(state);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	unsigned int x = 1;
	size_t i;

	snprintf(dir, sizeof(dir), "%s/fuzz-dmmerge.XXXXXX",
		 access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
	if (!mkdtemp(dir))
		abort();
	snprintf(target, sizeof(target), "%s/t", dir);
	snprintf(undo, sizeof(undo), "%s/u", dir);
	snprintf(state, sizeof(state), "%s/s", dir);
	/* the same contents as fuzz/make-seeds.sh's "old" image */
	for (i = 0; i < DEV_SIZE; i++) {
		x = x * 1103515245u + 12345u;
		orig[i] = x >> 16;
	}
	atexit(cleanup);
	return 0;
}

static void put_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || write(fd, buf, len) != (ssize_t)len)
		abort();
	close(fd);
}

static size_t get_file(const char *path, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return (size_t)-1;
	n = read(fd, buf, len);
	close(fd);
	return n < 0 ? (size_t)-1 : (size_t)n;
}

static int run(char **argv)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	optind = 0;		/* glibc: start getopt afresh */
	ds_stop = 0;
	return dmmerge_main(argc, argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *apply[] = { "dmmerge", "--state", state, "--undo", undo, target,
			  NULL };
	char *back[] = { "dmmerge", "--rollback", undo, "--state", state,
			 target, NULL };
	char sbuf[8192];
	int in, ret;
	size_t n;

	put_file(target, orig, sizeof(orig));
	put_file(state, state_text, sizeof(state_text) - 1);
	unlink(undo);
	in = memfd_create("stream", 0);
	if (in < 0 || write(in, data, size) != (ssize_t)size ||
	    lseek(in, 0, SEEK_SET) || dup2(in, STDIN_FILENO) < 0)
		abort();
	close(in);

	ret = run(apply);
	if (access(undo, F_OK) == 0)
		run(back);
	n = get_file(target, now, sizeof(now));
	if (n != sizeof(orig) || memcmp(now, orig, sizeof(orig))) {
		fprintf(stderr, "fuzz_dmmerge: apply exited %d; after the "
			"rollback the target differs from the original\n",
			ret);
		abort();
	}
	/* back at epoch 1, or removed (an undo file without epochs) */
	n = get_file(state, sbuf, sizeof(sbuf) - 1);
	if (n != (size_t)-1) {
		sbuf[n] = 0;
		if (!strstr(sbuf, "\nepoch 1\n") ||
		    strstr(sbuf, "\nunfinished")) {
			fprintf(stderr, "fuzz_dmmerge: apply exited %d; after "
				"the rollback the state file says:\n%s", ret,
				sbuf);
			abort();
		}
	}
	return 0;
}
