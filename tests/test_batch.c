// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The UDS batching policy against a fake clock: the timer, the counter, the
 * fail-safe, and the paper's pathological stream of tiny appends.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <setjmp.h>
#include <cmocka.h>

#include <libtrack.h>

static uint64_t fake_now;

static uint64_t fake_clock(void *arg)
{
	(void)arg;
	return fake_now;
}

static struct track_batch *policy(uint64_t t, uint64_t c, uint64_t f)
{
	struct track_batch_params p;
	struct track_batch *b;

	track_batch_params_init(&p);
	p.timer_ms = t;
	p.counter_bytes = c;
	p.failsafe_ms = f;
	p.clock = fake_clock;
	fake_now = 1000000;
	assert_int_equal(track_batch_new(&p, &b), 0);
	return b;
}

static void defaults_are_the_papers(void **state)
{
	struct track_batch_params p;

	track_batch_params_init(&p);
	assert_int_equal(p.timer_ms, 5000);
	assert_int_equal(p.counter_bytes, 250000);
	assert_int_equal(p.failsafe_ms, 30000);
	assert_null(p.clock);
}

static void nothing_pending_is_never_due(void **state)
{
	struct track_batch *b = policy(5000, 250000, 30000);

	assert_int_equal(track_batch_due(b), TRACK_BATCH_NONE);
	assert_int_equal(track_batch_wait(b), -ENODATA);
	fake_now += 1000000;
	assert_int_equal(track_batch_due(b), TRACK_BATCH_NONE);
	track_batch_free(b);
}

static void timer_fires_t_after_the_last_update(void **state)
{
	struct track_batch *b = policy(5000, 250000, 30000);

	track_batch_update(b, 10);
	assert_int_equal(track_batch_wait(b), 5000);
	fake_now += 4999;
	assert_int_equal(track_batch_due(b), TRACK_BATCH_NONE);
	assert_int_equal(track_batch_wait(b), 1);
	fake_now += 1;
	assert_int_equal(track_batch_due(b), TRACK_BATCH_TIMER);
	assert_int_equal(track_batch_wait(b), 0);
	track_batch_free(b);
}

static void every_update_resets_the_timer(void **state)
{
	struct track_batch *b = policy(5000, 250000, 30000);

	track_batch_update(b, 1);
	for (int i = 0; i < 4; i++) {
		fake_now += 4000;
		assert_int_equal(track_batch_due(b), TRACK_BATCH_NONE);
		track_batch_update(b, 1);
		assert_int_equal(track_batch_wait(b), 5000);
	}
	fake_now += 5000;
	assert_int_equal(track_batch_due(b), TRACK_BATCH_TIMER);
	track_batch_free(b);
}

static void counter_threshold_pushes_at_once(void **state)
{
	struct track_batch *b = policy(5000, 1000, 30000);

	track_batch_update(b, 600);
	assert_int_equal(track_batch_due(b), TRACK_BATCH_NONE);
	track_batch_update(b, 399);
	assert_int_equal(track_batch_due(b), TRACK_BATCH_NONE);
	track_batch_update(b, 1);
	assert_int_equal(track_batch_due(b), TRACK_BATCH_COUNTER);
	assert_int_equal(track_batch_wait(b), 0);
	track_batch_free(b);
}

