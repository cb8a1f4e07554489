#!/bin/sh
# inotify-range: one line per event, with the range of each write when the
# kernel reports it ('whole' when not), renames joined, new directories
# followed; --mode, --count, --timeout and the exit statuses.
. "$(dirname "$0")/lib.sh"
command -v inotify-range >/dev/null || skip_all "inotify-range is not built"
mode=$(inotify-range --mode)
if [ $UDS_WANT_RANGES = 1 ] && [ "$mode" = plain ]; then
	skip_all "this kernel reports no write ranges (FAN_REPORT_RANGE, IN_REPORT_RANGE)"
fi
diag "mode: $mode"
case $mode in
fanotify | ranges | plain) ok "--mode says fanotify, ranges or plain" ;;
*) not_ok "--mode says fanotify, ranges or plain (it said '$mode')" ;;
esac

dir=$S
inotify-range -t 10 "$dir" >"$W/out" 2>"$W/err" &
pid=$!
# The '# mode' line comes once every watch is in place: a fixed sleep lost
# the first events when the VM was slow to start the watcher.
i=0
until grep -q '^# mode' "$W/out" 2>/dev/null || [ $i -ge 300 ]; do
	i=$((i + 1))
	sleep 0.1
done
printf hello >"$dir/f"
sleep 0.2
printf world >>"$dir/f"
mkdir "$dir/d"
sleep 0.2
mv "$dir/f" "$dir/d/g"
printf x >"$dir/d/new"
rm "$dir/d/g"
wait $pid
check "exits 0 at the timeout" [ $? = 0 ]
sed 's/^/#   /' "$W/out"
has() {
	grep -qxF "$1" "$W/out"
}
check "create" has "CREATE - $dir/f"
if [ "$mode" != plain ]; then
	# Read apart they are two events; queued together the kernel merges
	# touching ranges into one.
	if has "MODIFY 0+10 $dir/f"; then
		ok "the two writes, merged: 0+10"
	else
		check "the first write: 0+5" has "MODIFY 0+5 $dir/f"
		check "the append: 5+5" has "MODIFY 5+5 $dir/f"
	fi
	check "a write in a new directory" has "MODIFY 0+1 $dir/d/new"
else
	check "writes are whole-file" has "MODIFY whole $dir/f"
	check "a write in a new directory" has "MODIFY whole $dir/d/new"
fi
check "a directory" has "CREATE,ISDIR - $dir/d"
check "a rename, both paths" has "RENAME - $dir/f -> $dir/d/g"
check "a delete" has "DELETE - $dir/d/g"

inotify-range -q -c 2 -t 30 "$dir" >"$W/out2" &
pid=$!
# Events until it has seen two and exited, however long it took to start.
i=0
while kill -0 $pid 2>/dev/null && [ $i -lt 100 ]; do
	i=$((i + 1))
	mkdir "$dir/c$i"
	sleep 0.2
done
wait $pid
check "--count stops after N events" [ "$(wc -l <"$W/out2")" = 2 ]

inotify-range "$W/does-not-exist" 2>"$W/err"
check "a missing path exits 1" [ $? = 1 ]
check "and says which" grep -q "does-not-exist" "$W/err"
inotify-range --bogus >/dev/null 2>&1
check "a bad option exits 2" [ $? = 2 ]
inotify-range >/dev/null 2>&1
check "no path exits 2" [ $? = 2 ]
done_testing
