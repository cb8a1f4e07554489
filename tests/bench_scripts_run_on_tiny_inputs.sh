#!/bin/bash
# Every host benchmark script still runs end to end, on tiny inputs, so
# `make bench` does not rot between real runs: bench/dsync-host.sh (all
# three parts, every method, each result cmp-verified by the script),
# the seeded pattern generator, the block-checksum sync and the floor on
# their own, bench/rehash.sh, bench/run.sh's stream, uds and traffic
# parts, and bench/report.py (tables, goals, plots, other benchmarks'
# result files).
# Times measured here mean nothing; only that the pieces work and agree.
# timeout: 300
. "$(dirname "$0")/lib.sh"

for t in dmextract dmmerge; do
	[ -x "$BUILD/bin/$t" ] || skip_all "build/bin/$t missing: run make"
done
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null ||
	{ echo "python3-matplotlib is missing: run scripts/deps.sh" >&2; exit 1; }

res=$TMP/results
export RESULTS=$res DROP_CACHES=files

# the dsync benchmark, all parts, every method
check "dsync-host.sh runs every method and part (each cmp-verified)" \
	env SIZE_MIB=16 REPS=1 SCALE_MIB="8 16" SCALE_COUNT=300 \
	FRACTIONS="1 10" BIG_MIB=24 "$TOP/bench/dsync-host.sh" "$TMP/scratch"
rows=$(grep -c '^patterns,' "$res/dsync-host-patterns.csv")
[ "$rows" = 27 ] && ok "3 patterns x 9 methods in the CSV" ||
	not_ok "3 patterns x 9 methods in the CSV (got $rows rows)"
check "size and fraction CSVs have rows" \
	grep -q '^size,16,random:1,300,' "$res/dsync-host-size.csv"
check "the fraction CSV has both fractions" \
	grep -q '^fraction,16,random:10,' "$res/dsync-host-fraction.csv"
# dsync and the two floors 3 times (BIG_REPS), blocksync and rsync once
rows=$(grep -c '^big,24,realistic,' "$res/dsync-host-big.csv")
[ "$rows" = 11 ] && ok "the big part runs its 5 methods, the fast ones 3 times" ||
	not_ok "the big part runs its 5 methods, the fast ones 3 times (got $rows rows)"
check "the machine JSON parses" /usr/bin/python3 -m json.tool \
	"$res/dsync-host-patterns.json"

# the faster verification and the skip list
check "VERIFY=known and SKIP" env RESULTS="$TMP/known" PARTS=patterns \
	SIZE_MIB=16 REPS=2 PATTERNS=realistic METHODS="dsync floor blocksync" \
	SLOW_METHODS=blocksync SKIP=realistic/floor VERIFY=known \
	"$TOP/bench/dsync-host.sh" "$TMP/scratch"
got=$(cut -d, -f6,7 "$TMP/known/dsync-host-patterns.csv" | tail -n +2 | sort |
	tr '\n' ' ')
[ "$got" = "blocksync,1 dsync,1 dsync,2 " ] &&
	ok "SKIP and SLOW_METHODS leave the right runs" ||
	not_ok "SKIP and SLOW_METHODS leave the right runs (got: $got)"

# the pieces on their own
bin=$TMP/scratch
"$bin/bdata" list realistic 8192 7 >"$TMP/a" 2>"$TMP/a.n"
"$bin/bdata" list realistic 8192 7 >"$TMP/b" 2>/dev/null
check "the pattern generator is deterministic for a seed" cmp "$TMP/a" "$TMP/b"
read -r dirty runs <"$TMP/a.n"
listed=$(awk -F- '{ n += NF == 2 ? $2 - $1 + 1 : 1 } END { print n }' "$TMP/a")
[ "$dirty" = "$listed" ] && [ "$runs" = "$(wc -l <"$TMP/a")" ] &&
	ok "the generator's counts match its list ($dirty blocks, $runs runs)" ||
	not_ok "the generator's counts match its list ($dirty/$listed, $runs)"
"$bin/bdata" list random:1 8192 7 1000 >"$TMP/c" 2>"$TMP/c.n"
check "COUNT sets the number of dirty blocks" grep -q '^1000 ' "$TMP/c.n"

"$bin/bdata" fill "$TMP/src" 32 0
"$bin/bdata" fill "$TMP/dst" 32 0
"$bin/bdata" apply "$TMP/src" "$TMP/a" 1
cmp -s "$TMP/src" "$TMP/dst" && not_ok "apply changed the source" ||
	ok "apply changed the source"
