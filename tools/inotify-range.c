// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * inotify-range: print the events of directory trees, with the byte range
 * of each modification when the kernel reports it. Like
 * `inotifywait -m -r`, and the quickest way to see the UDS+ patch work.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libtrack.h>

static const char usage[] =
"Usage: inotify-range [OPTION]... PATH...\n"
"Print the events of each PATH (a directory with its whole tree, or a\n"
"file), one per line: KIND RANGE PATH. RANGE is OFFSET+LENGTH when the\n"
"kernel reports the bytes a write changed (fanotify's range record or the\n"
"UDS+ inotify extension), 'whole' when it does not, '-' for events without\n"
"data.\n"
"\n"
"  -c, --count N      exit after N events\n"
"  -t, --timeout S    exit after S seconds without an event\n"
"  -w, --close-write  also print CLOSE_WRITE\n"
"  -p, --plain        use plain inotify even if the kernel has ranges\n"
"  -i, --inotify      use inotify even if fanotify reports ranges\n"
"  -T, --timestamps   prefix each line with a monotonic time in seconds\n"
"  -r, --raw          print paths as they are (default: C-style escapes\n"
"                     for control characters and backslashes)\n"
"  -q, --quiet        no '# mode' line at the start\n"
"  -m, --mode         print the mode and exit: 'fanotify' (fanotify\n"
"                     ranges), 'ranges' (inotify ranges) or 'plain'\n"
"  -h, --help         this text\n"
"\n"
"Exit status: 0 ok (or --timeout/--count reached), 1 failure, 2 usage.\n";

