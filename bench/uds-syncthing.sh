#!/bin/bash
# uds-plus in front of a real Syncthing pair (loopback, Debian's
# syncthing), at the workloads' real pace, against Syncthing alone. Four
# modes run side by side, each on its own pair of Syncthing instances:
#
#   alone     the writer works in Syncthing's folder
#   generic   uds-plus with the paper's policy (t 5 s, c 250 KB, f 30 s)
#   profile   uds-plus --client syncthing (t, f from the watcher delay)
#   scan      uds-plus --client syncthing --syncthing-scan
#
# Per workload and mode: the writer-side Syncthing's syncs (new versions
# of the file in its REST events), the bytes it sent, the delay from the
# last write until the far side is byte-identical, and for the large file
# the CPU time of the writer's Syncthing and uds-plus and the bytes
# uds-plus read per push. The machine is shared: compare within a row.
#
# Usage: bench/uds-syncthing.sh            (about 12 minutes)
#        UDS_ST_ROWS="1 3" bench/uds-syncthing.sh   (some rows only)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
PATH=${UDS_ST_BIN:-$top/build/bin}:$PATH
ROWS=${UDS_ST_ROWS:-1 2 3 4 5}

skip_all() {
	echo "bench/uds-syncthing.sh: skipped: $*" >&2
	exit 77
}
diag() { echo "# $*" >&2; }

ms() {
	local up
	read -r up _ </proc/uptime
	echo $((${up%.*}${up#*.}0))
}

cpu_ticks() {	# utime + stime of PID and its children, in clock ticks
	local p t=0
	for p in $1 $(pgrep -P "$1"); do
		t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo $t
}

worker() {
	local mode=$1 out=$2
	ST_W=$(mktemp -d "${TMPDIR:-/tmp}/uds-st-bench.XXXXXX")
	. "$top/tests/uds-syncthing-lib.sh"
	local SB=$ST_W/savingbox row
	UDS_PID=
	mkdir -p "$SB"
	trap '[ -n "$UDS_PID" ] && kill $UDS_PID 2>/dev/null; st_stop; rm -rf "$ST_W"' EXIT
	st_setup 1 && st_start || { echo "$mode: syncthing did not start" >&2; return 1; }
	local A=$ST_W/A-folder B=$ST_W/B-folder
	local spid
	spid=$(echo $ST_PIDS | cut -d' ' -f1)

	for row in $ROWS; do
		local delay=1 name=row$row.dat dir=$A
		case $row in 3 | 4) delay=10 ;; esac
		for side in A B; do
			st_api $side PATCH /rest/config/folders/uds \
				"{\"fsWatcherDelayS\":$delay}" >/dev/null
		done
		sleep 1
		[ $mode = alone ] || dir=$SB
		if [ $row = 5 ]; then	# the large file exists before we measure
			head -c $((256 << 20)) /dev/zero >"$dir/$name"
		fi
		if [ $mode != alone ]; then
			local opts=
			case $mode in
			profile) opts="--client syncthing --syncthing-config $ST_W/A/config.xml" ;;
			scan) opts="--client syncthing --syncthing-config $ST_W/A/config.xml --syncthing-scan" ;;
			esac
			rm -f "$ST_W/status"
			# shellcheck disable=SC2086
			uds-plus $opts --state-dir "$ST_W/state" \
				--status-file "$ST_W/status" --log-level info \
				"$SB" "$A" 2>>"$ST_W/uds.log" &
			UDS_PID=$!
			while [ ! -f "$ST_W/status" ]; do sleep 0.1; done
		fi
		if [ $row = 5 ]; then
			st_wait_same "$dir/$name" "$B/$name" 600 >/dev/null
			sleep $((delay * 3))
		fi
		local syncs0 sent0 cpu0 ucpu0=0 read0=0 push0=0 i t_last t_same
		syncs0=$(st_syncs A $name)
		sent0=$(st_sent A)
		cpu0=$(cpu_ticks $spid)
		if [ -n "$UDS_PID" ]; then
			kill -USR1 $UDS_PID; sleep 0.3
			ucpu0=$(sed -n 's/^cpu_seconds=//p' "$ST_W/status")
			read0=$(sed -n 's/^bytes_read=//p' "$ST_W/status")
			push0=$(sed -n 's/^pushes=//p' "$ST_W/status")
		fi
		# Each loop waits before a write, not after: the last thing it
		# does is the last write, which the delay is measured from.
		case $row in
		0) for i in $(seq 1 10); do [ $i = 1 ] || sleep 0.1
			printf x >>"$dir/$name"; done ;;
		1) for i in $(seq 1 100); do r=$((RANDOM % 1001 + 500))
			[ $i = 1 ] || sleep "$((r / 1000)).$(printf %03d $((r % 1000)))"
			printf x >>"$dir/$name"; done ;;
		2) for i in $(seq 1 1000); do [ $i = 1 ] || sleep 0.1
			head -c 1024 /dev/urandom >>"$dir/$name"; done ;;
		3) for i in $(seq 1 100); do [ $i = 1 ] || sleep 1
			printf x >>"$dir/$name"; done ;;
		4) for i in $(seq 1 300); do [ $i = 1 ] || sleep 0.2
			printf x >>"$dir/$name"; done ;;
		5) for i in $(seq 1 20); do [ $i = 1 ] || sleep 1
			dd if=/dev/urandom of="$dir/$name" bs=4096 count=1 conv=notrunc \
				seek=$((RANDOM * 2)) status=none; done ;;
		esac
		t_last=$(ms)
		st_wait_same "$dir/$name" "$B/$name" 300 >/dev/null
		t_same=$(ms)
		# Let the last syncs be counted: Syncthing's longest hold-back.
		sleep $((delay * 3))
		local syncs sent cpu ucpu=0 rd=0 pu=0
		syncs=$(( $(st_syncs A $name) - syncs0 ))
		sent=$(( $(st_sent A) - sent0 ))
		cpu=$(awk -v a="$cpu0" -v b="$(cpu_ticks $spid)" -v hz="$(getconf CLK_TCK)" \
			'BEGIN { printf "%.2f", (b - a) / hz }')
		if [ -n "$UDS_PID" ]; then
			kill -USR1 $UDS_PID; sleep 0.3
			ucpu=$(awk -v a="$ucpu0" -v b="$(sed -n 's/^cpu_seconds=//p' "$ST_W/status")" \
				'BEGIN { printf "%.2f", b - a }')
			rd=$(( $(sed -n 's/^bytes_read=//p' "$ST_W/status") - read0 ))
			pu=$(( $(sed -n 's/^pushes=//p' "$ST_W/status") - push0 ))
			kill -TERM $UDS_PID; wait $UDS_PID 2>/dev/null
			UDS_PID=
		fi
		echo "$row $mode $delay $syncs $sent $(( (t_same - t_last) )) $cpu $ucpu $rd $pu" >>"$out"
		rm -f "$A/$name" "$SB/$name"
		sleep $((delay + 2))
	done
}