static void pushed_starts_a_new_batch(void **state)
{
	struct track_batch *b = policy(5000, 1000, 30000);
	struct track_batch_state st;

	track_batch_update(b, 2000);
	assert_int_equal(track_batch_due(b), TRACK_BATCH_COUNTER);
	track_batch_pushed(b);
	track_batch_pending(b, &st);
	assert_int_equal(st.updates, 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(track_batch_due(b), TRACK_BATCH_NONE);
	fake_now += 100000;
	track_batch_update(b, 5);
	/* The fail-safe counts from this update, not from the old batch. */
	assert_int_equal(track_batch_wait(b), 5000);
	track_batch_pending(b, &st);
	assert_int_equal(st.updates, 1);
	assert_int_equal(st.first_ms, fake_now);
	track_batch_free(b);
}

static void failsafe_fires_under_updates_faster_than_t(void **state)
{
	struct track_batch *b = policy(5000, 250000, 30000);
	uint64_t start = fake_now;

	track_batch_update(b, 1);
	while (track_batch_due(b) == TRACK_BATCH_NONE) {
		fake_now += 1000;
		track_batch_update(b, 1);
	}
	assert_int_equal(track_batch_due(b), TRACK_BATCH_FAILSAFE);
	assert_int_equal(fake_now - start, 30000);
	track_batch_free(b);
}

static void wait_is_the_nearest_deadline(void **state)
{
	struct track_batch *b = policy(5000, 250000, 12000);

	track_batch_update(b, 1);
	fake_now += 4000;
	track_batch_update(b, 1);
	assert_int_equal(track_batch_wait(b), 5000);	/* timer: 9000 */
	fake_now += 4000;
	track_batch_update(b, 1);
	assert_int_equal(track_batch_wait(b), 4000);	/* fail-safe: 12000 */
	track_batch_free(b);
}

/*
 * The paper's pathological case: tiny appends just under t apart, forever.
 * Driven like a real event loop (sleep track_batch_wait(), or until the
 * next append), every pending update is pushed within f of the first one,
 * the timer never fires, and the pushes come every f.
 */
static void tiny_appends_just_under_t_still_push_every_f(void **state)
{
	const uint64_t t = 5000, f = 30000, gap = t - 1;
	struct track_batch *b = policy(t, 250000, f);
	uint64_t next_append = fake_now, last_push = fake_now;
	uint64_t end = fake_now + 3600 * 1000;
	unsigned int pushes = 0, appends = 0;

	while (fake_now < end) {
		int64_t wait = track_batch_wait(b);
		enum track_batch_reason why;

		if (wait >= 0 && fake_now + (uint64_t)wait < next_append)
			fake_now += (uint64_t)wait;
		else
			fake_now = next_append;
		why = track_batch_due(b);
		if (why != TRACK_BATCH_NONE) {
			struct track_batch_state st;

			track_batch_pending(b, &st);
			assert_int_equal(why, TRACK_BATCH_FAILSAFE);
			assert_true(fake_now - st.first_ms <= f);
			assert_true(fake_now - last_push >= f);
			last_push = fake_now;
			pushes++;
			track_batch_pushed(b);
		}
		if (fake_now == next_append) {
			assert_int_equal(track_batch_add_data(b, "x", 1) > 0, 1);
			appends++;
			next_append += gap;
		}
	}
	/* One push per f (give or take the append gap), never zero. */
	assert_true(pushes >= 3600 * 1000 / (f + gap));
	assert_true(pushes <= 3600 * 1000 / f + 1);
	assert_true(appends > pushes * 5);
	track_batch_free(b);
}

static void never_disables_a_trigger(void **state)
{
	struct track_batch *b = policy(TRACK_BATCH_NEVER, TRACK_BATCH_NEVER,
				       TRACK_BATCH_NEVER);

	track_batch_update(b, UINT64_MAX / 2);
	fake_now += UINT64_MAX / 4;
	assert_int_equal(track_batch_due(b), TRACK_BATCH_NONE);
	track_batch_update(b, UINT64_MAX / 2);	/* saturates, no wrap */
	assert_int_equal(track_batch_due(b), TRACK_BATCH_NONE);
	assert_true(track_batch_wait(b) > 0);
	track_batch_free(b);
}

static void zero_timer_pushes_after_every_update(void **state)
{
	struct track_batch *b = policy(0, 250000, 30000);

	assert_int_equal(track_batch_due(b), TRACK_BATCH_NONE);
	track_batch_update(b, 1);
	assert_int_equal(track_batch_due(b), TRACK_BATCH_TIMER);
	track_batch_free(b);
}

static void estimate_tracks_compressibility(void **state)
{
	struct track_batch *b = policy(5000, 10 * 1000 * 1000, 30000);
	size_t len = 200 * 1024;
	unsigned char *zeros = calloc(1, len), *noise = malloc(len);
	int64_t ez, en;

	assert_non_null(zeros);
	assert_non_null(noise);
	srandom(1);
	for (size_t i = 0; i < len; i++)
		noise[i] = (unsigned char)random();
	ez = track_batch_add_data(b, zeros, len);
	en = track_batch_add_data(b, noise, len);
	assert_true(ez > 0 && ez < 2048);
	assert_true(en > (int64_t)len * 99 / 100);
	assert_true(en < (int64_t)len * 102 / 100);
	free(zeros);
	free(noise);
	track_batch_free(b);
}

static void full_counter_skips_the_estimate(void **state)
{
	struct track_batch *b = policy(5000, 1000, 30000);
	struct track_batch_state st;
	size_t len = 1 << 20;
	unsigned char *zeros = calloc(1, len);
	int64_t e;

	assert_non_null(zeros);
	/* Not worth compressing a megabyte to learn what we know: push. */
	e = track_batch_add_data(b, zeros, len);
	assert_true(e >= 1000);
	assert_int_equal(track_batch_due(b), TRACK_BATCH_COUNTER);
	e = track_batch_add_data(b, zeros, 4096);
	assert_int_equal(e, 4096);
	track_batch_pending(b, &st);
	assert_int_equal(st.updates, 2);
	free(zeros);
	track_batch_free(b);
}

static void bad_params_are_refused(void **state)
{
	struct track_batch_params p;
	struct track_batch *b;

	track_batch_params_init(&p);
	p.zlib_level = 10;
	assert_int_equal(track_batch_new(&p, &b), -EINVAL);
	assert_int_equal(track_batch_new(NULL, &b), -EINVAL);
	/* Reserved space is for later versions: not zero, not accepted. */
	track_batch_params_init(&p);
	p.reserved[6] = 1;
	assert_int_equal(track_batch_new(&p, &b), -EINVAL);
	p.reserved[6] = 0;
	p.reserved0 = 1;
	assert_int_equal(track_batch_new(&p, &b), -EINVAL);
}

static void reasons_have_names(void **state)
{
	assert_string_equal(track_batch_reason_name(TRACK_BATCH_TIMER),
			    "timer");
	assert_string_equal(track_batch_reason_name(TRACK_BATCH_COUNTER),
			    "counter");
	assert_string_equal(track_batch_reason_name(TRACK_BATCH_FAILSAFE),
			    "fail-safe");
	assert_string_equal(track_batch_reason_name(TRACK_BATCH_NONE), "none");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_are_the_papers),
		cmocka_unit_test(nothing_pending_is_never_due),
		cmocka_unit_test(timer_fires_t_after_the_last_update),
		cmocka_unit_test(every_update_resets_the_timer),
		cmocka_unit_test(counter_threshold_pushes_at_once),
		cmocka_unit_test(pushed_starts_a_new_batch),
		cmocka_unit_test(failsafe_fires_under_updates_faster_than_t),
		cmocka_unit_test(wait_is_the_nearest_deadline),
		cmocka_unit_test(tiny_appends_just_under_t_still_push_every_f),
		cmocka_unit_test(never_disables_a_trigger),
		cmocka_unit_test(zero_timer_pushes_after_every_update),
		cmocka_unit_test(estimate_tracks_compressibility),
		cmocka_unit_test(full_counter_skips_the_estimate),
		cmocka_unit_test(bad_params_are_refused),
		cmocka_unit_test(reasons_have_names),
	};

	return cmocka_run_group_tests_name("batch", tests, NULL, NULL);
}
