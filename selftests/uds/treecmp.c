// SPDX-License-Identifier: GPL-2.0
/*
 * treecmp: are two directory trees the same? Types, sizes, bytes,
 * permission bits, file mtimes and symlink targets; never follows a link.
 * Prints each difference (names escaped) and exits 1 if there is any.
 *
 *   treecmp [-M] [-q] A B      -M: ignore mtimes; -q: print nothing
 *
 * A helper of the uds-plus tests, independent of uds-plus's own code.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int differences, check_mtime = 1, quiet;

static void esc(const char *s)
{
	for (const unsigned char *p = (const void *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			printf("\\x%02x", *p);
		else
			putchar(*p);
	}
}

static void differ(const char *rel, const char *what)
{
	differences++;
	if (quiet || differences > 50)
		return;
	printf("# differs: ");
	esc(rel[0] ? rel : ".");
	printf(": %s\n", what);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char **names(int fd, size_t *n)
{
	int dfd = dup(fd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	char **v = NULL;

	*n = 0;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		v = realloc(v, (*n + 1) * sizeof(*v));
		v[(*n)++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(v, *n, sizeof(*v), cmp_names);
	return v;
}

static void cmp_files(int a, int b, const char *rel)
{
	static char ba[1 << 16], bb[1 << 16];

	for (;;) {
		ssize_t na = read(a, ba, sizeof(ba)), nb;
		size_t got = 0;

		if (na < 0) {
			differ(rel, "cannot read");
			return;
		}
		while (got < (size_t)na) {
			nb = read(b, bb + got, (size_t)na - got);
			if (nb <= 0)
				break;
			got += (size_t)nb;
		}
		if (got != (size_t)na || memcmp(ba, bb, got)) {
			differ(rel, "contents");
			return;
		}
		if (na == 0)
			return;
	}
}

static void walk(int da, int db, const char *rel)
{
	size_t na, nb, i = 0, j = 0;
	char **a = names(da, &na), **b = names(db, &nb);

	while (i < na || j < nb) {
		int c = i == na ? 1 : j == nb ? -1 : strcmp(a[i], b[j]);
		char *path;

		if (c) {
			const char *name = c < 0 ? a[i++] : b[j++];

			if (asprintf(&path, "%s%s%s", rel, rel[0] ? "/" : "",
				     name) < 0)
				exit(2);
			differ(path, c < 0 ? "only in the first tree" :
			       "only in the second tree");
			free(path);
			continue;
		}
		if (asprintf(&path, "%s%s%s", rel, rel[0] ? "/" : "", a[i]) < 0)
			exit(2);
		struct stat sa, sb;

		if (fstatat(da, a[i], &sa, AT_SYMLINK_NOFOLLOW) ||
		    fstatat(db, b[j], &sb, AT_SYMLINK_NOFOLLOW)) {
			differ(path, "vanished");
		} else if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) {
			differ(path, "type");
		} else if ((sa.st_mode & 07777) != (sb.st_mode & 07777) &&
			   !S_ISLNK(sa.st_mode)) {
			differ(path, "permissions");
		} else if (S_ISDIR(sa.st_mode)) {
			int fa = openat(da, a[i], O_RDONLY | O_DIRECTORY |
					O_NOFOLLOW);
			int fb = openat(db, b[j], O_RDONLY | O_DIRECTORY |
					O_NOFOLLOW);

			if (fa < 0 || fb < 0)
				differ(path, "cannot open");
			else
				walk(fa, fb, path);
			if (fa >= 0)
				close(fa);
			if (fb >= 0)
				close(fb);
		} else if (S_ISLNK(sa.st_mode)) {
			char ta[PATH_MAX], tb[PATH_MAX];
			ssize_t la = readlinkat(da, a[i], ta, sizeof(ta));
			ssize_t lb = readlinkat(db, b[j], tb, sizeof(tb));

			if (la != lb || la < 0 || memcmp(ta, tb, (size_t)la))
				differ(path, "symlink target");
		} else if (S_ISREG(sa.st_mode)) {
			if (sa.st_size != sb.st_size) {
				differ(path, "size");
			} else {
				int fa = openat(da, a[i], O_RDONLY | O_NOFOLLOW);
				int fb = openat(db, b[j], O_RDONLY | O_NOFOLLOW);

				if (fa < 0 || fb < 0)
					differ(path, "cannot open");
				else
					cmp_files(fa, fb, path);
				if (fa >= 0)
					close(fa);
				if (fb >= 0)
					close(fb);
			}
			if (check_mtime &&
			    (sa.st_mtim.tv_sec != sb.st_mtim.tv_sec ||
			     sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec))
				differ(path, "mtime");
		}
		free(path);
		i++;
		j++;
	}
	for (i = 0; i < na; i++)
		free(a[i]);
	for (j = 0; j < nb; j++)
		free(b[j]);
	free(a);
	free(b);
}

int main(int argc, char **argv)
{
	int opt, da, db;

	while ((opt = getopt(argc, argv, "Mq")) != -1) {
		if (opt == 'M')
			check_mtime = 0;
		else if (opt == 'q')
			quiet = 1;
		else
			return 2;
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: treecmp [-M] [-q] A B\n");
		return 2;
	}
	da = open(argv[optind], O_RDONLY | O_DIRECTORY);
	db = open(argv[optind + 1], O_RDONLY | O_DIRECTORY);
	if (da < 0 || db < 0) {
		perror("treecmp");
		return 2;
	}
	walk(da, db, "");
	if (differences && !quiet)
		printf("# %d difference%s\n", differences,
		       differences == 1 ? "" : "s");
	return differences ? 1 : 0;
}
