// SPDX-License-Identifier: MIT
/*
 * A Syncthing-style block list kept up to date from libtrack's events.
 *
 * Syncthing describes every file as a list of blocks (128 KiB by default,
 * the last one shorter) with a SHA-256 each, and re-hashes the whole file
 * whenever it changes. This client keeps the same list for a tree but
 * re-hashes only the blocks a change overlaps: a MODIFY event with a byte
 * range (TRACK_EVENT_RANGE, on a kernel with the range patch) adds the
 * range to the file's track_extents set; when the tree has been quiet for
 * a moment, track_extents_for_each_block() turns the set into the block
 * indexes to re-hash. A modification without a range, a new file or a
 * RESCAN falls back to hashing the whole file, which is what plain inotify
 * gives on any stock kernel.
 *
 *   blocklist [-b BLOCK_SIZE] [-o FILE] [-q MS] [--no-ranges] DIR
 *                                             watch DIR; on SIGTERM, SIGINT
 *                                             or SIGUSR1 write the list to
 *                                             FILE (default: stdout), with
 *                                             the cost so far on stderr;
 *                                             SIGUSR1 keeps going. -q: the
 *                                             quiet time before re-hashing
 *                                             (100 ms; 0: after every read
 *                                             of the queued events, as a
 *                                             naive client would);
 *                                             --no-ranges: plain inotify
 *   blocklist --scan [-b BLOCK_SIZE] DIR      hash DIR from scratch, print
 *
 *   cc -o blocklist blocklist.c $(pkg-config --cflags --libs libtrack)
 *
 * Files are kept in a plain array and looked up linearly: an example, not
 * a sync engine.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libtrack.h>

/* --- SHA-256 (FIPS 180-4), small and self-contained ------------------- */

struct sha256 {
	uint32_t h[8];
	uint64_t len;
	unsigned char buf[64];
	size_t n;
};

static const uint32_t sha_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(struct sha256 *s, const unsigned char *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, h, t1, t2;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (; i < 64; i++)
		w[i] = (ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10)) +
		       w[i - 7] +
		       (ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3)) +
		       w[i - 16];
	a = s->h[0]; b = s->h[1]; c = s->h[2]; d = s->h[3];
	e = s->h[4]; f = s->h[5]; g = s->h[6]; h = s->h[7];
	for (i = 0; i < 64; i++) {
		t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) +
		     ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
		t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) +
		     ((a & b) ^ (a & c) ^ (b & c));
		h = g; g = f; f = e; e = d + t1;
		d = c; c = b; b = a; a = t1 + t2;
	}
	s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
	s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

static void sha256(const void *data, size_t len, unsigned char out[32])
{
	static const uint32_t iv[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};
	const unsigned char *p = data;
	unsigned char tail[128] = { 0 };
	struct sha256 s;
	size_t rest, tl;

	memcpy(s.h, iv, sizeof(iv));
	for (rest = len; rest >= 64; rest -= 64, p += 64)
		sha_block(&s, p);
	memcpy(tail, p, rest);
	tail[rest] = 0x80;
	tl = rest < 56 ? 64 : 128;
	for (int i = 0; i < 8; i++)
		tail[tl - 1 - i] = (unsigned char)(((uint64_t)len * 8) >> (8 * i));
	sha_block(&s, tail);
	if (tl == 128)
		sha_block(&s, tail + 64);
	for (int i = 0; i < 8; i++) {
		out[4 * i] = (unsigned char)(s.h[i] >> 24);
		out[4 * i + 1] = (unsigned char)(s.h[i] >> 16);
		out[4 * i + 2] = (unsigned char)(s.h[i] >> 8);
		out[4 * i + 3] = (unsigned char)s.h[i];
	}
}

/* --- the block list --------------------------------------------------- */

struct bl_file {
	char *path;			/* relative to the root */
	uint64_t size;
	uint64_t nblocks;
	unsigned char (*hash)[32];
	struct track_extents *dirty;	/* ranges changed since hashed */
	bool whole;			/* re-hash all of it */
};

struct blocklist {
	char *root;
	uint64_t bs;
	struct bl_file *f;
	size_t n, cap;
	unsigned char *buf;		/* one block */
	uint64_t bytes_read;		/* what re-hashing cost so far */
	uint64_t blocks_hashed;
	uint64_t files_whole;
};

static int bl_new(const char *root, uint64_t bs, struct blocklist **blp)
{
	struct blocklist *bl = calloc(1, sizeof(*bl));

	if (!bl)
		return -ENOMEM;
	bl->root = strdup(root);
	bl->bs = bs;
	bl->buf = malloc(bs);
	if (!bl->root || !bl->buf) {
		free(bl->root);
		free(bl->buf);
		free(bl);
		return -ENOMEM;
	}
	*blp = bl;
	return 0;
}

