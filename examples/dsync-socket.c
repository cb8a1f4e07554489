// SPDX-License-Identifier: MIT
/*
 * The dsync engine embedded: send blocks of a device or file over a Unix
 * socket, and apply them on the other side as dmmerge would (header and
 * epoch checks, a state file, an undo file, progress).
 *
 *   dsync-socket receive [-s STATE] [-u UNDO] SOCKET TARGET
 *       listen on SOCKET, apply the first stream that arrives to TARGET
 *   dsync-socket send [-e EPOCH] SOCKET SOURCE [FIRST-LAST ...]
 *       every block of SOURCE (a full stream, epoch 0 to 1), or only the
 *       blocks FIRST to LAST (4 KiB blocks, epoch EPOCH to EPOCH + 1)
 *   cc -o dsync-socket dsync-socket.c $(pkg-config --cflags --libs libtrack)
 *
 * Nothing here needs the device-mapper libraries: the blocks to send are
 * given on the command line (a real sender gets them from dm-track with
 * libtrack-dm, or from file events). Exit status 0, 1 failure, 2 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <libtrack.h>

#define BLOCK 4096

static int unix_socket(const char *path, struct sockaddr_un *sa)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		fprintf(stderr, "socket path %s is too long\n", path);
		exit(2);
	}
	strcpy(sa->sun_path, path);
	return fd;
}

/* --- the receiving side: track_apply_* ------------------------------------ */

