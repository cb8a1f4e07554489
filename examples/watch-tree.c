// SPDX-License-Identifier: MIT
/*
 * Watch a tree from your own poll(2) loop and print what changed, with the
 * byte range when the kernel reports one. A signal (Ctrl-C) ends it
 * cleanly; -t SECONDS ends it after that long without events.
 *
 *   watch-tree [-t SECONDS] DIR...
 *   cc -o watch-tree watch-tree.c $(pkg-config --cflags --libs libtrack)
 *
 * Links libtrack only: none of the device-mapper libraries.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libtrack.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static const char *kind_name(enum track_event_kind k)
{
	static const char *const names[] = {
		[TRACK_EVENT_CREATE] = "create", [TRACK_EVENT_MODIFY] = "modify",
		[TRACK_EVENT_ATTRIB] = "attrib",
		[TRACK_EVENT_CLOSE_WRITE] = "close-write",
		[TRACK_EVENT_DELETE] = "delete", [TRACK_EVENT_RENAME] = "rename",
		[TRACK_EVENT_RESCAN] = "rescan", [TRACK_EVENT_GONE] = "gone",
	};

	return k < sizeof(names) / sizeof(names[0]) && names[k] ? names[k] :
	       "?";
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct track_watch *w;
	int quiet_ms = -1, i = 1, r;

	if (argc > 2 && !strcmp(argv[1], "-t")) {
		quiet_ms = atoi(argv[2]) * 1000;
		i = 3;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: watch-tree [-t SECONDS] DIR...\n");
		return 2;
	}
	r = track_watch_new(0, &w);
	if (r < 0) {
		fprintf(stderr, "watch-tree: %s\n", strerror(-r));
		return 1;
	}
	for (; i < argc; i++)
		if (track_watch_add(w, argv[i]) < 0) {
			fprintf(stderr, "watch-tree: %s\n", track_watch_error(w));
			return 1;
		}
	printf("# %s\n", track_watch_get_mode(w) == TRACK_WATCH_FANOTIFY ?
	       "fanotify ranges" : track_watch_get_mode(w) ==
	       TRACK_WATCH_RANGES ? "inotify ranges" : "plain");
	fflush(stdout);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	while (!stop) {
		struct pollfd pfd = { .fd = track_watch_fd(w), .events = POLLIN };
		struct track_event ev;
		int t = track_watch_timeout(w);

		/* Sleep until the descriptor is readable, a held rename
		 * half is due (t >= 0), or the quiet time is over. */
		if (t < 0 || (quiet_ms >= 0 && quiet_ms < t))
			t = quiet_ms;
		r = poll(&pfd, 1, t);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 && t == quiet_ms && quiet_ms >= 0 &&
		    track_watch_timeout(w) < 0)
			break;		/* quiet for -t seconds */
		while ((r = track_watch_next(w, &ev, 0)) == 1) {
			printf("%s %s:%s", kind_name(ev.kind),
			       track_watch_root(w, ev.root), ev.path);
			if (ev.old_path)
				printf(" (was %s)", ev.old_path);
			if (ev.flags & TRACK_EVENT_RANGE)
				printf(" %llu+%llu",
				       (unsigned long long)ev.offset,
				       (unsigned long long)ev.length);
			putchar('\n');
		}
		fflush(stdout);
		if (r < 0 && r != -EINTR)
			fprintf(stderr, "watch-tree: %s\n", track_watch_error(w));
	}
	track_watch_free(w);
	return 0;
}
