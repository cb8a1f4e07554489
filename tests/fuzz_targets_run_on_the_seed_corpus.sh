#!/bin/bash
# The fuzz targets build and run: each on a fresh seed corpus (valid
# streams, inotify records and status lines from fuzz/make-seeds.sh) plus
# a few seconds of mutation, so that they cannot rot between `make fuzz`
# runs. A crash, a sanitizer report, or a target's own check failing
# (fuzz_dmmerge's rollback, the parsers' invariants) fails this test.
# timeout: 300
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools
targets="fuzz_stream_read:stream fuzz_dmmerge:stream fuzz_watch_parse:watch
	fuzz_dm_status:dm-status"
for ts in $targets; do
	t=${ts%%:*}
	[ -x "$BUILD/fuzz/$t" ] || skip_all "build/fuzz/$t is not built (make fuzzers)"
done

"$TOP/fuzz/make-seeds.sh" "$TMP/seeds" || fail "fuzz/make-seeds.sh failed"
for want in stream:6 watch:6 dm-status:4; do
	n=$(ls "$TMP/seeds/${want%%:*}" | wc -l)
	[ "$n" -ge "${want#*:}" ] &&
		ok "make-seeds.sh wrote $n ${want%%:*} seeds" ||
		not_ok "make-seeds.sh wrote $n ${want%%:*} seeds, not ${want#*:}"
done
for ts in $targets; do
	t=${ts%%:*}
	mkdir -p "$TMP/corpus-$t"
	"$BUILD/fuzz/$t" -max_total_time=5 -timeout=10 -rss_limit_mb=2048 \
		-close_fd_mask=2 -artifact_prefix="$TMP/$t-" \
		"$TMP/corpus-$t" "$TMP/seeds/${ts#*:}" >"$TMP/$t.log" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q "Done [0-9]* runs" "$TMP/$t.log"; then
		ok "$t: $(grep -o 'Done [0-9]* runs' "$TMP/$t.log"), no finding"
	else
		not_ok "$t exited $rc"
		tail -n 30 "$TMP/$t.log" | sed 's/^/# /'
	fi
done
done_testing
