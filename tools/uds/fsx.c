// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * File operations confined to a root directory.
 *
 * Every path is relative to a root directory descriptor and is opened one
 * component at a time with O_NOFOLLOW; the final component is used through
 * *at() calls that do not follow links either. So no symlink, however
 * placed, leads a read or a write out of the two folders, and paths longer
 * than PATH_MAX work. Files appear in their final place complete: written
 * unnamed (O_TMPFILE) and linked in, or renamed over the old one.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "uds.h"

#define TEMP_PREFIX	".uds-plus-tmp."
#define TEMP_RANDOM	12
#define CHUNK		(1024 * 1024)
#define BLOCK		4096

void snap_from_stat(struct snap *s, const struct stat *st)
{
	memset(s, 0, sizeof(*s));
	if (S_ISREG(st->st_mode))
		s->type = 'f';
	else if (S_ISDIR(st->st_mode))
		s->type = 'd';
	else if (S_ISLNK(st->st_mode))
		s->type = 'l';
	else
		s->type = 'o';
	s->mode = st->st_mode & 07777;
	s->nlink = (uint32_t)st->st_nlink;
	s->size = (uint64_t)st->st_size;
	s->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 +
		      st->st_mtim.tv_nsec;
	s->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 +
		      st->st_ctim.tv_nsec;
	s->ino = st->st_ino;
}

bool snap_eq(const struct snap *a, const struct snap *b)
{
	if (a->type != b->type)
		return false;
	if (a->type == 0)
		return true;
	if (a->type == 'd')
		return a->mode == b->mode;
	return a->mode == b->mode && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns &&
	       a->ino == b->ino;
}

/* Copy the next component of *P into COMP; advance *P. */
static int next_comp(const char **p, char comp[NAME_MAX + 1])
{
	const char *s = *p, *e = strchr(s, '/');
	size_t n = e ? (size_t)(e - s) : strlen(s);

	if (n == 0 || n > NAME_MAX)
		return n ? -ENAMETOOLONG : -EINVAL;
	memcpy(comp, s, n);
	comp[n] = '\0';
	if (!strcmp(comp, ".") || !strcmp(comp, ".."))
		return -EINVAL;	/* never climb out */
	*p = e ? e + 1 : s + n;
	return 0;
}

static int open_sub(int fd, const char *name)
{
	int nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			 O_CLOEXEC);

	return nfd < 0 ? -errno : nfd;
}

int fsx_open_parent(int rootfd, const char *rel, const char **name,
		    bool mkdirs, int modes_from)
{
	const char *last = strrchr(rel, '/'), *p = rel;
	char comp[NAME_MAX + 1];
	int fd, mfd = -1, err;

	if (!rel[0])
		return -EINVAL;
	*name = last ? last + 1 : rel;
	if (!**name || strlen(*name) > NAME_MAX)
		return **name ? -ENAMETOOLONG : -EINVAL;
	fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0)
		return -errno;
	if (mkdirs && modes_from >= 0)
		mfd = fcntl(modes_from, F_DUPFD_CLOEXEC, 3);
	while (last && p < last) {
		int nfd;

		err = next_comp(&p, comp);
		if (err)
			goto fail;
		nfd = open_sub(fd, comp);
		if (nfd == -ENOENT && mkdirs) {
			mode_t mode = 0755;
			struct stat st;

			if (mfd >= 0 && !fstatat(mfd, comp, &st,
						 AT_SYMLINK_NOFOLLOW) &&
			    S_ISDIR(st.st_mode))
				mode = st.st_mode & 07777;
			if (mkdirat(fd, comp, mode) && errno != EEXIST) {
				err = -errno;
				goto fail;
			}
			nfd = open_sub(fd, comp);
		}
		if (nfd < 0) {
			err = nfd;
			goto fail;
		}
		close(fd);
		fd = nfd;
		if (mfd >= 0) {
			int m = open_sub(mfd, comp);

			close(mfd);
			mfd = m < 0 ? -1 : m;
		}
	}
	if (mfd >= 0)
		close(mfd);
	return fd;

fail:
	close(fd);
	if (mfd >= 0)
		close(mfd);
	return err;
}

