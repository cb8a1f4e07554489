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
