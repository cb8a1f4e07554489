#!/bin/bash
# The AIO and io_uring direct-write cost of the series, side by side from
# one `make bench` run: selftests/bench/async_write_cost ran in boot
# "bench" (the patched kernel) and in boot "benchunpatched" (the same
# configuration without the series); this prints writes/s per case and the
# patched kernel's speed as a fraction of the unpatched one's (1.000: no
# cost). Cases without a counterpart on the unpatched kernel (a watcher
# with ranges) are compared with its plain watcher in the same place.
#
# Usage: bench/async-cost.sh [VM_OUT_DIR]   (default build/bench-vm)
# Exit status: 0, 1 if a boot's results are missing, 2 for bad usage.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -le 1 ] || { echo "usage: bench/async-cost.sh [VM_OUT_DIR]" >&2; exit 2; }
dir=${1:-$top/build/bench-vm}

for b in bench benchunpatched; do
	if ! grep -qs '^ *async-cost ' "$dir/results-$b.log"; then
		echo "async-cost: no async-cost lines in $dir/results-$b.log;" \
			"run bench/run.sh vm (it builds the unpatched kernel)" >&2
		exit 1
	fi
done

grep -h '^ *async-cost ' "$dir/results-bench.log" \
	"$dir/results-benchunpatched.log" | awk '
	{ v[$2 " " $3 " " $4] = $5; if (!($3 in seen)) { seen[$3] = 1; ifs[n++] = $3 } }
	END {
		split("idle watched ranges asked", cases, " ")
		base["idle"] = "idle"; base["watched"] = "watched"
		base["ranges"] = "watched"; base["asked"] = "watched"
		printf "%-9s %-8s %12s %12s %9s\n", "interface", "case",
		       "unpatched/s", "patched/s", "ratio"
		for (i = 0; i < n; i++)
			for (c = 1; c <= 4; c++) {
				k = cases[c]
				p = v["patched " ifs[i] " " k]
				u = v["unpatched " ifs[i] " " base[k]]
				if (p == "" || u == "")
					continue
				printf "%-9s %-8s %12d %12d %9.3f%s\n", ifs[i], k,
				       u, p, p / u,
				       base[k] != k ? " (vs unpatched " base[k] ")" : ""
			}
	}'