static ssize_t sock_read(void *arg, void *buf, size_t len)
{
	ssize_t n;

	do {
		n = read(*(int *)arg, buf, len);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static void say(void *arg, const char *msg)
{
	fprintf(stderr, "receive: %s\n", msg);
}

static int progress(void *arg, uint64_t stream_bytes, uint64_t block_bytes,
		    int final)
{
	uint64_t *shown = arg;

	/* a line per 64 MiB of blocks, and at the end */
	if (final || block_bytes >= *shown + (64u << 20)) {
		fprintf(stderr, "receive: %" PRIu64 " bytes of blocks from %"
			PRIu64 " bytes of stream%s\n", block_bytes,
			stream_bytes, final ? " (all of it)" : "");
		*shown = block_bytes;
	}
	return 0;
}

static int receive(int argc, char **argv)
{
	struct track_apply_params p;
	struct track_apply *a;
	struct track_stream_info info;
	struct track_stream_totals t;
	struct sockaddr_un sa;
	uint64_t shown = 0;
	int opt, lfd, fd, ret;

	track_apply_params_init(&p);
	while ((opt = getopt(argc, argv, "s:u:")) != -1) {
		if (opt == 's')
			p.state_path = optarg;
		else if (opt == 'u')
			p.undo_path = optarg;
		else
			return 2;
	}
	if (argc - optind != 2)
		return 2;
	p.target = argv[optind + 1];
	p.log = say;
	p.progress = progress;
	p.progress_arg = &shown;
	ret = track_apply_new(&p, &a);
	if (ret) {
		fprintf(stderr, "receive: %s\n", strerror(-ret));
		return 1;
	}

	lfd = unix_socket(argv[optind], &sa);
	unlink(sa.sun_path);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(lfd, 1)) {
		fprintf(stderr, "receive: %s: %s\n", sa.sun_path,
			strerror(errno));
		return 1;
	}
	fd = accept(lfd, NULL, NULL);
	close(lfd);
	unlink(sa.sun_path);
	if (fd < 0) {
		perror("receive: accept");
		return 1;
	}

	/* Checks, writes, syncs, updates the state file; or explains. */
	ret = track_apply_run(a, sock_read, &fd, "the socket");
	if (!ret && !track_apply_get_info(a, &info, &t, NULL))
		printf("applied epoch %" PRIu64 " to %" PRIu64 " of \"%s\": %"
		       PRIu64 " data blocks, %" PRIu64 " zero blocks\n",
		       info.base_epoch, info.new_epoch, info.source_id,
		       t.data_blocks, t.zero_blocks);
	/* Tell the sender: one byte, 0 for applied. */
	if (write(fd, ret ? "\1" : "\0", 1) != 1)
		ret = ret ? ret : -errno;
	close(fd);
	track_apply_free(a);
	return ret ? 1 : 0;
}

/* --- the sending side: track_extract_* ------------------------------------ */

static ssize_t sock_write(void *arg, const void *buf, size_t len)
{
	const char *p = buf;
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = send(*(int *)arg, p + done, len - done, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += n;
	}
	return len;
}

static int send_blocks(int argc, char **argv)
{
	struct track_stream_info info = { .block_size = BLOCK };
	struct track_stream_writer *w = NULL;
	struct track_extract *x = NULL;
	struct track_stream_totals t;
	struct sockaddr_un sa;
	unsigned long long first, last;
	uint64_t epoch = 0;
	char ack = 1;
	int opt, fd, i, ret;

	while ((opt = getopt(argc, argv, "e:")) != -1) {
		if (opt != 'e')
			return 2;
		epoch = strtoull(optarg, NULL, 10);
	}
	if (argc - optind < 2)
		return 2;

	ret = track_extract_new(argv[optind + 1], BLOCK, &x);
	if (ret) {
		fprintf(stderr, "send: %s\n", x ? track_extract_error(x) :
			strerror(-ret));
		track_extract_free(x);
		return 1;
	}
	fd = unix_socket(argv[optind], &sa);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "send: %s: %s\n", sa.sun_path,
			strerror(errno));
		return 1;
	}

	info.flags = argc - optind == 2 ? TRACK_STREAM_FULL : 0;
	info.device_size = track_extract_size(x);
	info.base_epoch = epoch;
	info.new_epoch = epoch + 1;
	snprintf(info.source_id, sizeof(info.source_id), "example:%.100s",
		 argv[optind + 1]);
	ret = track_stream_writer_new(&info, sock_write, &fd, &w);
	if (!ret)
		ret = track_extract_start(x, w);
	if (info.flags & TRACK_STREAM_FULL) {
		if (!ret)
			ret = track_extract_add(x, 0,
						track_extract_block_count(x));
	} else {
		for (i = optind + 2; i < argc && !ret; i++) {
			if (sscanf(argv[i], "%llu-%llu", &first, &last) != 2 ||
			    last < first) {
				fprintf(stderr, "send: %s is not FIRST-LAST\n",
					argv[i]);
				ret = -EINVAL;
				break;
			}
			ret = track_extract_add(x, first, last - first + 1);
		}
	}
	if (!ret)
		ret = track_extract_finish(x, &t);
	else
		track_extract_abort(x);
	if (ret && *track_extract_error(x))
		fprintf(stderr, "send: %s\n", track_extract_error(x));
	else if (ret)
		fprintf(stderr, "send: %s\n", strerror(-ret));
	/* The stream is complete: wait for the receiver's verdict. */
	if (!ret) {
		shutdown(fd, SHUT_WR);
		if (read(fd, &ack, 1) != 1 || ack) {
			fprintf(stderr, "send: the receiver did not apply it "
				"(see its messages)\n");
			ret = -EIO;
		} else {
			printf("sent %" PRIu64 " data blocks, %" PRIu64
			       " zero blocks\n", t.data_blocks,
			       t.zero_blocks);
		}
	}
	close(fd);
	track_extract_free(x);
	track_stream_writer_free(w);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	int ret = 2;

	if (argc > 1 && !strcmp(argv[1], "receive"))
		ret = receive(argc - 1, argv + 1);
	else if (argc > 1 && !strcmp(argv[1], "send"))
		ret = send_blocks(argc - 1, argv + 1);
	if (ret == 2)
		fprintf(stderr, "usage: dsync-socket receive [-s STATE] "
			"[-u UNDO] SOCKET TARGET\n"
			"       dsync-socket send [-e EPOCH] SOCKET SOURCE "
			"[FIRST-LAST ...]\n");
	return ret;
}
