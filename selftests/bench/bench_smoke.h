/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The benchmark programs' smoke mode, one switch for all of them.
 *
 * LIBTRACK_BENCH_SMOKE=1 in the environment makes a program run with the
 * smallest sizes, write counts and rounds that still take every code path
 * and every table and mode it measures, and print the same result lines:
 * the numbers mean nothing then, but a change to dm-track or the range
 * patches that breaks a benchmark shows up in `make check` (boot
 * "smokebench", selftests/bench/smoke.sh) instead of at the next
 * `make bench`. Without it (or with it empty or 0) the sizes are the full
 * ones, the same as before the switch existed.
 *
 * A size is written BENCH_SIZE(FULL, SMOKE); it reads a variable set once
 * before main(), so a loop bound costs one load and no getenv().
 */
#ifndef LIBTRACK_BENCH_SMOKE_H
#define LIBTRACK_BENCH_SMOKE_H

#include <stdlib.h>
#include <string.h>

static int bench_smoke_on;

__attribute__((constructor)) static void bench_smoke_init(void)
{
	const char *s = getenv("LIBTRACK_BENCH_SMOKE");

	bench_smoke_on = s && *s && strcmp(s, "0");
}

#define BENCH_SIZE(full, smoke)	(bench_smoke_on ? (smoke) : (full))

#endif
