// SPDX-License-Identifier: LGPL-2.1-or-later
/* Helpers of the dsync tools; see dsync_util.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>

#include <libtrack.h>

#include "dsync_util.h"

#define DS_PIPE_BYTES	(1 << 20)	/* a stream record */

const char *ds_prog = "dsync";
volatile sig_atomic_t ds_stop;

void ds_err(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n", ds_prog, buf);
}

int ds_parse_u64(const char *s, bool suffix, uint64_t *v)
{
	unsigned long long n;
	unsigned int shift = 0;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	if (suffix && *end) {
		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		case 't': case 'T': shift = 40; break;
		default: return -EINVAL;
		}
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
	}
	if (*end)
		return -EINVAL;
	if (shift && n > (UINT64_MAX >> shift))
		return -EINVAL;
	*v = (uint64_t)n << shift;
	return 0;
}

const char *ds_source_id_problem(const char *s)
{
	size_t n = strlen(s);

	if (!n)
		return "--source-id must not be empty";
	if (n > TRACK_STREAM_ID_MAX)
		return "--source-id is longer than 128 characters";
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return "--source-id must be printable ASCII";
	if (s[0] == ' ' || s[n - 1] == ' ')
		return "--source-id must not start or end with a blank "
		       "(dmmerge's state file could not keep it)";
	return NULL;
}

const char *ds_human(uint64_t bytes, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB",
					    "PiB" };
	double v = bytes;
	int i = 0;

	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%" PRIu64 " B", bytes);
	else
		snprintf(buf, len, "%.1f %s", v, unit[i]);
	return buf;
}

double ds_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_signal(int sig)
{
	ds_stop = sig;
}

void ds_catch_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART: interrupt writes */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

void ds_block_signals(bool block)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

int ds_fs_check(const char *mnt, char *msg, size_t msglen)
{
	struct statx sx;
	int fd, err;

	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		snprintf(msg, msglen, "--fsfreeze %s: %s%s", mnt,
			 strerror(err), err == ENOTDIR ?
			 " (give the directory the file system is mounted "
			 "on)" : "");
		return -err;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx)) {
		err = errno;
		snprintf(msg, msglen, "--fsfreeze %s: %s", mnt, strerror(err));
		close(fd);
		return -err;
	}
	if ((sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	    !(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT)) {
		snprintf(msg, msglen, "--fsfreeze %s: not a mount point (give "
			 "the directory the file system on the dm-track "
			 "device is mounted on; 'findmnt' lists them)", mnt);
		close(fd);
		return -EINVAL;
	}
	return fd;
}

int ds_fs_freeze(int fd, const char *mnt, char *msg, size_t msglen)
{
	int err;

	ds_block_signals(true);
	if (!ioctl(fd, FIFREEZE, 0))
		return 0;
	err = errno;
	ds_block_signals(false);
	switch (err) {
	case EBUSY:
		snprintf(msg, msglen, "--fsfreeze %s: the file system is "
			 "already frozen (by someone else: 'fsfreeze -u %s' "
			 "thaws it)", mnt, mnt);
		break;
	case EOPNOTSUPP:
	case ENOTTY:
		snprintf(msg, msglen, "--fsfreeze %s: this file system cannot "
			 "be frozen (no FIFREEZE); sync without --fsfreeze "
			 "(the image is then crash-consistent only)", mnt);
		err = EOPNOTSUPP;
		break;
	case EPERM:
		snprintf(msg, msglen, "--fsfreeze %s: permission denied "
			 "(freezing needs root, CAP_SYS_ADMIN)", mnt);
		break;
	default:
		snprintf(msg, msglen, "--fsfreeze %s: freezing failed: %s",
			 mnt, strerror(err));
	}
	return -err;
}

int ds_fs_thaw(int fd, const char *mnt, char *msg, size_t msglen)
{
	int ret = 0, tries;

	/* A signal is blocked, but be deaf to EINTR anyway. */
	for (tries = 0; ioctl(fd, FITHAW, 0); tries++) {
		if (errno == EINTR && tries < 100)
			continue;
		ret = -errno;
		snprintf(msg, msglen, "--fsfreeze %s: THAWING FAILED: %s; the "
			 "file system may still be frozen: run 'fsfreeze -u "
			 "%s'", mnt, strerror(errno), mnt);
		break;
	}
	ds_block_signals(false);
	return ret;
}

ssize_t ds_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		if (ds_stop)
			return -EINTR;
		n = write(fd, p + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += n;
	}
	return len;
}

void ds_pipe_grow(int fd)
{
	struct stat st;
	int size;

	if (fstat(fd, &st) || !S_ISFIFO(st.st_mode))
		return;
	size = fcntl(fd, F_GETPIPE_SZ);
	if (size >= 0 && size < DS_PIPE_BYTES)
		fcntl(fd, F_SETPIPE_SZ, DS_PIPE_BYTES);
}