static void bl_drop_at(struct blocklist *bl, size_t i)
{
	free(bl->f[i].path);
	free(bl->f[i].hash);
	track_extents_free(bl->f[i].dirty);
	bl->f[i] = bl->f[--bl->n];
}

static void bl_free(struct blocklist *bl)
{
	if (!bl)
		return;
	while (bl->n)
		bl_drop_at(bl, 0);
	free(bl->f);
	free(bl->buf);
	free(bl->root);
	free(bl);
}

static struct bl_file *bl_find(struct blocklist *bl, const char *path)
{
	for (size_t i = 0; i < bl->n; i++)
		if (!strcmp(bl->f[i].path, path))
			return &bl->f[i];
	return NULL;
}

/* The entry for PATH, created (to be hashed whole) if new. */
static struct bl_file *bl_get(struct blocklist *bl, const char *path)
{
	struct bl_file *f = bl_find(bl, path);

	if (f)
		return f;
	if (bl->n == bl->cap) {
		size_t cap = bl->cap ? bl->cap * 2 : 64;
		struct bl_file *v = realloc(bl->f, cap * sizeof(*v));

		if (!v)
			return NULL;
		bl->f = v;
		bl->cap = cap;
	}
	f = &bl->f[bl->n];
	memset(f, 0, sizeof(*f));
	f->path = strdup(path);
	if (!f->path || track_extents_new(0, &f->dirty)) {
		free(f->path);
		return NULL;
	}
	f->whole = true;
	bl->n++;
	return f;
}

static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	return !strncmp(path, dir, n) && (path[n] == '/' || !path[n]);
}

/* Forget PATH and, for a directory, everything below it. */
static void bl_forget(struct blocklist *bl, const char *path)
{
	for (size_t i = 0; i < bl->n;) {
		if (under(bl->f[i].path, path))
			bl_drop_at(bl, i);
		else
			i++;
	}
}

/* PATH (a file, or a directory and its tree) is now NEWP. */
static int bl_rename(struct blocklist *bl, const char *old, const char *newp)
{
	size_t ol = strlen(old);

	bl_forget(bl, newp);	/* a rename replaces what was there */
	for (size_t i = 0; i < bl->n; i++) {
		char *p;

		if (!under(bl->f[i].path, old))
			continue;
		if (asprintf(&p, "%s%s", newp, bl->f[i].path + ol) < 0)
			return -ENOMEM;
		free(bl->f[i].path);
		bl->f[i].path = p;
	}
	return 0;
}

/* Every regular file below REL gets an entry to be hashed whole. */
static int bl_scan_dir(struct blocklist *bl, const char *rel)
{
	char *full;
	struct dirent *de;
	DIR *d;
	int r = 0;

	if (asprintf(&full, "%s/%s", bl->root, rel) < 0)
		return -ENOMEM;
	d = opendir(full);
	free(full);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	while (!r && (de = readdir(d))) {
		struct stat st;
		char *p;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&p, "%s%s%s", rel, rel[0] ? "/" : "",
			     de->d_name) < 0) {
			r = -ENOMEM;
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW)) {
			free(p);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			r = bl_scan_dir(bl, p);
		} else if (S_ISREG(st.st_mode)) {
			struct bl_file *f = bl_get(bl, p);

			if (!f)
				r = -ENOMEM;
			else
				f->whole = true;
		}
		free(p);
	}
	closedir(d);
	return r;
}

/* Compare the whole tree again: every file re-hashed, the gone forgotten. */
static int bl_rescan(struct blocklist *bl)
{
	for (size_t i = 0; i < bl->n; i++)
		bl->f[i].whole = true;	/* bl_update() drops the gone */
	return bl_scan_dir(bl, "");
}

/* Feed one event. */
static int bl_event(struct blocklist *bl, const struct track_event *ev)
{
	struct bl_file *f;

	switch (ev->kind) {
	case TRACK_EVENT_CREATE:
		if (ev->flags & TRACK_EVENT_DIR)
			return 0;	/* its files come as CREATEs too */
		return bl_get(bl, ev->path) ? 0 : -ENOMEM;
	case TRACK_EVENT_MODIFY:
		if (ev->flags & TRACK_EVENT_DIR)
			return 0;
		f = bl_get(bl, ev->path);
		if (!f)
			return -ENOMEM;
		if (!(ev->flags & TRACK_EVENT_RANGE))
			f->whole = true;	/* plain inotify: no range */
		else if (track_extents_add(f->dirty, ev->offset, ev->length))
			f->whole = true;
		return 0;
	case TRACK_EVENT_DELETE:
		bl_forget(bl, ev->path);
		return 0;
	case TRACK_EVENT_RENAME:
		return bl_rename(bl, ev->old_path, ev->path);
	case TRACK_EVENT_RESCAN:
		return bl_rescan(bl);
	default:
		return 0;	/* ATTRIB, CLOSE_WRITE: the data is the same */
	}
}