static const struct option longopts[] = {
	{ "count", required_argument, NULL, 'c' },
	{ "timeout", required_argument, NULL, 't' },
	{ "close-write", no_argument, NULL, 'w' },
	{ "plain", no_argument, NULL, 'p' },
	{ "inotify", no_argument, NULL, 'i' },
	{ "timestamps", no_argument, NULL, 'T' },
	{ "raw", no_argument, NULL, 'r' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "mode", no_argument, NULL, 'm' },
	{ "help", no_argument, NULL, 'h' },
	{ "monitor", no_argument, NULL, 'M' },	/* inotifywait habit */
	{ "recursive", no_argument, NULL, 'R' },	/* always on */
	{ NULL, 0, NULL, 0 },
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char *kind_name(enum track_event_kind k)
{
	switch (k) {
	case TRACK_EVENT_CREATE:
		return "CREATE";
	case TRACK_EVENT_MODIFY:
		return "MODIFY";
	case TRACK_EVENT_ATTRIB:
		return "ATTRIB";
	case TRACK_EVENT_CLOSE_WRITE:
		return "CLOSE_WRITE";
	case TRACK_EVENT_DELETE:
		return "DELETE";
	case TRACK_EVENT_RENAME:
		return "RENAME";
	case TRACK_EVENT_RESCAN:
		return "RESCAN";
	case TRACK_EVENT_GONE:
		return "GONE";
	}
	return "?";
}

static void put_path(const char *root, const char *rel, bool raw)
{
	const char *parts[3] = { root, rel[0] ? "/" : "", rel };

	for (int i = 0; i < 3; i++) {
		for (const unsigned char *p = (const void *)parts[i]; *p; p++) {
			if (raw || (*p >= 0x20 && *p != 0x7f && *p != '\\'))
				putchar(*p);
			else if (*p == '\n')
				fputs("\\n", stdout);
			else if (*p == '\t')
				fputs("\\t", stdout);
			else if (*p == '\\')
				fputs("\\\\", stdout);
			else
				printf("\\x%02x", *p);
		}
	}
}

static const char *mode_name(enum track_watch_mode m)
{
	return m == TRACK_WATCH_FANOTIFY ? "fanotify" :
	       m == TRACK_WATCH_RANGES ? "ranges" : "plain";
}

static bool parse_num(const char *s, unsigned long *v)
{
	char *end;

	errno = 0;
	*v = strtoul(s, &end, 10);
	return !errno && end != s && !*end;
}

int main(int argc, char **argv)
{
	unsigned long count = 0, timeout = 0, seen = 0;
	bool timestamps = false, raw = false, quiet = false, mode_only = false;
	unsigned int flags = 0;
	struct track_watch *w;
	struct sigaction sa;
	int opt, err;

	while ((opt = getopt_long(argc, argv, "c:t:wpiTrqmhMR", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'c':
			if (!parse_num(optarg, &count) || !count) {
				fprintf(stderr, "inotify-range: --count wants "
					"a positive number, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 't':
			if (!parse_num(optarg, &timeout) || !timeout ||
			    timeout > INT_MAX / 1000) {
				fprintf(stderr, "inotify-range: --timeout wants "
					"seconds, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'w':
			flags |= TRACK_WATCH_CLOSE_WRITE;
			break;
		case 'p':
			flags |= TRACK_WATCH_NO_RANGES;
			break;
		case 'i':
			flags |= TRACK_WATCH_INOTIFY;
			break;
		case 'T':
			timestamps = true;
			break;
		case 'r':
			raw = true;
			break;
		case 'q':
			quiet = true;
			break;
		case 'm':
			mode_only = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case 'M':
		case 'R':
			break;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (optind == argc && !mode_only) {
		fputs("inotify-range: no PATH given\n", stderr);
		fputs(usage, stderr);
		return 2;
	}

	err = track_watch_new(flags, &w);
	if (err < 0) {
		fprintf(stderr, "inotify-range: cannot create an inotify "
			"instance: %s%s\n", strerror(-err), err == -EMFILE ?
			" (see fs.inotify.max_user_instances)" : "");
		return 1;
	}
	if (mode_only) {
		puts(mode_name(track_watch_get_mode(w)));
		track_watch_free(w);
		return 0;
	}
	for (int i = optind; i < argc; i++) {
		if (track_watch_add(w, argv[i]) < 0) {
			fprintf(stderr, "inotify-range: %s\n",
				track_watch_error(w));
			track_watch_free(w);
			return 1;
		}
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);

	if (!quiet) {
		enum track_watch_mode m = track_watch_get_mode(w);

		printf("# mode %s%s\n", mode_name(m),
		       m == TRACK_WATCH_FANOTIFY ?
		       " (fanotify reports the bytes each write changed)" :
		       m == TRACK_WATCH_RANGES ?
		       " (the kernel reports the bytes each write changed)" :
		       " (this kernel has no IN_REPORT_RANGE: modifications"
		       " are whole-file)");
		fflush(stdout);
	}

	while (!stop) {
		struct track_event ev;
		const char *root;
		int n = track_watch_next(w, &ev, timeout ? (int)timeout * 1000 :
					 -1);

		if (n == 0)
			break;		/* --timeout */
		if (n < 0) {
			if (n == -EINTR)
				continue;
			fprintf(stderr, "inotify-range: %s\n",
				track_watch_error(w));
			if (n == -ENOSPC || n == -EACCES)
				continue;	/* keeps watching the rest */
			break;
		}
		if (timestamps) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			printf("%ld.%06ld ", (long)ts.tv_sec,
			       ts.tv_nsec / 1000);
		}
		fputs(kind_name(ev.kind), stdout);
		if (ev.flags & TRACK_EVENT_DIR)
			fputs(",ISDIR", stdout);
		if (ev.kind == TRACK_EVENT_MODIFY) {
			if (ev.flags & TRACK_EVENT_RANGE)
				printf(" %llu+%llu ",
				       (unsigned long long)ev.offset,
				       (unsigned long long)ev.length);
			else
				fputs(" whole ", stdout);
		} else {
			fputs(" - ", stdout);
		}
		root = track_watch_root(w, ev.root);
		if (!root)
			root = "?";
		if (ev.kind == TRACK_EVENT_RENAME) {
			put_path(root, ev.old_path, raw);
			fputs(" -> ", stdout);
		}
		put_path(root, ev.path, raw);
		putchar('\n');
		fflush(stdout);
		if (count && ++seen >= count)
			break;
	}
	track_watch_free(w);
	return 0;
}
