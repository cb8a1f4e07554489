// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * dmextract: write the changed blocks of a device as a dsync stream.
 *
 *   dmextract [options] NAME                 a dm-track device: freeze an
 *                                            epoch, send it, commit it
 *   dmextract [options] --dirty FILE --device PATH
 *   dmextract [options] --all --device PATH
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libtrack.h>

#include "dsync_util.h"
#include "dsync_dm.h"

static void usage(FILE *f)
{
	fprintf(f,
"Usage: dmextract [options] NAME              changed blocks of dm-track NAME\n"
"       dmextract [options] --dirty FILE --device PATH\n"
"       dmextract [options] --all --device PATH\n"
"Write changed blocks as a dsync stream to stdout, for dmmerge.\n"
"With NAME: freeze an epoch, send its blocks, commit it on success; on any\n"
"failure or signal the epoch is aborted and its blocks stay dirty.\n"
"\n"
"  -a, --all             every block (seed a new replica)\n"
"  -d, --dirty FILE      blocks to send: numbers or ranges A-B, one per line\n"
"  -D, --device PATH     device or file to read (with --dirty or --all)\n"
"  -b, --block-size N    block size of --dirty lists (default 4096)\n"
"      --source-id ID    source id in the stream (default: dm uuid or\n"
"                        tracking id; with --device, the device's path)\n"
"      --base-epoch N, --new-epoch N   epochs of a --dirty stream\n"
"  -z, --compress[=N]    deflate the stream (level N, 1-9, default 1)\n"
"  -o, --output FILE     write to FILE (synced before the commit)\n"
"  -n, --no-commit       leave the epoch frozen (dmtrack commit/abort it)\n"
"  -P, --progress        progress on stderr (--no-progress: none)\n"
"  -S, --snapshot[=LIMIT]  copy the device as at the freeze (LIMIT: bytes)\n"
"      --fsfreeze MNT    FIFREEZE the file system on MNT for the freeze\n"
"      --no-snapshot     read the live device (the default)\n"
"  -v, --verbose         totals on stderr\n"
"  -h, --help            this help\n"
"Exit status: 0 ok, 1 failure (epoch aborted), 2 usage. See dmextract(1).\n");
}

enum { OPT_SOURCE_ID = 256, OPT_BASE, OPT_NEW, OPT_NO_PROGRESS,
       OPT_NO_SNAPSHOT, OPT_FSFREEZE };

static const struct option longopts[] = {
	{ "all", no_argument, NULL, 'a' },
	{ "dirty", required_argument, NULL, 'd' },
	{ "device", required_argument, NULL, 'D' },
	{ "block-size", required_argument, NULL, 'b' },
	{ "source-id", required_argument, NULL, OPT_SOURCE_ID },
	{ "base-epoch", required_argument, NULL, OPT_BASE },
	{ "new-epoch", required_argument, NULL, OPT_NEW },
	{ "compress", optional_argument, NULL, 'z' },
	{ "output", required_argument, NULL, 'o' },
	{ "no-commit", no_argument, NULL, 'n' },
	{ "progress", no_argument, NULL, 'P' },
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	{ "snapshot", optional_argument, NULL, 'S' },
	{ "no-snapshot", no_argument, NULL, OPT_NO_SNAPSHOT },
	{ "fsfreeze", required_argument, NULL, OPT_FSFREEZE },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static int bad_usage(const char *what)
{
	ds_err("%s", what);
	fprintf(stderr, "Try 'dmextract --help'.\n");
	return DS_EXIT_USAGE;
}

static int open_output(const char *path, int *fd)
{
	if (!path) {
		if (isatty(STDOUT_FILENO)) {
			ds_err("refusing to write a binary stream to a "
			       "terminal: pipe it into dmmerge or use -o FILE");
			return -ENOTTY;
		}
		*fd = STDOUT_FILENO;
		return 0;
	}
	*fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (*fd < 0) {
		ds_err("cannot create %s: %s", path, strerror(errno));
		return -errno;
	}
	return 0;
}

/* Make a stream in a file durable before its epoch is committed. */
static int sync_output(int fd, const char *path)
{
	struct stat st;

	if (fstat(fd, &st) || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)))
		return 0;
	if (fsync(fd)) {
		ds_err("syncing %s: %s", path ? path : "stdout",
		       strerror(errno));
		return -errno;
	}
	return 0;
}

/*
 * A pipe still holds up to a record (ds_pipe_grow()) when the last
 * write() returns. Before the epoch is committed, wait until the reader
 * has taken all of it, or is gone: a reader that exits with the stream
 * unread (dmmerge refusing it) is the failure EPIPE would have reported
 * through a smaller pipe. What the reader does with the bytes it took,
 * only dmsync learns (it waits for dmmerge's exit status).
 */
static int drain_output(int fd)
{
	struct pollfd p = { .fd = fd };
	struct timespec ts = { .tv_nsec = 100000 };
	struct stat st;
	int n;

	if (fstat(fd, &st) || !S_ISFIFO(st.st_mode))
		return 0;
	/*
	 * Nothing wakes a writer when its pipe becomes empty: look again
	 * after 0.1 ms, then twice as long each time up to 10 ms, so a
	 * small sync is not held up for a whole 10 ms by its last look.
	 */
	while (!ioctl(fd, FIONREAD, &n) && n > 0) {
		if (ds_stop)
			return -EINTR;
		if (ppoll(&p, 1, &ts, NULL) <= 0 || !(p.revents & POLLERR)) {
			ts.tv_nsec = ts.tv_nsec * 2 < 10000000 ?
				     ts.tv_nsec * 2 : 10000000;
			continue;
		}
		if (ioctl(fd, FIONREAD, &n) || n == 0)
			break;
		ds_err("writing the stream: the receiving side exited with "
		       "%d bytes of it unread (see its messages)", n);
		return -EPIPE;
	}
	return 0;
}