/* Hash blocks FIRST .. FIRST + COUNT - 1 of the file open at FD. */
struct hash_job {
	struct blocklist *bl;
	struct bl_file *f;
	int fd;
};

static int hash_blocks(uint64_t first, uint64_t count, void *arg)
{
	struct hash_job *j = arg;
	struct blocklist *bl = j->bl;

	for (uint64_t b = first; b < first + count && b < j->f->nblocks; b++) {
		uint64_t off = b * bl->bs;
		uint64_t len = j->f->size - off < bl->bs ? j->f->size - off :
			       bl->bs;
		ssize_t k = pread(j->fd, bl->buf, len, (off_t)off);

		if (k < 0)
			return -errno;
		/* A file cut meanwhile: hash what is there; the cut's own
		 * event comes next and fixes the list. */
		sha256(bl->buf, (size_t)k, j->f->hash[b]);
		bl->bytes_read += (uint64_t)k;
		bl->blocks_hashed++;
	}
	return 0;
}

/* Bring one file's list up to date. Returns 1 if it is gone. */
static int bl_update_file(struct blocklist *bl, struct bl_file *f)
{
	struct hash_job j = { .bl = bl, .f = f };
	uint64_t old_n = f->nblocks, old_size = f->size, n;
	unsigned char (*h)[32];
	struct stat st;
	char *full;
	int r = 0;

	if (asprintf(&full, "%s/%s", bl->root, f->path) < 0)
		return -ENOMEM;
	j.fd = open(full, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	free(full);
	if (j.fd < 0)
		return 1;
	if (fstat(j.fd, &st) || !S_ISREG(st.st_mode)) {
		close(j.fd);
		return 1;
	}
	f->size = (uint64_t)st.st_size;
	n = f->size / bl->bs + (f->size % bl->bs != 0);
	h = realloc(f->hash, (n ? n : 1) * sizeof(*h));
	if (!h) {
		close(j.fd);
		return -ENOMEM;
	}
	f->hash = h;
	f->nblocks = n;
	if (f->whole) {
		r = hash_blocks(0, n, &j);
		bl->files_whole++;
	} else {
		/* The blocks the changes overlap ... */
		r = track_extents_for_each_block(f->dirty, bl->bs, f->size,
						 hash_blocks, &j);
		/* ... the blocks that are new, and the old and new last
		 * blocks, whose length changes with the size. */
		if (!r && n > old_n)
			r = hash_blocks(old_n, n - old_n, &j);
		if (!r && f->size != old_size && old_n && old_n - 1 < n)
			r = hash_blocks(old_n - 1, 1, &j);
		if (!r && f->size != old_size && n)
			r = hash_blocks(n - 1, 1, &j);
	}
	close(j.fd);
	if (!r) {
		f->whole = false;
		track_extents_clear(f->dirty);
	}
	return r;
}

/* Re-hash what changed since the last update. */
static int bl_update(struct blocklist *bl)
{
	for (size_t i = 0; i < bl->n;) {
		struct bl_file *f = &bl->f[i];
		int r;

		if (!f->whole && !track_extents_count(f->dirty)) {
			i++;
			continue;
		}
		r = bl_update_file(bl, f);
		if (r < 0)
			return r;
		if (r == 1)
			bl_drop_at(bl, i);
		else
			i++;
	}
	return 0;
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct bl_file *)a)->path,
		      ((const struct bl_file *)b)->path);
}

/* Write the list: "path size", then one "  index sha256" line per block. */
static void bl_dump(struct blocklist *bl, FILE *out)
{
	qsort(bl->f, bl->n, sizeof(*bl->f), by_path);
	for (size_t i = 0; i < bl->n; i++) {
		struct bl_file *f = &bl->f[i];

		fprintf(out, "%s %" PRIu64 "\n", f->path, f->size);
		for (uint64_t b = 0; b < f->nblocks; b++) {
			fprintf(out, "  %" PRIu64 " ", b);
			for (int k = 0; k < 32; k++)
				fprintf(out, "%02x", f->hash[b][k]);
			fputc('\n', out);
		}
	}
}

#ifndef BLOCKLIST_NO_MAIN

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	got_signal = sig;
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* A quiet time in milliseconds, 0 to 3600000; -1 if ARG is not one. */
static int parse_ms(const char *arg)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < 0 || v > 3600000)
		return -1;
	return (int)v;
}

