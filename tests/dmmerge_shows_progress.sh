#!/bin/bash
# dmmerge shows a progress line on a terminal, as dmextract does: of the
# stream file on stdin, or of the device for a full stream from a pipe,
# or open-ended for an incremental stream from a pipe; -P forces it into a
# log, --no-progress and a non-terminal stderr leave it out, and the
# applied target is the same either way.
# timeout: 120
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/dsync_lib.sh"
need_tools
command -v script >/dev/null || skip_all "script (util-linux) is missing"

cd "$TMP" || exit 1
mkimg src 8
dmextract --all --device src --source-id p1 --new-epoch 1 -o full ||
	fail "dmextract --all"
cp src old
scribble src 40 7 >dirty
dmextract --dirty dirty --device src --source-id p1 --base-epoch 1 \
	--new-epoch 2 -o incr || fail "dmextract --dirty"

# on_tty CMD: run the shell command CMD with stdin, stdout and stderr on
# a pseudo-terminal (stdin redirected inside CMD); its output in $TMP/tty
on_tty() {
	script -qefc "$1" /dev/null >"$TMP/tty" 2>&1 </dev/null
}

rm -f t
on_tty "$BUILD/bin/dmmerge t <full"
if cmp -s t old && grep -q 'dmmerge: .* of .*100%' "$TMP/tty"; then
	ok "a stream file on a terminal: progress of the stream's bytes"
else
	not_ok "stream file on a terminal: $(cat -v "$TMP/tty")"
fi
rm -f t
on_tty "cat full | $BUILD/bin/dmmerge t"
if cmp -s t old && grep -q 'dmmerge: 8.0 MiB of 8.0 MiB  100%' "$TMP/tty"; then
	ok "a full stream from a pipe: progress of the device"
else
	not_ok "full stream from a pipe: $(cat -v "$TMP/tty")"
fi
on_tty "cat incr | $BUILD/bin/dmmerge t"
if cmp -s t src && grep -q 'dmmerge: [0-9.]* [KM]*i*B  .*/s' "$TMP/tty" &&
	! grep -q ' of .*%' "$TMP/tty"; then
	ok "an incremental stream from a pipe: bytes applied, no total"
else
	not_ok "incremental stream from a pipe: $(cat -v "$TMP/tty")"
fi
cp old t
on_tty "$BUILD/bin/dmmerge --no-progress t <incr"
if cmp -s t src && ! grep -q 'dmmerge:' "$TMP/tty"; then
	ok "--no-progress: no line on a terminal"
else
	not_ok "--no-progress: $(cat -v "$TMP/tty")"
fi

# Not a terminal: nothing, as before; -P: the final line.
cp old t
run_status dmmerge t <incr
if [ $status = 0 ] && cmp -s t src && [ ! -s "$TMP/err" ]; then
	ok "stderr not a terminal: no progress line"
else
	not_ok "stderr not a terminal: exit $status: $(cat "$TMP/err")"
fi
cp old t
run_status dmmerge -P t <incr
if [ $status = 0 ] && cmp -s t src &&
	grep -q '^dmmerge: .* of .*100%' "$TMP/err"; then
	ok "-P: a progress line into a log"
else
	not_ok "-P: exit $status: $(cat "$TMP/err")"
fi
done_testing