out=$("$bin/blocksync" "$TMP/src" "$TMP/dst")
check "blocksync makes the replica equal" cmp "$TMP/src" "$TMP/dst"
[ "${out#* }" = "$dirty" ] && ok "blocksync sent exactly the dirty blocks" ||
	not_ok "blocksync sent exactly the dirty blocks ($out, want $dirty)"
"$bin/bdata" apply "$TMP/dst" "$TMP/a" 0
"$bin/bdata" fill "$TMP/ref" 32 0
check "apply GEN 0 restores the old replica" cmp "$TMP/dst" "$TMP/ref"
check "verify accepts the replica it describes" \
	"$bin/bdata" verify "$TMP/dst" "$TMP/a" 0
check "verify accepts the source it describes" \
	"$bin/bdata" verify "$TMP/src" "$TMP/a" 1
printf 'x' | dd of="$TMP/ref" bs=1 seek=$((20 << 20)) conv=notrunc status=none
! "$bin/bdata" verify "$TMP/ref" "$TMP/a" 0 2>/dev/null &&
	ok "verify finds one changed byte" || not_ok "verify finds one changed byte"
out=$("$bin/floor" "$TMP/a" "$TMP/src" "$TMP/dst")
check "floor makes the replica equal" cmp "$TMP/src" "$TMP/dst"
[ "$out" = $((dirty * 4096)) ] && ok "floor copied exactly the dirty blocks" ||
	not_ok "floor copied exactly the dirty blocks ($out)"
"$bin/bdata" apply "$TMP/dst" "$TMP/a" 0
out=$("$bin/floor" -p "$TMP/a" "$TMP/src" "$TMP/dst")
check "floor -p makes the replica equal" cmp "$TMP/src" "$TMP/dst"
[ "$out" = $((dirty * 4096)) ] && ok "floor -p copied exactly the dirty blocks" ||
	not_ok "floor -p copied exactly the dirty blocks ($out)"
"$bin/bdata" apply "$TMP/dst" "$TMP/a" 0
out=$("$bin/floor" -q "$TMP/a" "$TMP/src" "$TMP/dst")
check "floor -q makes the replica equal" cmp "$TMP/src" "$TMP/dst"
[ "$out" = $((dirty * 4096)) ] && ok "floor -q copied exactly the dirty blocks" ||
	not_ok "floor -q copied exactly the dirty blocks ($out)"

# run.sh's host parts, and the report with another benchmark's files
check "run.sh stream and uds parts" env STREAM_MIB=8 UDS_BENCH_TOTAL=65536 \
	"$TOP/bench/run.sh" stream uds
check "the stream part kept its output" grep -qi crc32c "$res/stream-speed.txt"
# the block-list re-hash cost, on 1 and 4 MiB: a 4 KiB write re-hashes
# one 128 KiB block with its range, the whole file without
out=$("$TOP/bench/rehash.sh" 1 1 4)
check "rehash.sh: with ranges, one block a write at any size" \
	test "$(awk '$3 == "ranges" && $4 == 131072 && $6 == "1.0"' <<<"$out" | wc -l)" = 2
check "rehash.sh: without, the whole file" \
	test "$(awk '$3 == "whole" && $4 == $1 * 1048576' <<<"$out" | wc -l)" = 2
check "run.sh traffic part, the paper's four workloads, tiny" \
	env UDS_TRAFFIC_AMOUNT_APPENDS=16 UDS_TRAFFIC_SPEEDUP_APPENDS=100 \
	UDS_TRAFFIC_AMOUNT_DOWNLOAD=20000 UDS_TRAFFIC_SPEEDUP_DOWNLOAD=50 \
	UDS_TRAFFIC_AMOUNT_COLLAB=60 UDS_TRAFFIC_SPEEDUP_COLLAB=100 \
	UDS_TRAFFIC_COLLAB_FILE=16384 UDS_TRAFFIC_AMOUNT_LOG=120 \
	UDS_TRAFFIC_SPEEDUP_LOG=100 "$TOP/bench/run.sh" traffic
rows=$(grep -cE '^\| (appends|download|collab|log) \| (default|tcf|every-update) \|' \
	"$res/uds-traffic.txt")
[ "$rows" = 12 ] && ok "the traffic table has 4 workloads x 3 policies" ||
	not_ok "the traffic table has 4 workloads x 3 policies (got $rows rows)"
# pushing on every update pushes each of the 16 appends (the writer's
# gaps are 10 ms, far above what a push of a 16-byte file takes)
check "every-update pushes at least once per append" awk -F'|' \
	'$2 ~ /appends/ && $3 ~ /every-update/ { split($7, p, " "); ok = p[1] >= 16 }
	 END { exit !ok }' "$res/uds-traffic.txt"
