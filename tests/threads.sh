#!/bin/bash
# libtrack(7) THREADS, checked: tests/threads.c built with the library's
# sources under ThreadSanitizer; a data race on any shared state (the
# CRC32C tables, anything global) makes it fail. Then the extraction
# engine, which runs a thread of its own, the same way.
# timeout: 300
. "$(dirname "$0")/lib.sh"

echo 'int main(void) { return 0; }' >"$TMP/probe.c"
cc -fsanitize=thread -o "$TMP/probe" "$TMP/probe.c" 2>/dev/null && "$TMP/probe" ||
	skip_all "no ThreadSanitizer here (libtsan)"
srcs=$(ls "$TOP"/libtrack/src/*.c | grep -v '/dm[^/]*\.c$')
# shellcheck disable=SC2086
if ! cc -std=gnu11 -O1 -g -fsanitize=thread -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
	-I"$TOP/libtrack/include" -o "$TMP/threads" "$TOP/tests/threads.c" \
	$srcs -lz -luring -lpthread 2>"$TMP/cc.err"; then
	cat "$TMP/cc.err"
	not_ok "build tests/threads.c with ThreadSanitizer"
	done_testing
fi
if TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$TMP/threads" >"$TMP/out" 2>"$TMP/err"; then
	ok "four threads with their own handles: no data race"
else
	head -40 "$TMP/err"
	not_ok "four threads with their own handles (see the report above)"
fi

# The extraction's own thread: the reader and writer sides of its window
# ring, its progress and error state (tests/test_dsync.c).
# shellcheck disable=SC2086
if ! cc -std=gnu11 -O1 -g -fsanitize=thread -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
	-I"$TOP/libtrack/include" -o "$TMP/dsync" "$TOP/tests/test_dsync.c" \
	$srcs -lz -luring -lpthread -lcmocka 2>"$TMP/cc.err"; then
	cat "$TMP/cc.err"
	not_ok "build tests/test_dsync.c with ThreadSanitizer"
elif TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$TMP/dsync" >"$TMP/out" 2>"$TMP/err"; then
	ok "the extraction engine's two threads: no data race"
else
	head -40 "$TMP/err"
	not_ok "the extraction engine's two threads (see the report above)"
fi
done_testing
