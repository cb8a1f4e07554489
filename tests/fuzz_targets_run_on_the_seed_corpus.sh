#!/bin/bash
# The fuzz targets build and run: each on a fresh seed corpus (valid
# streams from fuzz/make-seeds.sh) plus a few seconds of mutation, so that
# they cannot rot between `make fuzz` runs. A crash, a sanitizer report,
# or fuzz_dmmerge's rollback check failing fails this test.
# timeout: 300
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools
for t in fuzz_stream_read fuzz_dmmerge; do
	[ -x "$BUILD/fuzz/$t" ] || skip_all "build/fuzz/$t is not built (make fuzzers)"
done

"$TOP/fuzz/make-seeds.sh" "$TMP/seeds" || fail "fuzz/make-seeds.sh failed"
n=$(ls "$TMP/seeds" | wc -l)
[ "$n" -ge 6 ] && ok "make-seeds.sh wrote $n seed streams" ||
	not_ok "make-seeds.sh wrote $n seed streams"
for t in fuzz_stream_read fuzz_dmmerge; do
	mkdir -p "$TMP/corpus-$t"
	"$BUILD/fuzz/$t" -max_total_time=5 -timeout=10 -rss_limit_mb=2048 \
		-close_fd_mask=2 -artifact_prefix="$TMP/$t-" \
		"$TMP/corpus-$t" "$TMP/seeds" >"$TMP/$t.log" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q "Done [0-9]* runs" "$TMP/$t.log"; then
		ok "$t: $(grep -o 'Done [0-9]* runs' "$TMP/$t.log"), no finding"
	else
		not_ok "$t exited $rc"
		tail -n 30 "$TMP/$t.log" | sed 's/^/# /'
	fi
done
done_testing
