// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The public extent set: union semantics, the collapse that never loses a
 * byte, and ranges to block indexes, checked against a byte-map model.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include <libtrack.h>

static struct track_extents *set(unsigned int max)
{
	struct track_extents *e;

	assert_int_equal(track_extents_new(max, &e), 0);
	return e;
}

static void run(const struct track_extents *e, size_t i, uint64_t start,
		uint64_t len)
{
	uint64_t s, l;

	assert_int_equal(track_extents_get(e, i, &s, &l), 0);
	assert_int_equal(s, start);
	assert_int_equal(l, len);
}

static void touching_and_overlapping_ranges_merge(void **state)
{
	struct track_extents *e = set(0);

	track_extents_add(e, 10, 10);	/* [10,20) */
	track_extents_add(e, 30, 10);	/* [30,40) */
	assert_int_equal(track_extents_count(e), 2);
	track_extents_add(e, 20, 10);	/* touches both: [10,40) */
	assert_int_equal(track_extents_count(e), 1);
	run(e, 0, 10, 30);
	track_extents_add(e, 5, 100);	/* covers all */
	run(e, 0, 5, 100);
	track_extents_add(e, 200, 0);	/* empty: nothing */
	assert_int_equal(track_extents_count(e), 1);
	assert_int_equal(track_extents_get(e, 1, &(uint64_t){0},
					   &(uint64_t){0}), -ERANGE);
	track_extents_clear(e);
	assert_int_equal(track_extents_count(e), 0);
	assert_int_equal(track_extents_bytes(e), 0);
	track_extents_free(e);
}

static void too_many_ranges_collapse_to_a_cover(void **state)
{
	struct track_extents *e = set(0);

	for (uint64_t i = 0; i <= TRACK_EXTENTS_DEFAULT_MAX; i++)
		assert_int_equal(track_extents_add(e, i * 10, 1), 0);
	/* Never fewer bytes than what changed. */
	assert_true(track_extents_count(e) <= TRACK_EXTENTS_DEFAULT_MAX);
	run(e, 0, 0, TRACK_EXTENTS_DEFAULT_MAX * 10 + 1);
	track_extents_free(e);
}

static void whole_file_range_ends_at_u64_max(void **state)
{
	struct track_extents *e = set(0);
	uint64_t s, l;

	track_extents_add(e, UINT64_MAX - 5, 100);
	track_extents_add(e, 4096, TRACK_WHOLE_FILE);
	assert_int_equal(track_extents_count(e), 1);
	assert_int_equal(track_extents_get(e, 0, &s, &l), 0);
	assert_true(s == 4096 && s + l == UINT64_MAX);
	track_extents_free(e);
}

struct blocks {
	unsigned char *seen;
	uint64_t n, calls, last_end;
};

static int mark_blocks(uint64_t first, uint64_t count, void *arg)
{
	struct blocks *b = arg;

	/* Ascending, disjoint, not touching the previous run. */
	assert_true(count > 0);
	assert_true(b->calls == 0 || first > b->last_end);
	for (uint64_t i = first; i < first + count; i++) {
		assert_true(i < b->n);
		assert_int_equal(b->seen[i], 0);
		b->seen[i] = 1;
	}
	b->last_end = first + count;
	b->calls++;
	return 0;
}

/*
 * Random ranges against a byte map: the set covers exactly the union
 * (while it has room), and the blocks reported are exactly those holding a
 * changed byte below the size, each once.
 */
static void random_ranges_give_exactly_the_touched_blocks(void **state)
{
	enum { SPACE = 1 << 16 };
	static unsigned char map[SPACE];
	static unsigned char want[SPACE];
	static unsigned char seen[SPACE];

	srandom(14);
	for (int round = 0; round < 200; round++) {
		struct track_extents *e = set(0), *half = set(0);
		uint64_t bs = 1 + (uint64_t)random() % 5000;
		uint64_t size = (uint64_t)random() % SPACE;
		int nr = 1 + random() % 60;
		struct blocks b = { .seen = seen };
		uint64_t bytes = 0;

		memset(map, 0, sizeof(map));
		for (int i = 0; i < nr; i++) {
			uint64_t s = (uint64_t)random() % SPACE;
			uint64_t l = (uint64_t)random() % 3000;

			if (s + l > SPACE)
				l = SPACE - s;
			memset(map + s, 1, l);
			/* Half the ranges go through merge(). */
			assert_int_equal(track_extents_add(i % 2 ? half : e,
							   s, l), 0);
		}
		assert_int_equal(track_extents_merge(e, half), 0);
		for (uint64_t i = 0; i < SPACE; i++)
			bytes += map[i];
		assert_int_equal(track_extents_bytes(e), bytes);
		for (size_t i = 0; i < track_extents_count(e); i++) {
			uint64_t s, l;

			track_extents_get(e, i, &s, &l);
			for (uint64_t j = s; j < s + l; j++)
				assert_int_equal(map[j], 1);
			assert_true(s == 0 || !map[s - 1]);
			assert_true(s + l == SPACE || !map[s + l]);
		}

		b.n = size / bs + (size % bs != 0);
		memset(seen, 0, sizeof(seen));
		memset(want, 0, sizeof(want));
		for (uint64_t i = 0; i < SPACE; i++)
			if (map[i] && i / bs < b.n)
				want[i / bs] = 1;
		assert_int_equal(track_extents_for_each_block(e, bs, size,
							      mark_blocks, &b),
				 0);
		assert_memory_equal(seen, want, b.n ? b.n : 1);
		track_extents_free(e);
		track_extents_free(half);
	}
}

static int stop_at_second(uint64_t first, uint64_t count, void *arg)
{
	return ++*(int *)arg == 2 ? 42 : 0;
}

static void walkers_stop_when_the_callback_says(void **state)
{
	struct track_extents *e = set(0);
	int calls = 0;

	track_extents_add(e, 0, 1);
	track_extents_add(e, 100, 1);
	track_extents_add(e, 200, 1);
	assert_int_equal(track_extents_for_each(e, stop_at_second, &calls), 42);
	calls = 0;
	assert_int_equal(track_extents_for_each_block(e, 10, UINT64_MAX,
						      stop_at_second, &calls),
			 42);
	assert_int_equal(track_extents_for_each_block(e, 0, 1, stop_at_second,
						      &calls), -EINVAL);
	track_extents_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(touching_and_overlapping_ranges_merge),
		cmocka_unit_test(too_many_ranges_collapse_to_a_cover),
		cmocka_unit_test(whole_file_range_ends_at_u64_max),
		cmocka_unit_test(random_ranges_give_exactly_the_touched_blocks),
		cmocka_unit_test(walkers_stop_when_the_callback_says),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
