// SPDX-License-Identifier: GPL-2.0-or-later
/* A string-keyed hash map: open addressing, linear probing, tombstones. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uds.h"

#define TOMB ((char *)&tomb_marker)
static char tomb_marker;

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a */

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 1099511628211ULL;
	}
	return h ? h : 1;
}

void hmap_init(struct hmap *m)
{
	memset(m, 0, sizeof(*m));
}

void hmap_clear(struct hmap *m, void (*free_val)(void *))
{
	for (size_t i = 0; i < m->cap; i++) {
		if (m->items[i].key && m->items[i].key != TOMB) {
			free(m->items[i].key);
			if (free_val)
				free_val(m->items[i].val);
		}
	}
	free(m->items);
	hmap_init(m);
}

static struct hmap_item *lookup(const struct hmap *m, const char *key,
				uint64_t h)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct hmap_item *it = &m->items[i];

		if (!it->key)
			return NULL;
		if (it->key != TOMB && it->hash == h && !strcmp(it->key, key))
			return it;
	}
}

void *hmap_get(const struct hmap *m, const char *key)
{
	struct hmap_item *it = lookup(m, key, hash(key));

	return it ? it->val : NULL;
}

static int grow(struct hmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct hmap_item *old = m->items, *n;
	size_t oldcap = m->cap;

	if (m->len * 2 < m->cap)
		cap = m->cap;	/* mostly tombstones: rehash in place */
	n = calloc(cap, sizeof(*n));
	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < oldcap; i++) {
		size_t j;

		if (!old[i].key || old[i].key == TOMB)
			continue;
		for (j = old[i].hash & (cap - 1); n[j].key;
		     j = (j + 1) & (cap - 1))
			;
		n[j] = old[i];
	}
	free(old);
	m->items = n;
	m->cap = cap;
	m->used = m->len;
	return 0;
}

int hmap_put(struct hmap *m, const char *key, void *val, void **old)
{
	uint64_t h = hash(key);
	struct hmap_item *it = lookup(m, key, h);
	size_t i;

	if (old)
		*old = NULL;
	if (it) {
		if (old)
			*old = it->val;
		it->val = val;
		return 0;
	}
	if ((m->used + 1) * 4 >= m->cap * 3) {
		int err = grow(m);

		if (err)
			return err;
	}
	for (i = h & (m->cap - 1);
	     m->items[i].key && m->items[i].key != TOMB;
	     i = (i + 1) & (m->cap - 1))
		;
	if (!m->items[i].key)
		m->used++;
	m->items[i].key = strdup(key);
	if (!m->items[i].key) {
		m->items[i].key = TOMB;
		return -ENOMEM;
	}
	m->items[i].val = val;
	m->items[i].hash = h;
	m->len++;
	return 0;
}

void *hmap_del(struct hmap *m, const char *key)
{
	struct hmap_item *it = lookup(m, key, hash(key));
	void *val;

	if (!it)
		return NULL;
	val = it->val;
	free(it->key);
	it->key = TOMB;
	it->val = NULL;
	m->len--;
	return val;
}

struct hmap_item *hmap_next(const struct hmap *m, size_t *pos)
{
	while (*pos < m->cap) {
		struct hmap_item *it = &m->items[(*pos)++];

		if (it->key && it->key != TOMB)
			return it;
	}
	return NULL;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char **hmap_sorted_keys(const struct hmap *m, size_t *n)
{
	char **keys = malloc((m->len + 1) * sizeof(*keys));
	struct hmap_item *it;
	size_t pos = 0, k = 0;

	if (!keys)
		return NULL;
	while ((it = hmap_next(m, &pos))) {
		keys[k] = strdup(it->key);
		if (!keys[k]) {
			hmap_free_keys(keys, k);
			return NULL;
		}
		k++;
	}
	qsort(keys, k, sizeof(*keys), cmp_str);
	*n = k;
	return keys;
}

void hmap_free_keys(char **keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
}

static bool in_tree(const char *key, const char *path, size_t n)
{
	return !strncmp(key, path, n) && (key[n] == '/' || key[n] == '\0');
}

void hmap_del_tree(struct hmap *m, const char *path, void (*free_val)(void *))
{
	size_t n = strlen(path), pos = 0;
	struct hmap_item *it;

	while ((it = hmap_next(m, &pos))) {
		if (in_tree(it->key, path, n)) {
			void *v = hmap_del(m, it->key);

			if (free_val)
				free_val(v);
		}
	}
}

int hmap_rename_tree(struct hmap *m, const char *from, const char *to,
		     void (*free_val)(void *))
{
	size_t n = strlen(from), nt = strlen(to), pos = 0, count = 0;
	struct hmap_item *it;
	char **keys;
	void **vals;
	int err = 0;

	if (!strcmp(from, to))
		return 0;
	keys = malloc((m->len + 1) * sizeof(*keys));
	vals = malloc((m->len + 1) * sizeof(*vals));
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -ENOMEM;
	}
	while ((it = hmap_next(m, &pos))) {
		size_t rest;

		if (!in_tree(it->key, from, n))
			continue;
		rest = strlen(it->key) - n;
		keys[count] = malloc(nt + rest + 1);
		if (!keys[count]) {
			err = -ENOMEM;
			break;
		}
		memcpy(keys[count], to, nt);
		memcpy(keys[count] + nt, it->key + n, rest + 1);
		vals[count++] = hmap_del(m, it->key);
	}
	for (size_t i = 0; i < count; i++) {
		void *old = NULL;

		if (!err)
			err = hmap_put(m, keys[i], vals[i], &old);
		else if (free_val)
			free_val(vals[i]);
		if (old && free_val)
			free_val(old);
		free(keys[i]);
	}
	free(keys);
	free(vals);
	return err;
}
