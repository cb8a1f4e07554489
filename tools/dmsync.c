// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * dmsync: dmextract | ssh host dmmerge, made safe. It runs the receiving
 * dmmerge itself (through ssh, another --rsh command, or locally), streams
 * the frozen epoch into it, and commits the epoch only after dmmerge
 * exited 0, that is after the replica has the blocks on stable storage.
 * Any other outcome aborts the epoch, and its blocks are sent next time.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libtrack.h>

#include "dsync_dm.h"
#include "dsync_util.h"

#define MAX_ARGS 64

struct sync_opts {
	struct ds_opts x;
	const char *dest;
	const char *rsh;
	const char *dmmerge;
	const char *state;
	const char *undo;
	bool force;
	char *host;		/* NULL: a local target */
	const char *target;
};

static void usage(FILE *f)
{
	fprintf(f,
"Usage: dmsync [options] NAME [USER@]HOST:TARGET\n"
"       dmsync [options] NAME TARGET\n"
"       dmsync [options] --dirty FILE --device PATH DEST\n"
"Send the changed blocks of dm-track device NAME to dmmerge on HOST (run\n"
"over ssh) or on this machine, and commit the epoch only once dmmerge has\n"
"applied and synced them; otherwise abort it, so they are sent next time.\n"
"\n"
"  -e, --rsh CMD         remote shell instead of ssh (split at spaces)\n"
"      --dmmerge PATH    dmmerge to run (default: dmmerge)\n"
"  -s, --state FILE      dmmerge --state FILE (on the receiving side)\n"
"  -u, --undo FILE       dmmerge --undo FILE (on the receiving side)\n"
"  -f, --force           dmmerge --force\n"
"  -a, --all             send every block (seed a new replica)\n"
"  -d, --dirty FILE, -D, --device PATH, -b, --block-size N, --source-id ID,\n"
"  --base-epoch N, --new-epoch N    as in dmextract(1)\n"
"  -z, --compress[=N]    deflate the stream (level N, default 1)\n"
"  -P, --progress        progress on stderr (--no-progress: none)\n"
"  -S, --snapshot[=LIMIT]  as in dmextract(1); the default where the\n"
"                        kernel's dm-track has snapshot mode\n"
"      --fsfreeze MNT    FIFREEZE the file system on MNT for the freeze\n"
"      --no-snapshot     read the live device\n"
"  -v, --verbose         totals from both sides\n"
"  -h, --help            this help\n"
"Exit status: 0 synced and committed, 1 failure (epoch aborted), 2 usage.\n");
}

enum { OPT_SOURCE_ID = 256, OPT_BASE, OPT_NEW, OPT_NO_PROGRESS,
       OPT_DMMERGE, OPT_NO_SNAPSHOT, OPT_FSFREEZE };

static const struct option longopts[] = {
	{ "rsh", required_argument, NULL, 'e' },
	{ "dmmerge", required_argument, NULL, OPT_DMMERGE },
	{ "state", required_argument, NULL, 's' },
	{ "undo", required_argument, NULL, 'u' },
	{ "force", no_argument, NULL, 'f' },
	{ "all", no_argument, NULL, 'a' },
	{ "dirty", required_argument, NULL, 'd' },
	{ "device", required_argument, NULL, 'D' },
	{ "block-size", required_argument, NULL, 'b' },
	{ "source-id", required_argument, NULL, OPT_SOURCE_ID },
	{ "base-epoch", required_argument, NULL, OPT_BASE },
	{ "new-epoch", required_argument, NULL, OPT_NEW },
	{ "compress", optional_argument, NULL, 'z' },
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
	fprintf(stderr, "Try 'dmsync --help'.\n");
	return DS_EXIT_USAGE;
}

/* Append S to the shell command line CMD, quoted for a POSIX shell. */
static void shell_quote(char *cmd, size_t len, const char *s)
{
	size_t n = strlen(cmd);

	if (n && n < len - 1)
		cmd[n++] = ' ';
	if (n < len - 1)
		cmd[n++] = '\'';
	for (; *s && n < len - 5; s++) {
		if (*s == '\'') {
			memcpy(cmd + n, "'\\''", 4);
			n += 4;
		} else {
			cmd[n++] = *s;
		}
	}
	if (n < len - 1)
		cmd[n++] = '\'';
	cmd[n] = 0;
}

