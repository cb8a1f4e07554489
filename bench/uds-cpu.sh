#!/bin/bash
# The UDS paper's CPU benchmark through uds-plus, on this host (stock
# kernel: fallback mode; a kernel with IN_REPORT_RANGE adds ranges mode).
# The same script runs in the VM for `make demo` (selftests/uds).
#
#   bench/uds-cpu.sh                   (after `make`)
#   UDS_BENCH_INTERVAL_US=200000 bench/uds-cpu.sh   # the paper's real pace
#   bench/uds-cpu.sh --simulate-ranges # ranges mode on a stock kernel
#
# --simulate-ranges preloads bench/uds-ranges-shim.c, which gives each
# append's range to uds-plus the way the patched kernel would (and pays a
# stat() per event that the kernel does not): a preview of ranges mode
# on a host without the patch, labelled as such. The real numbers come
# from the VM (`make demo`).
#
# After uds-plus's rows comes a naive client on the same writer:
# examples/blocklist.c with -q 0 --no-ranges re-reads and re-hashes
# (SHA-256, 128 KiB blocks) the whole file after every read of its
# queued events, as a client told only "this file changed" must. Its
# pushes column is the whole-file re-hashes it made; where the writer
# outpaces it, events queued during one re-hash are taken together.
#
# Results: docs/benchmarks-uds.md.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$top/build/bin/uds-plus" ] || { echo "run make first" >&2; exit 1; }
cc -O2 -o "$tmp/treecmp" "$top/selftests/uds/treecmp.c"
cc -O2 -o "$tmp/appender" "$top/selftests/uds/appender.c"
preload=
if [ "${1:-}" = --simulate-ranges ]; then
	cc -O2 -Wall -shared -fPIC -o "$tmp/shim.so" \
		"$top/bench/uds-ranges-shim.c" -ldl
	preload=$tmp/shim.so
	echo "# ranges mode SIMULATED on a stock kernel by" \
		"bench/uds-ranges-shim.c (LD_PRELOAD), not the patched kernel"
fi
LD_PRELOAD=$preload PATH=$top/build/bin:$PATH UDS_TREECMP=$tmp/treecmp UDS_APPENDER=$tmp/appender \
	UDS_SKIP_RC=77 bash "$top/selftests/uds/cpu-bench.sh"

# The naive client, the same writer and pace.
bl=$top/build/examples/blocklist
[ -x "$bl" ] || { echo "build/examples/blocklist is missing: run make" >&2; exit 1; }
total=${UDS_BENCH_TOTAL:-10485760}
chunk=${UDS_BENCH_CHUNK:-2048}
interval=${UDS_BENCH_INTERVAL_US:-2000}
mkdir "$tmp/naive"
"$bl" -q 0 --no-ranges -o /dev/null "$tmp/naive" 2>"$tmp/naive.err" &
blpid=$!
until grep -q watching "$tmp/naive.err"; do
	kill -0 $blpid 2>/dev/null || { cat "$tmp/naive.err" >&2; exit 1; }
	sleep 0.05
done
t0=$(date +%s%N)
"$tmp/appender" "$tmp/naive/bench.dat" "$chunk" "$interval" "$total"
t1=$(date +%s%N)
kill -TERM $blpid
wait $blpid
# "blocklist: 1 files; re-hashed B blocks, N bytes read, F files whole;
# X s CPU in the last update, Y s in all"
sed -n 's/.*re-hashed \([0-9]*\) blocks, \([0-9]*\) bytes read, \([0-9]*\) files whole;.* \([0-9.]*\) s in all$/\1 \2 \3 \4/p' \
	"$tmp/naive.err" | {
	read -r _ bytes whole cpu || { cat "$tmp/naive.err" >&2; exit 1; }
	printf '%-9s %-13s %7s %6s %5s %7s %8s %12s %12s %7s %6s\n' \
		naive every-event $(((total + chunk - 1) / chunk)) "$whole" - - - - \
		"$bytes" "$cpu" \
		"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')"
}
