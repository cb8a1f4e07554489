#!/bin/bash
# Run each fuzz target for N minutes on its corpus (seeded from
# fuzz/make-seeds.sh), one after the other, niced. Crashes, leaks and hangs
# are written to build/fuzz/artifacts/ and fail the run. The
# per-input timeout is generous (60 s): on a loaded machine a 1 ms input
# once took 24 s.
#
# Usage: fuzz/run.sh [MINUTES]     (make fuzz FUZZ_MINUTES=N)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
minutes=${1:-1}
f=$top/build/fuzz
"$top/fuzz/make-seeds.sh" "$f/seeds" || exit 1
mkdir -p "$f/artifacts"
status=0
for ts in fuzz_stream_read:stream fuzz_dmmerge:stream \
	fuzz_watch_parse:watch fuzz_dm_status:dm-status; do
	t=${ts%%:*}
	mkdir -p "$f/corpus/$t"
	echo "fuzz: $t for $minutes min (corpus build/fuzz/corpus/$t)"
	nice -n 10 "$f/$t" -max_total_time=$((minutes * 60)) -timeout=60 \
		-rss_limit_mb=2048 -max_len=262144 -close_fd_mask=2 \
		-artifact_prefix="$f/artifacts/$t-" -print_final_stats=1 \
		"$f/corpus/$t" "$f/seeds/${ts#*:}" 2>&1 |
		grep -v '^#[0-9]*	\(NEW\|REDUCE\|pulse\)'
	[ "${PIPESTATUS[0]}" = 0 ] || status=1
done
exit $status
