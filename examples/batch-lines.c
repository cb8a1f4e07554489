// SPDX-License-Identifier: MIT
/*
 * The UDS batching policy in an event loop: every read from standard
 * input is an update (its bytes are what would be pushed); a push is printed when the policy says so (timer, counter
 * or fail-safe), and once more for what is pending at the end of input.
 *
 *   batch-lines [-t TIMER_MS] [-c COUNTER_BYTES] [-f FAILSAFE_MS]
 *   cc -o batch-lines batch-lines.c $(pkg-config --cflags --libs libtrack)
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libtrack.h>

static void push(struct track_batch *b, const char *why)
{
	struct track_batch_state st;

	track_batch_pending(b, &st);
	printf("push (%s): %" PRIu64 " updates, ~%" PRIu64 " bytes\n", why,
	       st.updates, st.bytes);
	fflush(stdout);
	track_batch_pushed(b);
}

int main(int argc, char **argv)
{
	struct track_batch_params p;
	struct track_batch *b;
	char buf[4096];
	int opt;

	track_batch_params_init(&p);
	while ((opt = getopt(argc, argv, "t:c:f:")) != -1) {
		uint64_t v = strtoull(optarg, NULL, 10);

		if (opt == 't')
			p.timer_ms = v;
		else if (opt == 'c')
			p.counter_bytes = v;
		else if (opt == 'f')
			p.failsafe_ms = v;
		else
			return 2;
	}
	if (track_batch_new(&p, &b))
		return 1;
	for (;;) {
		struct pollfd pfd = { .fd = 0, .events = POLLIN };
		int64_t wait = track_batch_wait(b);	/* <0: nothing pending */
		enum track_batch_reason why;
		ssize_t n;

		if (poll(&pfd, 1, wait > INT_MAX ? INT_MAX : (int)wait) < 0 &&
		    errno != EINTR)
			return 1;
		if (pfd.revents) {
			n = read(0, buf, sizeof(buf));
			if (n <= 0)
				break;
			track_batch_add_data(b, buf, (size_t)n);
		}
		why = track_batch_due(b);
		if (why != TRACK_BATCH_NONE)
			push(b, track_batch_reason_name(why));
	}
	if (track_batch_wait(b) >= 0)
		push(b, "end of input");
	track_batch_free(b);
	return 0;
}
