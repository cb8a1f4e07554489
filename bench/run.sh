#!/bin/bash
# make bench: every benchmark, side by side in one run, written to
# docs/benchmarks.md (the command that made each table sits above it).
#
#   host  bench/dsync-host.sh   dsync vs rsync vs block checksums vs copy
#   host  bench/uds-cpu.sh      the UDS paper's CPU benchmark (fallback mode)
#   host  bench/rehash.sh       block-list re-hash per write, ranges vs whole
#   host  bench/uds-syncthing.sh  uds-plus vs Syncthing alone, real pace
#   VM    boots named bench*    dm-track write path vs dm-linear, inotify
#                               ranges on vs off, uds-plus ranges vs fallback
#
# Ratios are what to compare; absolute numbers drift with the machine and,
# in the VM, with QEMU's TCG.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/docs/benchmarks.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

section() {
	local title=$1 cmd=$2
	shift 2
	echo "== $title" >&2
	{
		echo
		echo "## $title"
		echo
		echo "Command: \`$cmd\`"
		echo
		echo '```'
	} >>"$tmp/out.md"
	if ! "$@" 2>&1 | tee -a "$tmp/out.md"; then
		echo "(failed)" | tee -a "$tmp/out.md"
		status=1
	fi
	echo '```' >>"$tmp/out.md"
}

status=0
{
	echo "# Benchmark results"
	echo
	echo "Written by \`make bench\` ($(date -u +%Y-%m-%d)) on $(nproc) CPUs,"
	echo "$(awk '/MemTotal/ { printf "%d GiB", $2 / 1048576 }' /proc/meminfo)," \
	     "$(uname -r) host kernel; VM results from QEMU TCG on the patched"
	echo "kernel. Compare the ratios within a table: every table was measured"
	echo "in one run, its rows side by side."
	echo
	echo "Analyses of these numbers: [dsync](benchmarks-dsync.md),"
	echo "[uds-plus](benchmarks-uds.md)."
} >"$tmp/out.md"

section "dsync against rsync, block checksums and a full copy (host files)" \
	"bench/dsync-host.sh" "$top/bench/dsync-host.sh"
section "uds-plus: the paper's CPU benchmark, fallback mode (host)" \
	"bench/uds-cpu.sh" "$top/bench/uds-cpu.sh"
section "A block-list client: re-hash cost per 4 KiB write, ranges vs whole file (host)" \
	"bench/rehash.sh" "$top/bench/rehash.sh"
section "uds-plus in front of a real Syncthing, against Syncthing alone (host)" \
	"bench/uds-syncthing.sh" "$top/bench/uds-syncthing.sh"
section "In the VM: dm-track write path, inotify ranges, uds-plus ranges mode" \
	"scripts/vm-run.sh --bench" "$top/scripts/vm-run.sh" --bench \
	--out "$top/build/bench-vm"

cp "$tmp/out.md" "$out"
echo "bench: results in ${out#"$top"/}" >&2
exit $status
