#!/bin/bash
# What the series costs on the write path, side by side from one
# `make bench` run: selftests/bench/inotify_range_overhead (a write(2)
# loop) and selftests/bench/async_write_cost (AIO and io_uring direct
# writes) ran in boot "benchcount" (the patched kernel) and in boot
# "benchunpatched" (the same configuration without the series), both on
# the instruction clock (scripts/vm-run.sh), so a ratio is one of guest
# instructions, free of the host's load. This
# prints writes/s per case on each kernel and the patched kernel's speed
# as a fraction of the unpatched one's (1.000: no cost; below 1: slower).
# A case the unpatched kernel cannot have (a group that asked for ranges)
# is compared with its plain counterpart there.
#
# Usage: bench/async-cost.sh [VM_OUT_DIR]   (default build/bench-vm)
# Exit status: 0, 1 if a boot's results are missing, 2 for bad usage.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -le 1 ] || { echo "usage: bench/async-cost.sh [VM_OUT_DIR]" >&2; exit 2; }
dir=${1:-$top/build/bench-vm}

for b in benchcount benchunpatched; do
	for tag in write-loop async-cost; do
		if ! grep -qs "^ *$tag " "$dir/results-$b.log"; then
			echo "async-cost: no $tag lines in $dir/results-$b.log;" \
				"run bench/run.sh vm (it builds the unpatched kernel)" >&2
			exit 1
		fi
	done
done

# side_by_side TAG CASE=BASE...: the TAG lines of both boots, a row per
# case (per interface, where the lines name one): the unpatched kernel's
# BASE against the patched kernel's CASE
side_by_side() {
	local tag=$1

	shift
	grep -h "^ *$tag " "$dir/results-benchcount.log" \
		"$dir/results-benchunpatched.log" | awk -v pairs="$*" '
	{
		if (NF == 5) { i = $3; c = $4; x = $5 } else { i = ""; c = $3; x = $4 }
		v[$2 " " i " " c] = x
		if (!(i in seen)) { seen[i] = 1; ifs[n++] = i }
	}
	END {
		m = split(pairs, pr, " ")
		for (j = 1; j <= m; j++) {
			split(pr[j], kb, "=")
			cases[j] = kb[1]; base[kb[1]] = kb[2]
		}
		if (ifs[0] == "")
			printf "%-16s %12s %12s %9s\n", "case", "unpatched/s",
			       "patched/s", "ratio"
		else
			printf "%-9s %-8s %12s %12s %9s\n", "interface", "case",
			       "unpatched/s", "patched/s", "ratio"
		for (i = 0; i < n; i++)
			for (j = 1; j <= m; j++) {
				k = cases[j]
				p = v["patched " ifs[i] " " k]
				u = v["unpatched " ifs[i] " " base[k]]
				if (p == "" || u == "")
					continue
				note = base[k] != k ? " (vs unpatched " base[k] ")" : ""
				if (ifs[i] == "")
					printf "%-16s %12d %12d %9.3f%s\n", k, u, p,
					       p / u, note
				else
					printf "%-9s %-8s %12d %12d %9.3f%s\n", ifs[i],
					       k, u, p, p / u, note
			}
	}'
}

echo "write(2) loop, 4 KiB to a file on tmpfs; inotify watches its directory, fanotify the file"
side_by_side write-loop unwatched=unwatched inotify=inotify \
	inotify+ranges=inotify fanotify=fanotify fanotify+ranges=fanotify \
	inotify/unread=inotify/unread fanotify/unread=fanotify/unread
echo
echo "O_DIRECT 4 KiB writes, one in flight, to a file nobody watches, on ext4"
echo "(idle: nothing on the file system watched; watched/ranges: another"
echo "directory watched, plain or with ranges; asked: the file's directory"
echo "watched with ranges)"
side_by_side async-cost idle=idle watched=watched ranges=watched \
	asked=watched