printf 'target,writes/s\nlinear,1000\n' >"$res/zz-other.csv"
echo '{"title": "Another benchmark", "command": "its command"}' \
	>"$res/zz-other.json"
mkdir -p "$TMP/docs"
check "run.sh report part" env BENCH_DOC="$TMP/docs/benchmarks.md" \
	"$TOP/bench/run.sh" report
doc=$TMP/docs/benchmarks.md
for s in "## The goals" "## dsync against its peers" "### realistic" \
	 "## The realistic pattern at 24 MiB" "goal >= 100x)" \
	 "## Scaling with the device size" "## Scaling with the dirty fraction" \
	 "## The dsync stream on one core" "## uds-plus: the paper's CPU" \
	 "## uds-plus: the paper's workloads' traffic" \
	 "## Another benchmark" "| linear | 1000 |"; do
	check "the page has '$s'" grep -qF "$s" "$doc"
done
for p in dsync-patterns dsync-size dsync-fraction uds-traffic; do
	check "plot $p is a PNG" sh -c "head -c 4 '$TMP/docs/img/bench-$p.png' |
		grep -q PNG"
done
check "the traffic table is a table on the page, not in a code block" \
	awk '/^```/ { code = !code } /^\| appends \| default \|/ && !code { t = 1 }
	     END { exit !t }' "$doc"
# the write loop and AIO/io_uring comparison of two boots (results as
# the VM prints them)
vm=$TMP/bench-vm
mkdir -p "$vm"
printf '    async-cost patched aio idle 1000\n    async-cost patched aio ranges 900\n' \
	>"$vm/results-benchcount.log"
printf '    write-loop patched fanotify+ranges 300\n' >>"$vm/results-benchcount.log"
printf '    async-cost unpatched aio idle 2000\n    async-cost unpatched aio watched 1000\n' \
	>"$vm/results-benchunpatched.log"
printf '    write-loop unpatched fanotify 400\n' >>"$vm/results-benchunpatched.log"
out=$("$TOP/bench/async-cost.sh" "$vm")
check "async-cost.sh: the write loop's ranged fanotify against plain" \
	grep -qE '^fanotify\+ranges +400 +300 +0\.750 \(vs unpatched fanotify\)$' <<<"$out"
check "async-cost.sh: patched over unpatched, same case" \
	grep -qE '^aio +idle +2000 +1000 +0\.500$' <<<"$out"
check "async-cost.sh: ranges against the unpatched plain watcher" \
	grep -qE '^aio +ranges +1000 +900 +0\.900 \(vs unpatched watched\)$' <<<"$out"
rm "$vm/results-benchunpatched.log"
"$TOP/bench/async-cost.sh" "$vm" >/dev/null 2>&1
rc=$?
[ $rc = 1 ] && ok "async-cost.sh: a missing boot fails (1)" ||
	not_ok "async-cost.sh: a missing boot fails (1), got $rc"
"$TOP/bench/async-cost.sh" a b >/dev/null 2>&1
rc=$?
[ $rc = 2 ] && ok "async-cost.sh: bad usage exits 2" ||
	not_ok "async-cost.sh: bad usage exits 2, got $rc"
# the instruction counts of bench/write-path-insns.sh: the QEMU plugin and
# the guest's init build, and the table comes out of counts as the plugin
# writes them (10 writes)
ins=$TMP/insns
mkdir -p "$ins"
check "the instruction-count plugin builds" cc -O2 -Wall -Werror -shared \
	-fPIC -fvisibility=hidden -o "$ins/libtbcount.so" "$TOP/bench/insns/tbcount.c"
check "the write loop's init builds" cc -O2 -Wall -Werror -static \
	-o "$ins/init" "$TOP/bench/insns/write_loop.c"
for k in unpatched patched; do
	printf 'ffffffff81000000 T foo\nffffffff81000100 T bar\n' >"$ins/$k.nm"
	printf 'ffffffff81000000 10 10\n' >"$ins/$k-inotify.txt"
done
printf 'ffffffff81000110 2 10\n' >>"$ins/patched-inotify.txt"
printf 'ffffffff81000000 10 20\n' >"$ins/patched-inotify-ranges.txt"
out=$(/usr/bin/python3 "$TOP/bench/insns/profile.py" "$ins" 10 smoke)
check "profile.py: instructions per write" \
	grep -qx 'insns-per-write smoke inotify 10 12' <<<"$out"
check "profile.py: the ranged group against the plain one" \
	grep -qE '^inotify-ranges +10 +20 +\+10 +2\.0000 \(vs unpatched inotify\)$' <<<"$out"
check "profile.py: the difference by function" \
	grep -qE '^  inotify +bar \+2$' <<<"$out"
done_testing
