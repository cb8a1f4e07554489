#!/bin/sh
# Run one benchmark program of selftests/bench small, so that `make check`
# notices when a change breaks it (boot "smokebench"; the init runs entries
# flagged "smoke" through this script).
#
# Usage: bench/smoke.sh PROGRAM
#
# The program runs with LIBTRACK_BENCH_SMOKE=1 (bench_smoke.h: the smallest
# sizes that still take every code path, table and mode). It fails when
# the program fails, when it skips (exit 4) or says it has nothing to
# measure (the test kernel has everything these programs measure: a skip
# here is a benchmark that stopped working), when a result line of every
# table and mode it has is missing, or when a number is not a number (nan,
# inf). Its numbers mean nothing.
prog=${1:?usage: bench/smoke.sh PROGRAM}
name=$(basename "$prog")

# The result lines each program must print: one extended regex a line.
case $name in
dm_track_overhead)
	want='^target +4K seq/s
^linear +[0-9]
^track +[0-9]
^track\+metadata +[0-9]
^era +[0-9]
^  [0-9]+ us, [0-9.]+ x a write that needs no intent update' ;;
inotify_range_overhead)
	want='^unwatched +[0-9]
^inotify +[0-9]
^inotify\+ranges +[0-9]
^fanotify +[0-9]
^fanotify\+ranges +[0-9]
^ranges on vs off \(inotify\+ranges / inotify\): [0-9]
^ranges on vs off \(fanotify\+ranges / fanotify\): [0-9]
^write-loop patched unwatched [0-9]+$
^write-loop patched inotify\+ranges [0-9]+$
^write-loop patched fanotify\+ranges [0-9]+$' ;;
dm_track_region_size)
	want='^ +64 KiB +[0-9]
^ +256 KiB +[0-9]
^ +1024 KiB +[0-9]
^ +4096 KiB +[0-9]
^ +16384 KiB +[0-9]' ;;
rehash_ranges)
	want='^ +1 MiB +ranges +[0-9]
^ +1 MiB +whole +[0-9]
^ +2 MiB +ranges +[0-9]
^ +2 MiB +whole +[0-9]
^ +4 MiB +ranges +[0-9]
^ +4 MiB +whole +[0-9]
^ +4 MiB: whole / ranges: [0-9]+x bytes read
^ranges, 1 GiB / 16 MiB: [0-9]' ;;
dm_track_memory_scaling)
	want='^track +1 GiB +0 
^track +1 GiB +16 
^track +1 GiB +262144 
^track +65536 GiB +8 
^track +65536 GiB +17179869184 
^era +1 GiB +0 
^era +1 GiB +8 
^era +4 GiB' ;;
dm_track_snapshot_cost)
	want='^idle \(no copy\) +[0-9]
^copy, plain freeze +[0-9]
^copy, snapshot mode +[0-9]
^QD16 copy, plain +[0-9]
^QD16 copy, snapshot +[0-9]
^ +1 +1 +[0-9]+ +[0-9.]+ +[0-9]+ \( *[0-9]+ KiB\) +[0-9.]+$
^ +1 +16 +[0-9]+ +[0-9.]+ +[0-9]+ \( *[0-9]+ KiB\) +[0-9.]+$
^QD16 copy, snapshot +[0-9.]+ +median
^goal: preserved <= frozen blocks written during the copy: met
^goal: write throughput during a copy' ;;
async_write_cost)
	want='^async-cost patched aio idle [0-9]+$
^async-cost patched aio watched [0-9]+$
^async-cost patched aio ranges [0-9]+$
^async-cost patched aio asked [0-9]+$
^async-cost patched io_uring idle [0-9]+$
^async-cost patched io_uring watched [0-9]+$
^async-cost patched io_uring ranges [0-9]+$
^async-cost patched io_uring asked [0-9]+$' ;;
*)
	echo "smoke: no result lines known for $name; add them to bench/smoke.sh" >&2
	exit 1 ;;
esac

out=/tmp/smoke-$name.out
missing=/tmp/smoke-$name.missing
LIBTRACK_BENCH_SMOKE=1 "$prog" >"$out"
rc=$?
cat "$out"
if [ $rc != 0 ]; then
	echo "smoke: $name exited with status $rc (4 is a skip, which this boot does not allow)" >&2
	exit 1
fi
status=0
if grep -Eq 'nothing to measure|measuring without|dm-track only' "$out"; then
	echo "smoke: $name left out part of what it measures (see above)" >&2
	status=1
fi
if grep -Eiq '(^|[^a-z])-?(nan|inf)([^a-z]|$)' "$out"; then
	echo "smoke: $name printed a number that is not one (nan or inf)" >&2
	status=1
fi
echo "$want" | while IFS= read -r re; do
	grep -Eq -- "$re" "$out" ||
		echo "smoke: $name printed no line matching '$re'"
done | tee "$missing" >&2
[ -s "$missing" ] && status=1
rm -f "$out" "$missing"
exit $status
