#!/bin/bash
# timeout: 300
# The fanotify backend of track_watch_* on the host's stock kernel: it has
# no FAN_REPORT_RANGE, so LIBTRACK_WATCH_BACKEND=fanotify forces fanotify
# without the range record (whole-file modifications). The same cmocka
# suite and uds-plus scripts that prove the inotify backend then prove that
# fanotify's events (handles and names, FAN_RENAME, merged events, marks
# of new directories) come out the same. The VM runs them with ranges.
. "$(dirname "$0")/lib.sh"
t=$BUILD/tests/test_watch
[ -x "$t" ] || skip_all "build/tests/test_watch is not built"
# A fanotify group with file handles (unprivileged since Linux 5.13): the
# watcher falls back to inotify silently when the kernel refuses one.
mkdir "$TMP/probe"
LIBTRACK_WATCH_BACKEND=fanotify inotify-range -q -t 2 "$TMP/probe" &
pid=$!
sleep 0.5
fds=$(ls -l /proc/$pid/fd 2>/dev/null)
wait $pid
case $fds in
*"anon_inode:[fanotify]"*) ;;
*) skip_all "this kernel gives no fanotify group with file handles" ;;
esac

if LIBTRACK_WATCH_BACKEND=fanotify "$t" >"$TMP/out" 2>&1; then
	ok "test_watch passes on the fanotify backend"
else
	sed 's/^/#   /' "$TMP/out"
	not_ok "test_watch passes on the fanotify backend"
fi
for s in inotify-range uds-renames uds-oddnames uds-symlink uds-overflow; do
	if LIBTRACK_WATCH_BACKEND=fanotify bash "$TOP/tests/$s.sh" \
		>"$TMP/out" 2>&1; then
		ok "tests/$s.sh passes on the fanotify backend"
	else
		sed 's/^/#   /' "$TMP/out"
		not_ok "tests/$s.sh passes on the fanotify backend"
	fi
done
done_testing
