// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * dmmerge: apply a dsync stream from stdin to a device or file.
 *
 * The engine (checks, undo, rollback, state file, replica fingerprint) is
 * libtrack's track_apply_* (<libtrack/dsync.h>); this is its command line:
 * options, messages on stderr, progress, totals.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libtrack.h>

#include "dsync_util.h"

struct cli {
	struct track_apply *a;
	const char *target;
	bool verify;
	bool verbose;
	enum ds_progress_mode pmode;
	struct ds_progress prog;
	bool prog_started;
	bool by_stream;		/* progress in stream bytes (a stream file) */
	bool stopped;		/* the read function saw a signal */
	bool said_stop;
};

static void usage(FILE *f)
{
	fprintf(f,
"Usage: dmmerge [options] TARGET             apply the stream on stdin\n"
"       dmmerge --verify [options] [TARGET]  check a stream, write nothing\n"
"       dmmerge --rollback UNDO [--state FILE] TARGET\n"
"Apply a dsync stream from dmextract to a device or file. The header is\n"
"checked against TARGET before anything is written, every record before\n"
"it is written; on a damaged or cut stream dmmerge stops, names the byte\n"
"offset and exits 1. A new file TARGET is created for a full stream.\n"
"\n"
"  -s, --state FILE     remember the applied epoch in FILE; refuse a stream\n"
"                       that does not follow it (another source, a gap, an\n"
"                       old stream)\n"
"  -f, --force          apply even so (says what it overrides)\n"
"  -u, --undo FILE      save old contents of the blocks it overwrites to\n"
"                       FILE (synced before each batch is written)\n"
"  -r, --rollback FILE  write the old contents saved in FILE back\n"
"  -n, --verify, --dry-run   read and check everything, write nothing\n"
"  -P, --progress       progress on stderr even if it is not a terminal\n"
"      --no-progress    no progress line\n"
"  -v, --verbose        totals on stderr\n"
"  -h, --help           this help\n"
"Exit status: 0 applied (and synced), 1 failure, 2 usage. See dmmerge(1).\n");
}

enum { OPT_NO_PROGRESS = 256 };