/* Extract into the output, then commit, keep or abort the epoch. */
static int extract(const struct ds_opts *o)
{
	struct track_stream_totals t;
	struct ds_epoch ep;
	int out = -1, ret;

	ret = open_output(o->output, &out);
	if (ret)
		return DS_EXIT_FAIL;
	ds_pipe_grow(out);
	ret = ds_run_extract(o, out, &ep, &t);
	if (!ret)
		ret = sync_output(out, o->output);
	if (!ret)
		ret = drain_output(out);
	if (!ret && ds_stop) {
		ds_err("interrupted by signal %d", (int)ds_stop);
		ret = -EINTR;
	}
	if (out != STDOUT_FILENO)
		close(out);
	if (!ep.dm)
		return ret ? DS_EXIT_FAIL : DS_EXIT_OK;
	if (ret) {
		ds_epoch_abort(&ep);
	} else if (o->no_commit) {
		fprintf(stderr, "%s: epoch %" PRIu64 " of %s stays frozen; "
			"once the replica has it, run: dmtrack commit %s %"
			PRIu64 " (or dmtrack abort %s %" PRIu64 ")\n", ds_prog,
			ep.epoch, o->name, o->name, ep.epoch, o->name,
			ep.epoch);
	} else {
		ret = ds_epoch_commit(&ep);
	}
	ds_epoch_close(&ep);
	return ret ? DS_EXIT_FAIL : DS_EXIT_OK;
}

int main(int argc, char **argv)
{
	struct ds_opts o = {
		.block_size = 4096,
		.progress = DS_PROGRESS_AUTO,
	};
	uint64_t v;
	int c;

	ds_prog = "dmextract";
	while ((c = getopt_long(argc, argv, "ad:D:b:z::o:nPS::vh", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'a':
			o.all = true;
			break;
		case 'd':
			o.dirty = optarg;
			break;
		case 'D':
			o.device = optarg;
			break;
		case 'b':
			if (ds_parse_u64(optarg, true, &v) ||
			    v < TRACK_STREAM_MIN_BLOCK ||
			    v > TRACK_STREAM_MAX_BLOCK || (v & (v - 1)))
				return bad_usage("--block-size must be a power "
						 "of two from 512 to 32M");
			o.block_size = v;
			break;
		case OPT_SOURCE_ID:
			if (ds_source_id_problem(optarg))
				return bad_usage(ds_source_id_problem(optarg));
			o.source_id = optarg;
			break;
		case OPT_BASE:
		case OPT_NEW:
			if (ds_parse_u64(optarg, false, &v))
				return bad_usage("epochs are numbers");
			if (c == OPT_BASE)
				o.base_epoch = v;
			else
				o.new_epoch = v;
			break;
		case 'z':
			o.level = 1;
			if (optarg && (ds_parse_u64(optarg, false, &v) ||
				       v < 1 || v > 9))
				return bad_usage("--compress level is 1 to 9");
			if (optarg)
				o.level = v;
			break;
		case 'o':
			o.output = optarg;
			break;
		case 'n':
			o.no_commit = true;
			break;
		case 'P':
			o.progress = DS_PROGRESS_ON;
			break;
		case OPT_NO_PROGRESS:
			o.progress = DS_PROGRESS_OFF;
			break;
		case 'S':
			if (ds_parse_snapshot(optarg, &o))
				return bad_usage("--snapshot=LIMIT is a size "
						 "in bytes (K, M, G)");
			break;
		case OPT_NO_SNAPSHOT:
			o.snapshot = DS_SNAP_OFF;
			break;
		case OPT_FSFREEZE:
			o.fsfreeze = optarg;
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return DS_EXIT_OK;
		default:
			fprintf(stderr, "Try 'dmextract --help'.\n");
			return DS_EXIT_USAGE;
		}
	}
	if (optind < argc)
		o.name = argv[optind++];
	if (optind < argc)
		return bad_usage("too many arguments");
	if (o.snapshot && !o.name)
		return bad_usage("--snapshot is for a dm-track NAME");
	if (o.fsfreeze && !o.name)
		return bad_usage("--fsfreeze is for a dm-track NAME (with "
				 "--dirty, freeze the file system yourself)");
	if (o.fsfreeze) {
		char msg[512];
		int fd = ds_fs_check(o.fsfreeze, msg, sizeof(msg));

		if (fd < 0)
			return bad_usage(msg);
		close(fd);
	}
	if (o.dirty && o.all)
		return bad_usage("--dirty and --all exclude each other");
	if (o.base_epoch > o.new_epoch ||
	    (o.base_epoch == o.new_epoch && o.new_epoch))
		return bad_usage("--base-epoch must be below --new-epoch");
	if ((o.base_epoch || o.new_epoch) && o.name)
		return bad_usage("--base-epoch and --new-epoch are for "
				 "--device; dm-track keeps its own epochs");
	if (o.device) {
		if (o.name)
			return bad_usage("give either a dm-track NAME or "
					 "--device PATH");
		if (!o.dirty && !o.all)
			return bad_usage("--device needs --dirty FILE or "
					 "--all");
		if (o.no_commit)
			return bad_usage("--no-commit is for dm-track "
					 "devices");
		ds_catch_signals();
		return extract(&o);
	}
	if (o.dirty)
		return bad_usage("--dirty needs --device PATH");
	if (!o.name)
		return bad_usage("no device given");
	ds_catch_signals();
	return extract(&o);
}