/* Split CMD at blanks (with '...' and "..." quoting) into ARGV. */
static int split_words(char *cmd, char **argv, int max)
{
	int n = 0;
	char *p = cmd, *o, q;

	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (n == max - 1)
			return -E2BIG;
		argv[n++] = o = p;
		q = 0;
		while (*p && (q || (*p != ' ' && *p != '\t'))) {
			if (!q && (*p == '\'' || *p == '"'))
				q = *p++;
			else if (q && *p == q)
				q = 0, p++;
			else
				*o++ = *p++;
		}
		if (q)
			return -EINVAL;
		if (*p)
			p++;
		*o = 0;
	}
	argv[n] = NULL;
	return n;
}

/* The dmmerge next to this program, else the one in PATH. */
static const char *local_dmmerge(void)
{
	static char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 16);
	char *slash;

	if (n > 0) {
		path[n] = 0;
		slash = strrchr(path, '/');
		if (slash) {
			strcpy(slash + 1, "dmmerge");
			if (!access(path, X_OK))
				return path;
		}
	}
	return "dmmerge";
}

/* Start the receiving dmmerge with its stdin on a pipe; *IN gets the
 * pipe's write end. */
static pid_t spawn_receiver(struct sync_opts *s, int *in)
{
	static char cmd[8192], rsh[4096];
	char *argv[MAX_ARGS + 16];
	int p[2], n = 0, k;
	pid_t pid;

	if (s->host) {
		snprintf(rsh, sizeof(rsh), "%s", s->rsh ? s->rsh : "ssh");
		k = split_words(rsh, argv, MAX_ARGS);
		if (k <= 0) {
			ds_err("--rsh \"%s\" is not a command", s->rsh);
			return -1;
		}
		n = k;
		argv[n++] = s->host;
		cmd[0] = 0;
		shell_quote(cmd, sizeof(cmd), s->dmmerge ? s->dmmerge :
			    "dmmerge");
		if (s->state) {
			shell_quote(cmd, sizeof(cmd), "--state");
			shell_quote(cmd, sizeof(cmd), s->state);
		}
		if (s->undo) {
			shell_quote(cmd, sizeof(cmd), "--undo");
			shell_quote(cmd, sizeof(cmd), s->undo);
		}
		if (s->force)
			shell_quote(cmd, sizeof(cmd), "--force");
		if (s->x.verbose)
			shell_quote(cmd, sizeof(cmd), "--verbose");
		shell_quote(cmd, sizeof(cmd), "--");
		shell_quote(cmd, sizeof(cmd), s->target);
		argv[n++] = cmd;
	} else {
		argv[n++] = (char *)(s->dmmerge ? s->dmmerge : local_dmmerge());
		/* Our progress line is the one on the terminal they share.
		 * (Only to our own dmmerge: an older --dmmerge would take the
		 * option for a usage error. Over ssh its stderr is no
		 * terminal, so it shows none.) */
		if (!s->dmmerge)
			argv[n++] = "--no-progress";
		if (s->state) {
			argv[n++] = "--state";
			argv[n++] = (char *)s->state;
		}
		if (s->undo) {
			argv[n++] = "--undo";
			argv[n++] = (char *)s->undo;
		}
		if (s->force)
			argv[n++] = "--force";
		if (s->x.verbose)
			argv[n++] = "--verbose";
		argv[n++] = "--";
		argv[n++] = (char *)s->target;
	}
	argv[n] = NULL;

	if (pipe2(p, O_CLOEXEC)) {
		ds_err("pipe: %s", strerror(errno));
		return -1;
	}
	ds_pipe_grow(p[1]);
	pid = fork();
	if (pid < 0) {
		ds_err("fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		signal(SIGPIPE, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		if (dup2(p[0], STDIN_FILENO) < 0)
			_exit(127);
		execvp(argv[0], argv);
		fprintf(stderr, "%s: cannot run %s: %s\n", ds_prog, argv[0],
			strerror(errno));
		_exit(127);
	}
	close(p[0]);
	*in = p[1];
	return pid;
}

/* Wait for the receiver; after a signal, give it 10 s, then end it. */
static int wait_receiver(pid_t pid, const char *what)
{
	double give_up = 0;
	int st, ret;

	for (;;) {
		ret = waitpid(pid, &st, ds_stop ? WNOHANG : 0);
		if (ret == pid)
			break;
		if (ret < 0 && errno != EINTR) {
			ds_err("waiting for %s: %s", what, strerror(errno));
			return -1;
		}
		if (ds_stop) {
			if (!give_up)
				give_up = ds_now() + 10;
			if (ds_now() > give_up) {
				kill(pid, SIGTERM);
				give_up = ds_now() + 1e9;
			}
			usleep(100000);
		}
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (WIFEXITED(st))
		ds_err("%s failed (exit status %d)", what, WEXITSTATUS(st));
	else
		ds_err("%s was killed by signal %d", what, WTERMSIG(st));
	return -1;
}

static int run(struct sync_opts *s)
{
	struct track_stream_totals t;
	struct ds_epoch ep;
	char what[4200];
	int in = -1, ret, rret;
	pid_t pid;

	/* Local trouble first, before a connection is made for nothing. */
	if (s->x.name && ds_dm_probe(s->x.name, what, sizeof(what))) {
		ds_err("%s", what);
		return DS_EXIT_FAIL;
	}
	if (s->x.device && access(s->x.device, R_OK)) {
		ds_err("cannot read %s: %s", s->x.device, strerror(errno));
		return DS_EXIT_FAIL;
	}
	if (s->x.dirty && strcmp(s->x.dirty, "-") &&
	    access(s->x.dirty, R_OK)) {
		ds_err("cannot read %s: %s", s->x.dirty, strerror(errno));
		return DS_EXIT_FAIL;
	}
	if (s->host)
		snprintf(what, sizeof(what), "dmmerge on %s", s->host);
	else
		snprintf(what, sizeof(what), "dmmerge %s", s->target);
	pid = spawn_receiver(s, &in);
	if (pid < 0)
		return DS_EXIT_FAIL;
	ret = ds_run_extract(&s->x, in, &ep, &t);
	close(in);	/* dmmerge sees the end (or a cut) of the stream */
	rret = wait_receiver(pid, what);
	if (!ret && ds_stop) {
		ds_err("interrupted by signal %d", (int)ds_stop);
		ret = -EINTR;
	}
	if (!ep.dm)
		return ret || rret ? DS_EXIT_FAIL : DS_EXIT_OK;
	if (ret || rret) {
		if (!ds_epoch_abort(&ep))
			ds_err("epoch %" PRIu64 " aborted: its blocks stay "
			       "dirty and go with the next sync", ep.epoch);
		ds_epoch_close(&ep);
		return DS_EXIT_FAIL;
	}
	ret = ds_epoch_commit(&ep);
	ds_epoch_close(&ep);
	return ret ? DS_EXIT_FAIL : DS_EXIT_OK;
}

int main(int argc, char **argv)
{
	struct sync_opts s = {
		.x = { .block_size = 4096, .progress = DS_PROGRESS_AUTO,
		       .snapshot = DS_SNAP_AUTO },
	};
	const char *colon, *slash;
	uint64_t v;
	int c;

	ds_prog = "dmsync";
	while ((c = getopt_long(argc, argv, "e:s:u:fad:D:b:z::PS::vh", longopts,
				NULL)) != -1) {
		switch (c) {
		case 'e':
			s.rsh = optarg;
			break;
		case OPT_DMMERGE:
			s.dmmerge = optarg;
			break;
		case 's':
			s.state = optarg;
			break;
		case 'u':
			s.undo = optarg;
			break;
		case 'f':
			s.force = true;
			break;
		case 'a':
			s.x.all = true;
			break;
		case 'd':
			s.x.dirty = optarg;
			break;
		case 'D':
			s.x.device = optarg;
			break;
		case 'b':
			if (ds_parse_u64(optarg, true, &v) ||
			    v < TRACK_STREAM_MIN_BLOCK ||
			    v > TRACK_STREAM_MAX_BLOCK || (v & (v - 1)))
				return bad_usage("--block-size must be a power "
						 "of two from 512 to 32M");
			s.x.block_size = v;
			break;
		case OPT_SOURCE_ID:
			if (ds_source_id_problem(optarg))
				return bad_usage(ds_source_id_problem(optarg));
			s.x.source_id = optarg;
			break;
		case OPT_BASE:
		case OPT_NEW:
			if (ds_parse_u64(optarg, false, &v))
				return bad_usage("epochs are numbers");
			if (c == OPT_BASE)
				s.x.base_epoch = v;
			else
				s.x.new_epoch = v;
			break;
		case 'z':
			s.x.level = 1;
			if (optarg && (ds_parse_u64(optarg, false, &v) ||
				       v < 1 || v > 9))
				return bad_usage("--compress level is 1 to 9");
			if (optarg)
				s.x.level = v;
			break;
		case 'P':
			s.x.progress = DS_PROGRESS_ON;
			break;
		case OPT_NO_PROGRESS:
			s.x.progress = DS_PROGRESS_OFF;
			break;
		case 'S':
			if (ds_parse_snapshot(optarg, &s.x))
				return bad_usage("--snapshot=LIMIT is a size "
						 "in bytes (K, M, G)");
			break;
		case OPT_NO_SNAPSHOT:
			s.x.snapshot = DS_SNAP_OFF;
			break;
		case OPT_FSFREEZE:
			s.x.fsfreeze = optarg;
			break;
		case 'v':
			s.x.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return DS_EXIT_OK;
		default:
			fprintf(stderr, "Try 'dmsync --help'.\n");
			return DS_EXIT_USAGE;
		}
	}
	if (!s.x.device && optind < argc)
		s.x.name = argv[optind++];
	if (optind < argc)
		s.dest = argv[optind++];
	if (optind < argc)
		return bad_usage("too many arguments");
	if (!s.dest)
		return bad_usage(s.x.name || s.x.device ?
				 "no destination given" : "no device given");
	if (s.x.dirty && s.x.all)
		return bad_usage("--dirty and --all exclude each other");
	if (s.x.device && !s.x.dirty && !s.x.all)
		return bad_usage("--device needs --dirty FILE or --all");
	if (s.x.dirty && !s.x.device)
		return bad_usage("--dirty needs --device PATH");
	if (s.x.base_epoch > s.x.new_epoch ||
	    (s.x.base_epoch == s.x.new_epoch && s.x.new_epoch))
		return bad_usage("--base-epoch must be below --new-epoch");
	if (s.x.fsfreeze && !s.x.name)
		return bad_usage("--fsfreeze is for a dm-track NAME (with "
				 "--dirty, freeze the file system yourself)");
	if (s.x.fsfreeze) {
		char msg[512];
		int fd = ds_fs_check(s.x.fsfreeze, msg, sizeof(msg));

		if (fd < 0)
			return bad_usage(msg);
		close(fd);
	}
	if ((s.x.base_epoch || s.x.new_epoch) && s.x.name)
		return bad_usage("--base-epoch and --new-epoch are for "
				 "--device; dm-track keeps its own epochs");

	/* HOST:PATH as in scp and rsync: a colon before any slash */
	colon = strchr(s.dest, ':');
	slash = strchr(s.dest, '/');
	if (colon && (!slash || colon < slash)) {
		s.host = strndup(s.dest, colon - s.dest);
		s.target = colon + 1;
		if (!*s.host || !*s.target)
			return bad_usage("the destination is HOST:TARGET, "
					 "both non-empty");
	} else {
		if (s.rsh)
			return bad_usage("--rsh needs a HOST:TARGET "
					 "destination");
		s.target = s.dest;
	}
	ds_catch_signals();
	c = run(&s);
	free(s.host);
	return c;
}