if [ "${1:-}" = --worker ]; then
	worker "$2" "$3"
	exit $?
fi

command -v syncthing >/dev/null ||
	skip_all "syncthing is not installed (scripts/deps.sh installs it)"
[ -x "$top/build/bin/uds-plus" ] || skip_all "build/bin/uds-plus is not built"
res=$(mktemp -d)
trap 'rm -rf "$res"' EXIT
# The binary as it is now: a rebuild meanwhile does not mix versions.
mkdir "$res/bin"
cp "$top/build/bin/uds-plus" "$res/bin/"
export UDS_ST_BIN=$res/bin
pids=
for mode in alone generic profile scan; do
	nice -n 5 "$0" --worker $mode "$res/rows" &
	pids="$pids $!"
done
for p in $pids; do wait $p; done

echo "# uds-plus in front of Syncthing $(syncthing --version | cut -d' ' -f2), fallback mode, $(nproc) CPUs (shared)"
echo "# row: workload; d: Syncthing's watcher delay; syncs: new versions the"
echo "# writer's Syncthing made; sent: its bytes to the far side; delay: last"
echo "# write until the far side was identical; cpu: writer-side Syncthing,"
echo "# uds-plus; read/push: bytes uds-plus read per push"
printf '%-4s %-8s %3s %6s %10s %9s %8s %8s %12s\n' row mode d syncs sent delay_ms st_cpu uds_cpu read/push
sort -k1,1n -k2,2 "$res/rows" | while read -r row mode d syncs sent dl cpu ucpu rd pu; do
	rpp=-
	[ "$pu" -gt 0 ] 2>/dev/null && rpp=$((rd / pu))
	printf '%-4s %-8s %3s %6s %10s %9s %8s %8s %12s\n' "$row" "$mode" "$d" \
		"$syncs" "$sent" "$dl" "$cpu" "$ucpu" "$rpp"
done
echo "# rows: 1 = 1 B every 0.5-1.5 s, 100 times; 2 = a 1 MB download at"
echo "# 80 kbit/s (1 KiB every 0.1 s); 3 = 1 B every 1 s, 100 times; 4 = 1 B"
echo "# every 0.2 s, 300 times; 5 = 20 random 4 KiB writes, 1 s apart, into"
echo "# a 256 MiB file"
