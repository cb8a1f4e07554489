// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * uds-ranges-shim: an LD_PRELOAD library that makes a stock kernel look
 * like the UDS+ kernel to uds-plus, for append-only workloads, so that
 * ranges mode can be measured on a host without the patch.
 *
 * inotify_init1(IN_REPORT_RANGE) is accepted; every IN_MODIFY read from
 * such an instance is given the range [size at the previous event, size
 * now) when the file grew (exactly what the patched kernel reports for an
 * append), and left whole-file otherwise. The sizes come from a stat()
 * per event, which the real kernel does not need: the shim costs more
 * than the patch, never less. Only for benchmarks; never for real use.
 *
 *   cc -O2 -shared -fPIC -o shim.so bench/uds-ranges-shim.c -ldl
 *   LD_PRELOAD=./shim.so uds-plus ...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define IN_REPORT_RANGE 0x08000000
#define IN_RANGE        0x00800000

static int ranged_fds[16], nr_fds;
static struct { int fd, wd; char *dir; } wds[4096];
static int nr_wds;
static struct { char *path; uint64_t size; } sizes[4096];
static int nr_sizes;

static ssize_t (*real_read)(int, void *, size_t);

int inotify_init1(int flags)
{
	static int (*real)(int);
	int fd;

	if (!real)
		real = dlsym(RTLD_NEXT, "inotify_init1");
	fd = real(flags & ~IN_REPORT_RANGE);
	if (fd >= 0 && (flags & IN_REPORT_RANGE) && nr_fds < 16)
		ranged_fds[nr_fds++] = fd;
	return fd;
}

int inotify_add_watch(int fd, const char *path, uint32_t mask)
{
	static int (*real)(int, const char *, uint32_t);
	char buf[PATH_MAX];
	int wd;

	if (!real)
		real = dlsym(RTLD_NEXT, "inotify_add_watch");
	wd = real(fd, path, mask);
	if (wd >= 0 && nr_wds < 4096 && realpath(path, buf)) {
		for (int i = 0; i < nr_wds; i++) {
			if (wds[i].fd == fd && wds[i].wd == wd) {
				free(wds[i].dir);
				wds[i].dir = strdup(buf);
				return wd;
			}
		}
		wds[nr_wds].fd = fd;
		wds[nr_wds].wd = wd;
		wds[nr_wds++].dir = strdup(buf);
	}
	return wd;
}

static const char *dir_of(int fd, int wd)
{
	for (int i = 0; i < nr_wds; i++)
		if (wds[i].fd == fd && wds[i].wd == wd)
			return wds[i].dir;
	return NULL;
}

static uint64_t *size_slot(const char *path)
{
	for (int i = 0; i < nr_sizes; i++)
		if (!strcmp(sizes[i].path, path))
			return &sizes[i].size;
	if (nr_sizes == 4096)
		return NULL;
	sizes[nr_sizes].path = strdup(path);
	sizes[nr_sizes].size = 0;
	return &sizes[nr_sizes++].size;
}

static bool is_ranged(int fd)
{
	for (int i = 0; i < nr_fds; i++)
		if (ranged_fds[i] == fd)
			return true;
	return false;
}

ssize_t read(int fd, void *buf, size_t n)
{
	static unsigned char raw[16384];
	unsigned char *out = buf;
	size_t off = 0, o = 0;
	ssize_t got;

	if (!real_read)
		real_read = dlsym(RTLD_NEXT, "read");
	if (!is_ranged(fd) || n < 2 * sizeof(raw))
		return real_read(fd, buf, n);
	got = real_read(fd, raw, sizeof(raw));
	if (got <= 0)
		return got;
	while (off < (size_t)got) {
		struct inotify_event *e = (void *)(raw + off);
		size_t nl = e->len ? strlen(e->name) : 0;
		struct inotify_event *h = (void *)(out + o);
		uint64_t r[2] = { 0, 0 };
		bool range = false;

		off += sizeof(*e) + e->len;
		if ((e->mask & IN_MODIFY) && nl) {
			const char *dir = dir_of(fd, e->wd);
			char path[PATH_MAX];
			struct stat st;
			uint64_t *prev;

			if (dir && snprintf(path, sizeof(path), "%s/%s", dir,
					    e->name) < (int)sizeof(path) &&
			    !stat(path, &st) && (prev = size_slot(path))) {
				if ((uint64_t)st.st_size > *prev) {
					r[0] = *prev;
					r[1] = (uint64_t)st.st_size - *prev;
					range = true;
				}
				*prev = (uint64_t)st.st_size;
			}
		}
		*h = *e;
		if (!range) {
			memcpy(out + o, e, sizeof(*e) + e->len);
			o += sizeof(*e) + e->len;
			continue;
		}
		h->mask |= IN_RANGE;
		h->len = (uint32_t)((nl + 1 + 15) / 16 * 16 + 16);
		memset(h->name, 0, h->len);
		memcpy(h->name, e->name, nl);
		memcpy(h->name + h->len - 16, r, 16);
		o += sizeof(*h) + h->len;
	}
	return (ssize_t)o;
}
