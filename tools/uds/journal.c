// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * The journal: the baseline of every synced path, as an append-only text
 * file in the state directory (never inside SAVINGBOX or SYNCFOLDER).
 *
 *   uds-plus-journal 1 <savingbox> <syncfolder>     header
 *   E <path> <S snap> <D snap> <racy>               baseline of a path
 *   X <path>                                        forget path and below
 *   R <from> <to>                                   rename path and below
 *   B <path>                                        in-place push began
 *   I <S dev> <S ino> <D dev> <D ino>               the folders' identity
 *
 * A snap is "type mode size mtime_ns ctime_ns ino" (type '-' = absent).
 * Paths are escaped: bytes up to 0x20, 0x7f and '%' as %XX, so any name
 * fits on one line. Records are applied in order; a torn last line (a
 * crash in the middle of a write) is ignored. A "B" without a later "E"
 * marks an in-place push that was cut short: the difference in SYNCFOLDER
 * is ours, not a collaborator's, so it is not a conflict.
 *
 * Commits are fdatasync()ed (unless --no-fsync). When the file holds many
 * more records than paths, it is rewritten: new file, fsync, rename.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uds.h"

#define MAGIC "uds-plus-journal 1"

char *journal_escape(const char *path)
{
	size_t n = 0;
	char *out, *o;

	for (const unsigned char *p = (const void *)path; *p; p++)
		n += (*p <= 0x20 || *p == 0x7f || *p == '%') ? 3 : 1;
	out = malloc(n + 1);
	if (!out)
		return NULL;
	o = out;
	for (const unsigned char *p = (const void *)path; *p; p++) {
		if (*p <= 0x20 || *p == 0x7f || *p == '%')
			o += sprintf(o, "%%%02X", *p);
		else
			*o++ = (char)*p;
	}
	*o = '\0';
	return out;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

char *journal_unescape(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		if (*s == '%') {
			int hi = hexval(s[1]), lo = hi < 0 ? -1 : hexval(s[2]);

			if (lo < 0 || (hi == 0 && lo == 0)) {
				free(out);
				return NULL;
			}
			*o++ = (char)(hi << 4 | lo);
			s += 2;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
	return out;
}

/* --- appending ------------------------------------------------------ */

static void put(struct journal *j, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct journal *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = j->cap - j->len;

		va_start(ap, fmt);
		n = vsnprintf(j->buf + j->len, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < room)
			break;
		size_t cap = (j->cap + (size_t)n + 1) * 2;
		char *b = realloc(j->buf, cap);

		if (!b) {
			/* Lost record: the next rescan compares everything. */
			err_("journal: out of memory");
			return;
		}
		j->buf = b;
		j->cap = cap;
	}
	j->len += (size_t)n;
	j->records++;
}

static void put_snap(struct journal *j, const struct snap *s)
{
	put(j, " %c %o %" PRIu64 " %" PRId64 " %" PRId64 " %" PRIu64,
	    s->type ? s->type : '-', s->mode, s->size, s->mtime_ns,
	    s->ctime_ns, s->ino);
}

static void put_entry(struct journal *j, const char *path,
		      const struct entry *e)
{
	char *p = journal_escape(path);

	if (!p)
		return;
	put(j, "E %s", p);
	put_snap(j, &e->s);
	put_snap(j, &e->d);
	put(j, " %d\n", e->racy ? 1 : 0);
	j->records -= 3;
	free(p);
}

void journal_set(struct journal *j, const char *path, const struct entry *e)
{
	put_entry(j, path, e);
}

void journal_drop(struct journal *j, const char *path)
{
	char *p = journal_escape(path);

	if (p)
		put(j, "X %s\n", p);
	free(p);
}

void journal_rename(struct journal *j, const char *from, const char *to)
{
	char *a = journal_escape(from), *b = journal_escape(to);

	if (a && b)
		put(j, "R %s %s\n", a, b);
	free(a);
	free(b);
}

void journal_begin(struct journal *j, const char *path)
{
	char *p = journal_escape(path);

	if (p)
		put(j, "B %s\n", p);
	free(p);
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int journal_commit(struct journal *j)
{
	int err;

	if (!j->len)
		return 0;
	err = write_all(j->fd, j->buf, j->len);
	if (err) {
		/*
		 * Keep the records: they are written again with the next
		 * commit. A torn line in between is skipped on load.
		 */
		return err;
	}
	j->size += j->len;
	j->len = 0;
	if (j->sync && fdatasync(j->fd))
		return -errno;
	return 0;
}

/* --- loading -------------------------------------------------------- */

static int parse_snap(char **save, struct snap *s)
{
	char *f[6];

	for (int i = 0; i < 6; i++) {
		f[i] = strtok_r(NULL, " ", save);
		if (!f[i])
			return -EBADMSG;
	}
	memset(s, 0, sizeof(*s));
	if (strlen(f[0]) != 1 || !strchr("-fdlo", f[0][0]))
		return -EBADMSG;
	s->type = f[0][0] == '-' ? 0 : f[0][0];
	s->mode = (uint32_t)strtoul(f[1], NULL, 8);
	s->size = strtoull(f[2], NULL, 10);
	s->mtime_ns = strtoll(f[3], NULL, 10);
	s->ctime_ns = strtoll(f[4], NULL, 10);
	s->ino = strtoull(f[5], NULL, 10);
	return 0;
}

static void free_entry(void *e)
{
	free(e);
}

/* Remove PATH and everything below it from MAP. */
static void map_drop_tree(struct hmap *map, const char *path)
{
	struct entry *e = hmap_get(map, path);

	if (e && e->s.type != 'd' && e->d.type != 'd') {
		free(hmap_del(map, path));
		return;		/* not a directory: nothing below it */
	}
	hmap_del_tree(map, path, free);
}

/* Move PATH and everything below it to TO in MAP. */
static int map_rename_tree(struct hmap *map, const char *from, const char *to)
{
	map_drop_tree(map, to);
	return hmap_rename_tree(map, from, to, free);
}

/* Exported for sync.c, which keeps its other maps the same way. */
int journal_map_rename(struct hmap *map, const char *from, const char *to)
{
	return map_rename_tree(map, from, to);
}

void journal_map_drop(struct hmap *map, const char *path)
{
	map_drop_tree(map, path);
}

static int apply(struct journal *j, struct hmap *map, char *line)
{
	char *save = NULL, *op = strtok_r(line, " ", &save);
	char *a, *b = NULL, *pa = NULL, *pb = NULL;
	int err = -EBADMSG;

	if (!op || strlen(op) != 1)
		return -EBADMSG;
	if (op[0] == 'I') {
		for (int i = 0; i < 4; i++) {
			char *f = strtok_r(NULL, " ", &save);

			if (!f)
				return -EBADMSG;
			j->ids[i] = strtoull(f, NULL, 10);
		}
		j->has_ids = true;
		return 0;
	}
	a = strtok_r(NULL, " ", &save);
	if (!a)
		return -EBADMSG;
	pa = journal_unescape(a);
	if (!pa || !pa[0])
		goto out;
	switch (op[0]) {
	case 'E': {
		struct entry *e = calloc(1, sizeof(*e)), *old;
		char *racy;

		if (!e) {
			err = -ENOMEM;
			goto out;
		}
		if (parse_snap(&save, &e->s) || parse_snap(&save, &e->d) ||
		    !(racy = strtok_r(NULL, " ", &save))) {
			free(e);
			goto out;
		}
		e->racy = racy[0] == '1';
		err = hmap_put(map, pa, e, (void **)&old);
		if (err)
			free(e);
		else
			free(old);
		break;
	}
	case 'X':
		map_drop_tree(map, pa);
		err = 0;
		break;
	case 'R':
		b = strtok_r(NULL, " ", &save);
		pb = b ? journal_unescape(b) : NULL;
		if (!pb || !pb[0])
			goto out;
		err = map_rename_tree(map, pa, pb);
		break;
	case 'B': {
		struct entry *e = hmap_get(map, pa);

		if (e)
			e->inflight = true;
		err = 0;
		break;
	}
	}
out:
	free(pa);
	free(pb);
	return err;
}

static int read_file(int fd, char **data, size_t *len)
{
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *b = realloc(buf, cap * 2);

			if (!b) {
				free(buf);
				return -ENOMEM;
			}
			buf = b;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			return -errno;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*data = buf;
	*len = n;
	return 0;
}

static char *header(const char *s_root, const char *d_root)
{
	char *a = journal_escape(s_root), *b = journal_escape(d_root), *h;

	if (!a || !b || asprintf(&h, MAGIC " %s %s\n", a, b) < 0)
		h = NULL;
	free(a);
	free(b);
	return h;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		err = -errno;
	close(fd);
	return err;
}

/* Write a fresh journal holding MAP to PATH, atomically. */
static int rewrite(const struct journal *j, const char *path,
		   const struct hmap *map, const char *s_root,
		   const char *d_root, bool sync)
{
	struct journal t = { .fd = -1 };
	struct hmap_item *it;
	size_t pos = 0;
	char *tmp, *h, *dir, *slash;
	int err;

	h = header(s_root, d_root);
	if (!h || asprintf(&tmp, "%s.new", path) < 0) {
		free(h);
		return -ENOMEM;
	}
	put(&t, "%s", h);
	free(h);
	if (j->has_ids)
		put(&t, "I %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
		    j->ids[0], j->ids[1], j->ids[2], j->ids[3]);
	while ((it = hmap_next(map, &pos))) {
		struct entry e = *(struct entry *)it->val;

		put_entry(&t, it->key, &e);
		if (e.inflight) {
			char *p = journal_escape(it->key);

			if (p)
				put(&t, "B %s\n", p);
			free(p);
		}
	}
	t.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (t.fd < 0) {
		err = -errno;
		goto out;
	}
	err = write_all(t.fd, t.buf, t.len);
	if (!err && sync && fsync(t.fd))
		err = -errno;
	close(t.fd);
	if (!err && rename(tmp, path))
		err = -errno;
	if (err) {
		unlink(tmp);
		goto out;
	}
	dir = strdup(path);
	if (dir && (slash = strrchr(dir, '/'))) {
		*slash = '\0';
		if (sync)
			fsync_dir(dir);
	}
	free(dir);
out:
	free(t.buf);
	free(tmp);
	return err;
}

int journal_open(struct journal *j, const char *dir, const char *s_root,
		 const char *d_root, struct hmap *map, bool sync)
{
	char *data = NULL, *line, *end, *h = NULL;
	size_t len = 0, lineno = 0;
	int fd, err;

	memset(j, 0, sizeof(*j));
	j->fd = -1;
	j->sync = sync;
	if (asprintf(&j->path, "%s/journal", dir) < 0)
		return -ENOMEM;
	h = header(s_root, d_root);
	if (!h) {
		err = -ENOMEM;
		goto fail;
	}
	fd = open(j->path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		err = read_file(fd, &data, &len);
		close(fd);
		if (err)
			goto fail;
	} else if (errno != ENOENT) {
		err = -errno;
		err_("cannot read the journal %s: %s", j->path, strerror(errno));
		goto fail;
	}

	if (len) {
		size_t hl = strlen(h);

		if (len < hl || memcmp(data, h, hl)) {
			err_("the journal %s belongs to another pair of folders "
			     "or another version (its first line is not '%.*s');"
			     " give this pair its own --state-dir", j->path,
			     (int)(hl - 1), h);
			err = -EEXIST;
			goto fail;
		}
		line = data + hl;
		while ((end = memchr(line, '\n', (size_t)(data + len - line)))) {
			*end = '\0';
			lineno++;
			if (apply(j, map, line)) {
				char aside[4096];

				snprintf(aside, sizeof(aside), "%s.corrupt-%ld",
					 j->path, (long)time(NULL));
				warn_("journal %s is corrupt at record %zu; "
				      "moved aside to %s; every path will be "
				      "compared as on a first run (nothing is "
				      "deleted, differences are kept as "
				      "conflict copies)", j->path, lineno,
				      aside);
				rename(j->path, aside);
				hmap_clear(map, free_entry);
				len = 0;
				break;
			}
			line = end + 1;
		}
		if (len && line < data + len)
			notice_("journal: ignored a torn last record (an "
				"interrupted write)");
	}
	free(data);
	data = NULL;

	/* Start from a compact copy: also drops a torn tail. */
	err = rewrite(j, j->path, map, s_root, d_root, sync);
	if (err) {
		err_("cannot write the journal %s: %s", j->path,
		     strerror(-err));
		goto fail;
	}
	j->fd = open(j->path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (j->fd < 0) {
		err = -errno;
		goto fail;
	}
	j->size = (uint64_t)lseek(j->fd, 0, SEEK_END);
	free(h);
	return 0;

fail:
	free(data);
	free(h);
	free(j->path);
	j->path = NULL;
	return err;
}

void journal_close(struct journal *j)
{
	if (j->fd >= 0) {
		journal_commit(j);
		close(j->fd);
	}
	free(j->path);
	free(j->buf);
	memset(j, 0, sizeof(*j));
	j->fd = -1;
}

int journal_compact(struct journal *j, const struct hmap *map,
		    const char *s_root, const char *d_root)
{
	int err = journal_commit(j);

	if (err)
		return err;
	err = rewrite(j, j->path, map, s_root, d_root, j->sync);
	if (err)
		return err;
	close(j->fd);
	j->fd = open(j->path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (j->fd < 0)
		return -errno;
	j->size = (uint64_t)lseek(j->fd, 0, SEEK_END);
	j->records = 0;
	return 0;
}

int journal_maybe_compact(struct journal *j, const struct hmap *map,
			  const char *s_root, const char *d_root)
{
	if (j->records < 10000 || j->records < 4 * map->len)
		return 0;
	return journal_compact(j, map, s_root, d_root);
}

void journal_set_ids(struct journal *j, const uint64_t ids[4])
{
	memcpy(j->ids, ids, sizeof(j->ids));
	j->has_ids = true;
	put(j, "I %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
	    ids[0], ids[1], ids[2], ids[3]);
}