void ds_progress_init(struct ds_progress *p, enum ds_progress_mode mode,
		      uint64_t total)
{
	memset(p, 0, sizeof(*p));
	p->tty = isatty(STDERR_FILENO);
	p->on = mode == DS_PROGRESS_ON || (mode == DS_PROGRESS_AUTO && p->tty);
	p->total = total;
	p->start = p->last = ds_now();
}

void ds_progress_update(struct ds_progress *p, uint64_t done, bool final)
{
	char a[32], b[32], c[32], eta[32] = "";
	double now, rate, t;

	p->done = done;
	if (!p->on)
		return;
	now = ds_now();
	/* twice a second on a terminal, every 10 s into a log */
	if (!final && now - p->last < (p->tty ? 0.5 : 10))
		return;
	p->last = now;
	t = now - p->start;
	rate = t > 0 ? done / t : 0;
	if (!final && rate > 0 && p->total > done) {
		uint64_t s = (uint64_t)((p->total - done) / rate);

		snprintf(eta, sizeof(eta), "  ETA %" PRIu64 ":%02" PRIu64
			 ":%02" PRIu64, s / 3600, s / 60 % 60, s % 60);
	}
	if (p->open_ended) {
		fprintf(stderr, "%s%s: %s  %s/s%s", p->tty ? "\r" : "",
			ds_prog, ds_human(done, a, sizeof(a)),
			ds_human((uint64_t)rate, c, sizeof(c)),
			p->tty ? (final ? "\n" : "\033[K") : "\n");
		return;
	}
	fprintf(stderr, "%s%s: %s of %s  %3.0f%%  %s/s%s%s",
		p->tty ? "\r" : "", ds_prog,
		ds_human(done, a, sizeof(a)),
		ds_human(p->total, b, sizeof(b)),
		p->total ? 100.0 * done / p->total : 100.0,
		ds_human((uint64_t)rate, c, sizeof(c)), eta,
		p->tty ? (final ? "\n" : "\033[K") : "\n");
}

static int ext_cmp(const void *a, const void *b)
{
	const struct ds_extent *x = a, *y = b;

	return x->first < y->first ? -1 : x->first > y->first;
}

int ds_read_dirty_list(const char *path, uint64_t nr_blocks,
		       struct ds_extent **ext, size_t *n, char *msg,
		       size_t msglen)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	struct ds_extent *e = NULL, *tmp;
	size_t cap = 0, cnt = 0, i, j, lineno = 0;
	char *line = NULL, *p, *end;
	size_t linecap = 0;
	unsigned long long a, b;
	int ret = 0;

	if (!f) {
		ret = -errno;
		snprintf(msg, msglen, "%s: %s", path, strerror(errno));
		return ret;
	}
	while (getline(&line, &linecap, f) > 0) {
		lineno++;
		p = line + strspn(line, " \t");
		if (*p == '#' || *p == '\n' || !*p)
			continue;
		if (*p < '0' || *p > '9')
			goto bad;
		errno = 0;
		a = strtoull(p, &end, 10);
		b = a;
		if (errno)
			goto bad;
		if (*end == '-') {
			p = end + 1;
			if (*p < '0' || *p > '9')
				goto bad;
			b = strtoull(p, &end, 10);
			if (errno || b < a)
				goto bad;
		}
		end += strspn(end, " \t\r\n");
		if (*end)
			goto bad;
		if (b >= nr_blocks) {
			snprintf(msg, msglen, "%s:%zu: block %llu is past the "
				 "end of the device (%" PRIu64 " blocks; is "
				 "--block-size right?)", path, lineno, b,
				 nr_blocks);
			ret = -ERANGE;
			goto out;
		}
		if (cnt == cap) {
			cap = cap ? cap * 2 : 1024;
			tmp = realloc(e, cap * sizeof(*e));
			if (!tmp) {
				ret = -ENOMEM;
				snprintf(msg, msglen, "out of memory");
				goto out;
			}
			e = tmp;
		}
		e[cnt].first = a;
		e[cnt].count = b - a + 1;
		cnt++;
	}
	if (ferror(f)) {
		ret = -EIO;
		snprintf(msg, msglen, "%s: read error", path);
		goto out;
	}
	qsort(e, cnt, sizeof(*e), ext_cmp);
	for (i = 0, j = 0; i < cnt; i++) {
		if (j && e[i].first <= e[j - 1].first + e[j - 1].count) {
			uint64_t end2 = e[i].first + e[i].count;

			if (end2 > e[j - 1].first + e[j - 1].count)
				e[j - 1].count = end2 - e[j - 1].first;
		} else {
			e[j++] = e[i];
		}
	}
	*ext = e;
	*n = j;
	e = NULL;
	goto out;
bad:
	snprintf(msg, msglen, "%s:%zu: expected a block number or a range "
		 "A-B, got \"%.*s\"", path, lineno,
		 (int)strcspn(line, "\r\n"), line);
	ret = -EINVAL;
out:
	free(line);
	free(e);
	if (f != stdin)
		fclose(f);
	return ret;
}