static const struct option longopts[] = {
	{ "state", required_argument, NULL, 's' },
	{ "force", no_argument, NULL, 'f' },
	{ "undo", required_argument, NULL, 'u' },
	{ "rollback", required_argument, NULL, 'r' },
	{ "verify", no_argument, NULL, 'n' },
	{ "dry-run", no_argument, NULL, 'n' },
	{ "progress", no_argument, NULL, 'P' },
	{ "no-progress", no_argument, NULL, OPT_NO_PROGRESS },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static int bad_usage(const char *what)
{
	ds_err("%s", what);
	fprintf(stderr, "Try 'dmmerge --help'.\n");
	return DS_EXIT_USAGE;
}

/* Messages of the engine: "dmmerge: ..." on stderr. */
static void log_cb(void *arg, const char *msg)
{
	struct cli *c = arg;

	ds_err("%s", msg);
	if (c->stopped && !c->said_stop) {
		/* after the reader's message about the cut read */
		c->said_stop = true;
		ds_err("interrupted by signal %d", (int)ds_stop);
	}
}

/* Reading the stream: a signal stops a read that waits for input. */
static ssize_t in_read(void *arg, void *buf, size_t len)
{
	struct cli *c = arg;
	ssize_t n;

	for (;;) {
		if (ds_stop) {
			c->stopped = true;
			return -EINTR;
		}
		n = read(STDIN_FILENO, buf, len);
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return -errno;
	}
}

/*
 * Progress: of the stream file's bytes when stdin is one; else of the
 * device for a full stream; else bytes applied so far (no total known).
 */
static int progress_cb(void *arg, uint64_t stream_bytes, uint64_t block_bytes,
		       int final)
{
	struct cli *c = arg;
	struct track_stream_info info;
	struct stat st;

	if (ds_stop && !final) {
		if (!c->said_stop) {
			c->said_stop = true;
			ds_err("interrupted by signal %d", (int)ds_stop);
		}
		return -EINTR;
	}
	if (!c->prog_started) {
		uint64_t total = 0;

		c->prog_started = true;
		ds_progress_init(&c->prog, c->pmode, 0);
		if (!fstat(STDIN_FILENO, &st) && S_ISREG(st.st_mode) &&
		    st.st_size > 0) {
			c->by_stream = true;
			total = st.st_size;
		} else if (!track_apply_get_info(c->a, &info, NULL, NULL) &&
			   (info.flags & TRACK_STREAM_FULL)) {
			total = info.device_size;
		} else {
			c->prog.open_ended = true;
		}
		c->prog.total = total;
	}
	ds_progress_update(&c->prog, c->by_stream ? stream_bytes : block_bytes,
			   final);
	return 0;
}

static void print_totals(struct cli *c, double secs)
{
	struct track_stream_info in;
	struct track_stream_totals t;
	char a[32], b[32];

	if (track_apply_get_info(c->a, &in, &t, NULL))
		return;
	fprintf(stderr, "%s: %s %s: epoch %" PRIu64 " to %" PRIu64
		" of \"%s\"%s, %" PRIu64 " data blocks (%s), %" PRIu64
		" zero blocks, %" PRIu64 " records, stream %s, %.1f s\n",
		ds_prog, c->verify ? "checked, for" : "applied to",
		c->target ? c->target : "no target", in.base_epoch,
		in.new_epoch, in.source_id,
		in.flags & TRACK_STREAM_FULL ? " (full)" : "",
		t.data_blocks, ds_human(t.data_bytes, a, sizeof(a)),
		t.zero_blocks, t.records,
		ds_human(t.stream_bytes, b, sizeof(b)), secs);
}

int main(int argc, char **argv)
{
	struct track_apply_params p;
	struct cli c = { .pmode = DS_PROGRESS_AUTO };
	const char *rollback = NULL;
	uint64_t runs = 0;
	double t0;
	int opt, ret;

	ds_prog = "dmmerge";
	track_apply_params_init(&p);
	while ((opt = getopt_long(argc, argv, "s:fu:r:nPvh", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 's':
			p.state_path = optarg;
			break;
		case 'f':
			p.flags |= TRACK_APPLY_FORCE;
			break;
		case 'u':
			p.undo_path = optarg;
			break;
		case 'r':
			rollback = optarg;
			break;
		case 'n':
			p.flags |= TRACK_APPLY_VERIFY;
			c.verify = true;
			break;
		case 'P':
			c.pmode = DS_PROGRESS_ON;
			break;
		case OPT_NO_PROGRESS:
			c.pmode = DS_PROGRESS_OFF;
			break;
		case 'v':
			c.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return DS_EXIT_OK;
		default:
			fprintf(stderr, "Try 'dmmerge --help'.\n");
			return DS_EXIT_USAGE;
		}
	}
	if (optind < argc)
		c.target = argv[optind++];
	if (optind < argc)
		return bad_usage("too many arguments");
	if (!c.target && !c.verify)
		return bad_usage("no target given");
	if (rollback && (c.verify || p.undo_path ||
			 (p.flags & TRACK_APPLY_FORCE)))
		return bad_usage("--rollback takes only --state and -v");
	if (c.verify && p.undo_path)
		return bad_usage("--verify writes nothing, so no --undo");
	if (p.undo_path && c.target && !strcmp(p.undo_path, c.target))
		return bad_usage("the undo file cannot be the target");
	ds_catch_signals();
	p.target = c.target;
	p.log = log_cb;
	p.log_arg = &c;
	if (!rollback) {
		p.progress = progress_cb;
		p.progress_arg = &c;
	}
	ret = track_apply_new(&p, &c.a);
	if (ret) {
		ds_err("%s", strerror(-ret));
		return DS_EXIT_FAIL;
	}
	t0 = ds_now();
	if (rollback) {
		ret = track_apply_rollback(c.a, rollback);
		track_apply_get_info(c.a, NULL, NULL, &runs);
		if (!ret && c.verbose)
			fprintf(stderr, "%s: restored %" PRIu64 " runs of %s\n",
				ds_prog, runs, c.target);
	} else if (isatty(STDIN_FILENO)) {
		ds_err("no stream on stdin (it is a terminal): pipe dmextract "
		       "into dmmerge, or redirect a stream file");
		ret = -EINVAL;
	} else {
		ds_pipe_grow(STDIN_FILENO);
		ret = track_apply_run(c.a, in_read, &c, "stdin");
		if (!ret && c.verbose)
			print_totals(&c, ds_now() - t0);
	}
	track_apply_free(c.a);
	return ret ? DS_EXIT_FAIL : DS_EXIT_OK;
}
