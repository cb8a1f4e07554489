#!/bin/sh
# make demo: inotify-range on a small real workload, so the ranges can be
# seen arriving: appends to a log, a write in the middle of a file, a
# truncate, a file in a new directory, a rename.
dir=$(mktemp -d /tmp/watch-demo.XXXXXX)
trap 'rm -rf "$dir"' EXIT
echo "# inotify-range $dir, while: appends, a write at 4096, a truncate," \
	"a file in a new directory, a rename"
out=$(mktemp /tmp/watch-demo.out.XXXXXX)
trap 'rm -rf "$dir" "$out"' EXIT
# Start writing once the '# mode' line says every watch is in place.
inotify-range -t 5 "$dir" >"$out" &
pid=$!
i=0
until grep -q '^# mode' "$out" 2>/dev/null || [ $i -ge 300 ]; do
	i=$((i + 1))
	sleep 0.1
done
for i in 1 2 3; do
	echo "log line $i" >>"$dir/app.log"
	sleep 0.1
done
dd if=/dev/zero of="$dir/data.bin" bs=8192 count=1 2>/dev/null
sleep 0.1
printf 'PATCH' | dd of="$dir/data.bin" bs=1 seek=4096 conv=notrunc 2>/dev/null
sleep 0.1
truncate -s 1000 "$dir/data.bin"
mkdir "$dir/new"
sleep 0.1
echo "inside" >"$dir/new/file"
mv "$dir/app.log" "$dir/app.log.1"
wait $pid
cat "$out"
