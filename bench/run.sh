#!/bin/bash
# make bench: every benchmark, side by side, raw results into bench/results/,
# then docs/benchmarks.md and its plots regenerated from them
# (bench/report.py).
#
#   dsync   host  bench/dsync-host.sh   dsync vs rsync vs block checksums vs
#                                       copy vs the raw floor (CSV + JSON)
#   stream  host  bench/stream_speed.c  the stream's CPU cost on one core
#   uds     host  bench/uds-cpu.sh      the UDS paper's CPU benchmark
#   traffic host  bench/uds-traffic.sh  the UDS paper's workloads' traffic
#                                       under its cost model, uds-plus vs
#                                       a push on every update
#   rehash  host  bench/rehash.sh       block-list re-hash per write, ranges
#                                       vs whole file
#   syncthing host bench/uds-syncthing.sh uds-plus vs Syncthing alone, real
#                                       pace (writes docs/benchmarks-uds.md)
#   vm      VM    boots named bench*    dm-track write path vs dm-linear and
#                                       dm-era, inotify ranges on vs off,
#                                       uds-plus ranges vs fallback,
#                                       block-list re-hash per write with
#                                       real events, ranges vs whole file,
#                                       AIO and io_uring direct writes on
#                                       the patched and on the unpatched
#                                       kernel (bench/async-cost.sh; the
#                                       unpatched kernel is built here,
#                                       scripts/kernel.sh --unpatched)
#   insns   VM    bench/write-path-insns.sh  a write's cost in guest
#                                       instructions, counted by QEMU,
#                                       per function: the series against
#                                       the kernel without it, configured
#                                       as distributions do and as the
#                                       tests do (KASAN, lockdep)
#   report        bench/report.py       docs/benchmarks.md from bench/results
#
# A benchmark added later joins the page by writing a .csv (+ .json), .txt
# or .md into bench/results/ (see bench/report.py for the conventions).
#
# Usage: bench/run.sh [PART...]      (default: all of the above, in order)
# Environment: RESULTS (bench/results), BENCH_DOC (docs/benchmarks.md),
# STREAM_MIB (256).
# The environment of bench/dsync-host.sh (SIZE_MIB, REPS, PARTS, ...)
# passes through. Ratios are what to compare; absolute numbers drift with
# the machine and its load, and in the VM with QEMU's TCG.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
results=${RESULTS:-$top/bench/results}
export RESULTS=$results
mkdir -p "$results"
parts=${*:-dsync stream uds traffic rehash syncthing vm insns report}
status=0

# text NAME TITLE SHOWN COMMAND...: run COMMAND, keep its output as
# NAME.txt under TITLE, with SHOWN as the command to repeat it
text() {
	local name=$1 title=$2 shown=$3
	shift 3
	echo "== $title" >&2
	{
		echo "# $title"
		echo "command: $shown"
		echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) CPUs," \
			"load $(cut -d' ' -f1-3 /proc/loadavg)"
	} >"$results/$name.txt.new"
	if "$@" 2>&1 | tee -a "$results/$name.txt.new"; then
		mv "$results/$name.txt.new" "$results/$name.txt"
	else
		echo "bench: $title failed; $name.txt keeps the last good run" >&2
		rm -f "$results/$name.txt.new"
		status=1
	fi
}

stream_speed() {
	local d
	d=$(mktemp -d)
	cc -O2 -D_GNU_SOURCE -I"$top/libtrack/include" -I"$top/libtrack/src" \
		-o "$d/stream_speed" "$top/bench/stream_speed.c" \
		"$top/build/lib/libtrack.a" -lz -luring || return 1
	taskset -c 0 "$d/stream_speed" "${STREAM_MIB:-256}"
	local rc=$?
	rm -rf "$d"
	return $rc
}

for part in $parts; do
	case $part in
	dsync)
		echo "== dsync against its peers (host files)" >&2
		"$top/bench/dsync-host.sh" || status=1 ;;
	stream)
		text stream-speed "The dsync stream on one core (taskset -c 0)" \
			"bench/run.sh stream (bench/stream_speed.c, STREAM_MIB=${STREAM_MIB:-256})" \
			stream_speed ;;
	uds)
		text uds-cpu "uds-plus: the paper's CPU benchmark, fallback mode (host)" \
			"bench/uds-cpu.sh" "$top/bench/uds-cpu.sh" ;;
	traffic)
		text uds-traffic "uds-plus: the paper's workloads' traffic under its cost model (host)" \
			"bench/uds-traffic.sh" "$top/bench/uds-traffic.sh" ;;
	rehash)
		text rehash "A block-list client: re-hash cost per 4 KiB write, ranges vs whole file (host)" \
			"bench/rehash.sh" "$top/bench/rehash.sh" ;;
	syncthing)
		text uds-syncthing "uds-plus in front of a real Syncthing, against Syncthing alone (host)" \
			"bench/uds-syncthing.sh" "$top/bench/uds-syncthing.sh" ;;
	vm)
		# The boots named benchunpatched* run the kernel without the
		# series; only make bench builds it (ccache makes it cheap).
		"$top/scripts/kernel.sh" --unpatched || status=1
		text vm-bench "In the VM: every bench program's output${LIBTRACK_ONLY:+ (those matching $LIBTRACK_ONLY)}" \
			"${LIBTRACK_ONLY:+LIBTRACK_ONLY='$LIBTRACK_ONLY' }${LIBTRACK_VM_CPUS:+LIBTRACK_VM_CPUS=$LIBTRACK_VM_CPUS }scripts/vm-run.sh --bench" \
			"$top/scripts/vm-run.sh" --bench --out "$top/build/bench-vm"
		text vm-async-cost "The write loop and AIO and io_uring direct writes: the series against the kernel without it (VM, one run)" \
			"bench/run.sh vm (bench/async-cost.sh build/bench-vm)" \
			"$top/bench/async-cost.sh" "$top/build/bench-vm" ;;
	insns)
		text vm-write-path-insns "A write's cost in guest instructions, counted by QEMU: the series against the kernel without it (VM)" \
			"bench/write-path-insns.sh" "$top/bench/write-path-insns.sh" ;;
	report)
		/usr/bin/python3 "$top/bench/report.py" "$results" \
			"${BENCH_DOC:-$top/docs/benchmarks.md}" || status=1 ;;
	*)
		echo "bench: unknown part $part (dsync stream uds traffic rehash syncthing vm insns report)" >&2
		exit 2 ;;
	esac
done
exit $status