int fsx_open_dir(int rootfd, const char *rel)
{
	const char *name;
	int pfd, fd;

	if (!rel[0]) {
		fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	pfd = fsx_open_parent(rootfd, rel, &name, false, -1);
	if (pfd < 0)
		return pfd;
	fd = open_sub(pfd, name);
	close(pfd);
	return fd;
}

int fsx_snap(int rootfd, const char *rel, struct snap *s)
{
	const char *name;
	struct stat st;
	int pfd, err = 0;

	memset(s, 0, sizeof(*s));
	if (!rel[0]) {
		if (fstat(rootfd, &st))
			return -errno;
		snap_from_stat(s, &st);
		return 0;
	}
	pfd = fsx_open_parent(rootfd, rel, &name, false, -1);
	if (pfd == -ENOENT || pfd == -ENOTDIR || pfd == -ELOOP)
		return 0;	/* a parent is gone or is not a directory */
	if (pfd < 0)
		return pfd;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		snap_from_stat(s, &st);
	else if (errno != ENOENT && errno != ENOTDIR)
		err = -errno;
	close(pfd);
	return err;
}

bool fsx_is_temp_name(const char *name)
{
	size_t n = strlen(TEMP_PREFIX);

	if (strncmp(name, TEMP_PREFIX, n) || strlen(name) != n + TEMP_RANDOM)
		return false;
	for (const char *p = name + n; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

static void temp_name(char out[64])
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyz"
				  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	unsigned char rnd[TEMP_RANDOM];
	size_t n = strlen(TEMP_PREFIX);

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		uint64_t x = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32 ^
			     (uint64_t)(uintptr_t)out;

		for (size_t i = 0; i < sizeof(rnd); i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			rnd[i] = (unsigned char)(x >> 56);
		}
	}
	memcpy(out, TEMP_PREFIX, n);
	for (size_t i = 0; i < TEMP_RANDOM; i++)
		out[n + i] = set[rnd[i] % (sizeof(set) - 1)];
	out[n + TEMP_RANDOM] = '\0';
}

int fsx_tmpfile(int dfd, char tmpname[64])
{
	int fd = openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	tmpname[0] = '\0';
	if (fd >= 0)
		return fd;
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return -errno;
	for (int tries = 0; tries < 16; tries++) {
		temp_name(tmpname);
		fd = openat(dfd, tmpname, O_CREAT | O_EXCL | O_RDWR |
			    O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* Link the unnamed file FD into DFD as NAME (fails if NAME exists). */
static int link_unnamed(int dfd, int fd, const char *name)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, dfd, name, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	if (errno != ENOENT)
		return -errno;
	/* No /proc: needs CAP_DAC_READ_SEARCH. */
	if (linkat(fd, "", dfd, name, AT_EMPTY_PATH) == 0)
		return 0;
	return -errno;
}

int fsx_publish(int dfd, int fd, const char *tmpname, const char *name,
		bool replace)
{
	char tmp[64];
	int err;

	if (tmpname[0]) {
		if (replace)
			err = renameat(dfd, tmpname, dfd, name) ? -errno : 0;
		else
			err = renameat2(dfd, tmpname, dfd, name,
					RENAME_NOREPLACE) ? -errno : 0;
		if (err == -EINVAL && !replace) {
			/* No RENAME_NOREPLACE here: link, then unlink. */
			err = linkat(dfd, tmpname, dfd, name, 0) ? -errno : 0;
			if (!err)
				unlinkat(dfd, tmpname, 0);
		}
		return err;
	}
	if (!replace)
		return link_unnamed(dfd, fd, name);
	for (int tries = 0; tries < 16; tries++) {
		temp_name(tmp);
		err = link_unnamed(dfd, fd, tmp);
		if (err != -EEXIST)
			break;
	}
	if (err)
		return err;
	if (renameat(dfd, tmp, dfd, name)) {
		err = -errno;
		unlinkat(dfd, tmp, 0);
	}
	return err;
}

void fsx_discard(int dfd, const char *tmpname)
{
	if (tmpname[0])
		unlinkat(dfd, tmpname, 0);
}

static unsigned char *buf_a, *buf_b;

static int buffers(void)
{
	if (!buf_a)
		buf_a = malloc(CHUNK);
	if (!buf_b)
		buf_b = malloc(CHUNK);
	return buf_a && buf_b ? 0 : -ENOMEM;
}

static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done,
				  (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return 0;
}

int fsx_copy_all(int src, int dst, uint64_t size, struct copy_stats *cs)
{
	loff_t in = 0, out = 0;
	int err;

	(void)size;
	for (;;) {
		ssize_t n = copy_file_range(src, &in, dst, &out, CHUNK * 16, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (in == 0 && (errno == EXDEV || errno == ENOSYS ||
					errno == EINVAL || errno == EOPNOTSUPP))
				break;	/* do it by hand */
			return -errno;
		}
		if (n == 0)
			return 0;
		cs->read += (uint64_t)n;
		cs->written += (uint64_t)n;
	}
	err = buffers();
	if (err)
		return err;
	for (uint64_t off = 0;;) {
		ssize_t n = pread_full(src, buf_a, CHUNK, off);

		if (n < 0)
			return (int)n;
		if (n == 0)
			return 0;
		cs->read += (uint64_t)n;
		err = pwrite_full(dst, buf_a, (size_t)n, off);
		if (err)
			return err;
		cs->written += (uint64_t)n;
		off += (uint64_t)n;
	}
}

/*
 * Write the differing run [RUN, RUN + LEN) of the chunk at OFF, trimmed of
 * equal bytes at both ends (so an append writes only the new bytes). ND is
 * how many bytes of the target chunk exist.
 */
static int write_run(int dst, uint64_t off, size_t run, size_t len, size_t nd,
		     struct copy_stats *cs)
{
	size_t s = run, e = run + len;

	while (s < e && s < nd && buf_a[s] == buf_b[s])
		s++;
	while (e > s && e - 1 < nd && buf_a[e - 1] == buf_b[e - 1])
		e--;
	if (s == e)
		return 0;
	cs->written += e - s;
	return pwrite_full(dst, buf_a + s, e - s, off + s);
}

/* Compare [start, end) of SRC and DST; write the blocks that differ. */
static int delta_range(int src, int dst, uint64_t start, uint64_t end,
		       struct copy_stats *cs)
{
	uint64_t off = start;

	while (off < end) {
		size_t want = end - off < CHUNK ? (size_t)(end - off) : CHUNK;
		ssize_t ns = pread_full(src, buf_a, want, off);
		ssize_t nd;
		size_t i, run = 0, run_len = 0;
		int err;

		if (ns <= 0)
			return (int)ns;	/* 0: the source shrank meanwhile */
		nd = pread_full(dst, buf_b, (size_t)ns, off);
		if (nd < 0)
			return (int)nd;
		cs->read += (uint64_t)ns + (uint64_t)nd;
		for (i = 0; i < (size_t)ns; i += BLOCK) {
			size_t bl = (size_t)ns - i < BLOCK ? (size_t)ns - i :
				    BLOCK;
			bool same = i + bl <= (size_t)nd &&
				    !memcmp(buf_a + i, buf_b + i, bl);

			if (!same) {
				if (!run_len)
					run = i;
				run_len += bl;
				continue;
			}
			if (run_len) {
				err = write_run(dst, off, run, run_len,
						(size_t)nd, cs);
				if (err)
					return err;
				run_len = 0;
			}
		}
		if (run_len) {
			err = write_run(dst, off, run, run_len, (size_t)nd, cs);
			if (err)
				return err;
		}
		off += (uint64_t)ns;
		if ((size_t)ns < want)
			break;
	}
	return 0;
}

/*
 * A 128-bit hash of one block (MurmurHash3 x64-128's mixing, the tail
 * zero-padded, the length folded in). Not cryptographic: it tells uds-plus
 * whether a block of SAVINGBOX still equals what it wrote into SYNCFOLDER,
 * and only uds-plus writes the one and the user the other; a collaborator's
 * write into SYNCFOLDER changes the file's ctime, which throws the sums
 * away before they are used.
 */
static inline uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t fmix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

static void block_hash(const unsigned char *p, size_t len, uint64_t out[2])
{
	const uint64_t c1 = 0x87c37b91114253d5ULL, c2 = 0x4cf5ad432745937fULL;
	uint64_t h1 = 0x9e3779b97f4a7c15ULL, h2 = 0x6a09e667f3bcc909ULL;
	size_t i;

	for (i = 0; i < len; i += 16) {
		uint64_t k[2] = { 0, 0 };

		memcpy(k, p + i, len - i < 16 ? len - i : 16);
		k[0] *= c1;
		k[0] = rotl64(k[0], 31);
		k[0] *= c2;
		h1 ^= k[0];
		h1 = rotl64(h1, 27);
		h1 += h2;
		h1 = h1 * 5 + 0x52dce729;
		k[1] *= c2;
		k[1] = rotl64(k[1], 33);
		k[1] *= c1;
		h2 ^= k[1];
		h2 = rotl64(h2, 31);
		h2 += h1;
		h2 = h2 * 5 + 0x38495ab5;
	}
	h1 ^= len;
	h2 ^= len;
	h1 += h2;
	h2 += h1;
	h1 = fmix64(h1);
	h2 = fmix64(h2);
	h1 += h2;
	h2 += h1;
	out[0] = h1;
	out[1] = h2;
}

/* Write a run of differing blocks; read the target's copy of it first. */
static int sums_run(int dst, uint64_t off, size_t run, size_t len, size_t nd,
		    bool read_dst, struct copy_stats *cs)
{
	if (read_dst && run < nd) {
		size_t e = run + len < nd ? run + len : nd;
		ssize_t n = pread_full(dst, buf_b + run, e - run, off + run);

		if (n < 0)
			return (int)n;
		cs->read += (uint64_t)n;
		if ((size_t)n < e - run)
			nd = run + (size_t)n;
	}
	return write_run(dst, off, run, len, nd, cs);
}

void fsx_sums_free(struct blocksums *bs)
{
	free(bs->h);
	bs->h = NULL;
	bs->n = 0;
}

int fsx_delta_sums(int src, int dst, uint64_t size, struct blocksums *sums,
		   bool valid, struct copy_stats *cs)
{
	uint64_t nblocks = (size + BLOCK - 1) / BLOCK, off = 0, b = 0;
	uint64_t (*h)[2];
	struct stat st;
	int err = buffers();

	if (err)
		return err;
	if (fstat(dst, &st))
		return -errno;
	h = malloc((nblocks ? nblocks : 1) * sizeof(*h));
	if (!h)
		return -ENOMEM;
	while (off < size) {
		size_t want = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
		ssize_t ns = pread_full(src, buf_a, want, off), nd;
		size_t i, run = 0, run_len = 0;

		if (ns < 0) {
			err = (int)ns;
			goto fail;
		}
		if (ns == 0)
			break;	/* the source shrank meanwhile */
		cs->read += (uint64_t)ns;
		/* How much of this chunk the target has. */
		nd = (uint64_t)st.st_size > off ?
		     (ssize_t)((uint64_t)st.st_size - off < (uint64_t)ns ?
			       (uint64_t)st.st_size - off : (uint64_t)ns) : 0;
		if (!valid) {
			nd = pread_full(dst, buf_b, (size_t)ns, off);
			if (nd < 0) {
				err = (int)nd;
				goto fail;
			}
			cs->read += (uint64_t)nd;
		}
		for (i = 0; i < (size_t)ns; i += BLOCK, b++) {
			size_t bl = (size_t)ns - i < BLOCK ? (size_t)ns - i :
				    BLOCK;
			bool same;

			block_hash(buf_a + i, bl, h[b]);
			if (!valid)
				same = i + bl <= (size_t)nd &&
				       !memcmp(buf_a + i, buf_b + i, bl);
			else
				same = b < sums->n &&
				       !memcmp(h[b], sums->h[b], sizeof(h[b]));
			if (!same) {
				if (!run_len)
					run = i;
				run_len += bl;
				continue;
			}
			if (run_len) {
				err = sums_run(dst, off, run, run_len,
					       (size_t)nd, valid, cs);
				if (err)
					goto fail;
				run_len = 0;
			}
		}
		if (run_len) {
			err = sums_run(dst, off, run, run_len, (size_t)nd,
				       valid, cs);
			if (err)
				goto fail;
		}
		off += (uint64_t)ns;
		if ((size_t)ns < want)
			break;
	}
	if (off < size) {	/* shrank: hashes of what is there */
		nblocks = b;
		size = off;
	}
	if ((uint64_t)st.st_size != size && ftruncate(dst, (off_t)size)) {
		err = -errno;
		goto fail;
	}
	fsx_sums_free(sums);
	sums->h = h;
	sums->n = nblocks;
	return 0;
fail:
	free(h);
	fsx_sums_free(sums);
	return err;
}

int fsx_delta(int src, int dst, uint64_t size, const struct track_extents *ext,
	      struct copy_stats *cs)
{
	struct stat st;
	int err = buffers();

	if (err)
		return err;
	if (!ext) {
		err = delta_range(src, dst, 0, size, cs);
	} else {
		for (size_t i = 0; i < track_extents_count(ext) && !err; i++) {
			uint64_t s, e;

			track_extents_get(ext, i, &s, &e);
			e += s;		/* length to end */
			if (s >= size)
				break;
			err = delta_range(src, dst, s, e < size ? e : size, cs);
		}
	}
	if (err)
		return err;
	if (fstat(dst, &st))
		return -errno;
	if ((uint64_t)st.st_size != size && ftruncate(dst, (off_t)size))
		return -errno;
	return 0;
}

int fsx_same_content(int a, int b, struct copy_stats *cs)
{
	struct stat sa, sb;
	uint64_t off = 0;
	int err = buffers();

	if (err)
		return err;
	if (fstat(a, &sa) || fstat(b, &sb))
		return -errno;
	if (sa.st_size != sb.st_size)
		return 0;
	for (;;) {
		ssize_t na = pread_full(a, buf_a, CHUNK, off);
		ssize_t nb = pread_full(b, buf_b, CHUNK, off);

		if (na < 0 || nb < 0)
			return (int)(na < 0 ? na : nb);
		cs->read += (uint64_t)na + (uint64_t)nb;
		if (na != nb || memcmp(buf_a, buf_b, (size_t)na))
			return 0;
		if (na == 0)
			return 1;
		off += (uint64_t)na;
	}
}

static bool exists_at(int dfd, const char *name)
{
	struct stat st;

	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 ||
	       errno != ENOENT;
}

int fsx_conflict_name(int dfd1, int dfd2, const char *name, const char *host,
		      time_t when, char *out, size_t outlen)
{
	const char *dot = strrchr(name, '.');
	char date[16], stem[NAME_MAX + 1], tag[NAME_MAX + 1];
	size_t stem_len, ext_len, tag_len;
	struct tm tm;

	if (!dot || dot == name)
		dot = name + strlen(name);	/* no extension, or a dotfile */
	ext_len = strlen(dot);
	localtime_r(&when, &tm);
	strftime(date, sizeof(date), "%Y-%m-%d", &tm);
	for (int n = 1; n < 1000; n++) {
		if (n == 1)
			snprintf(tag, sizeof(tag), " (%s's conflicted copy %s)",
				 host, date);
		else
			snprintf(tag, sizeof(tag),
				 " (%s's conflicted copy %s) (%d)", host, date,
				 n);
		tag_len = strlen(tag);
		if (ext_len + tag_len >= NAME_MAX)
			return -ENAMETOOLONG;
		stem_len = (size_t)(dot - name);
		if (stem_len + tag_len + ext_len > NAME_MAX) {
			stem_len = NAME_MAX - tag_len - ext_len;
			/* Do not cut a UTF-8 sequence in half. */
			while (stem_len &&
			       ((unsigned char)name[stem_len] & 0xc0) == 0x80)
				stem_len--;
		}
		memcpy(stem, name, stem_len);
		stem[stem_len] = '\0';
		if ((size_t)snprintf(out, outlen, "%s%s%s", stem, tag, dot) >=
		    outlen)
			return -ENAMETOOLONG;
		if (!exists_at(dfd1, out) && !exists_at(dfd2, out))
			return 0;
	}
	return -EEXIST;
}

int fsx_symlink(int dfd, const char *name, const char *target)
{
	char tmp[64];
	int err = -EEXIST;

	for (int tries = 0; tries < 16 && err == -EEXIST; tries++) {
		temp_name(tmp);
		err = symlinkat(target, dfd, tmp) ? -errno : 0;
	}
	if (err)
		return err;
	if (renameat(dfd, tmp, dfd, name)) {
		err = -errno;
		unlinkat(dfd, tmp, 0);
	}
	return err;
}

int fsx_remove(int rootfd, const char *rel, bool isdir)
{
	const char *name;
	int pfd = fsx_open_parent(rootfd, rel, &name, false, -1);
	int err = 0;

	if (pfd < 0)
		return pfd;
	if (unlinkat(pfd, name, isdir ? AT_REMOVEDIR : 0))
		err = -errno;
	close(pfd);
	return err;
}