static int usage(void)
{
	fprintf(stderr, "usage: blocklist [-b BLOCK_SIZE] [-o FILE] [-q MS] "
		"[--no-ranges] DIR\n"
		"       blocklist --scan [-b BLOCK_SIZE] DIR\n");
	return 2;
}

static int dump_to(struct blocklist *bl, const char *path)
{
	FILE *out = path ? fopen(path, "w") : stdout;

	if (!out) {
		fprintf(stderr, "blocklist: cannot write %s: %s\n", path,
			strerror(errno));
		return 1;
	}
	bl_dump(bl, out);
	if (path ? fclose(out) : fflush(out)) {
		fprintf(stderr, "blocklist: writing %s failed\n",
			path ? path : "the list");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	const char *out = NULL, *dir;
	uint64_t bs = 128 * 1024;
	struct blocklist *bl;
	struct track_watch *w = NULL;
	bool scan = false, dirty = false;
	unsigned int wflags = 0;
	int i, r, status = 0, quiet_ms = 100;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "--scan"))
			scan = true;
		else if (!strcmp(argv[i], "-b") && i + 1 < argc)
			bs = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "-q") && i + 1 < argc) {
			quiet_ms = parse_ms(argv[++i]);
			if (quiet_ms < 0) {
				fprintf(stderr, "blocklist: -q %s: give the quiet "
					"time in milliseconds, 0 to 3600000\n",
					argv[i]);
				return 2;
			}
		}
		else if (!strcmp(argv[i], "--no-ranges"))
			wflags |= TRACK_WATCH_NO_RANGES;
		else
			return usage();
	}
	if (i != argc - 1 || !bs)
		return usage();
	dir = argv[i];
	if (bl_new(dir, bs, &bl))
		return 1;
	if (!scan) {
		/* Watch first, then scan: nothing written in between is lost. */
		r = track_watch_new(wflags, &w);
		if (!r && (r = track_watch_add(w, dir)) < 0)
			fprintf(stderr, "blocklist: %s\n", track_watch_error(w));
		if (r < 0) {
			fprintf(stderr, "blocklist: cannot watch %s: %s\n", dir,
				strerror(-r));
			return 1;
		}
		fprintf(stderr, "blocklist: watching %s (%s)\n", dir,
			track_watch_get_mode(w) != TRACK_WATCH_PLAIN ?
			"ranges: only changed blocks are re-hashed" :
			"plain inotify: changed files are re-hashed whole");
	}
	if (bl_rescan(bl) || bl_update(bl)) {
		fprintf(stderr, "blocklist: cannot hash %s\n", dir);
		return 1;
	}
	if (scan) {
		status = dump_to(bl, out);
		bl_free(bl);
		return status;
	}
	/* Only what changed from here on counts as the cost. */
	bl->bytes_read = bl->blocks_hashed = bl->files_whole = 0;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	for (;;) {
		struct track_event ev;
		double t0;

		/* Hash once the tree has been quiet for quiet_ms. */
		r = track_watch_next(w, &ev, dirty ? quiet_ms : -1);
		if (r == 1) {
			if (ev.kind == TRACK_EVENT_GONE) {
				fprintf(stderr, "blocklist: %s is gone\n", dir);
				status = 1;
				break;
			}
			if (bl_event(bl, &ev))
				break;
			dirty = true;
			continue;
		}
		if (r < 0 && r != -EINTR) {
			fprintf(stderr, "blocklist: %s\n", track_watch_error(w));
			status = 1;
			break;
		}
		t0 = cpu_seconds();
		if (got_signal) {
			/* Take in what the kernel has queued, then answer. */
			while (track_watch_next(w, &ev, 0) == 1)
				if (bl_event(bl, &ev))
					break;
		}
		if (bl_update(bl)) {
			fprintf(stderr, "blocklist: re-hashing failed\n");
			status = 1;
			break;
		}
		dirty = false;
		if (got_signal) {
			status = dump_to(bl, out);
			fprintf(stderr, "blocklist: %zu files; re-hashed %" PRIu64
				" blocks, %" PRIu64 " bytes read, %" PRIu64
				" files whole; %.3f s CPU in the last update,"
				" %.3f s in all\n",
				bl->n, bl->blocks_hashed, bl->bytes_read,
				bl->files_whole, cpu_seconds() - t0,
				cpu_seconds());
			if (got_signal != SIGUSR1 || status)
				break;
			got_signal = 0;
		}
	}
	track_watch_free(w);
	bl_free(bl);
	return status;
}

#endif /* BLOCKLIST_NO_MAIN */
