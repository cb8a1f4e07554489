#!/bin/bash
# uds-plus in front of a real Syncthing pair (loopback, Debian's
# syncthing), at the workloads' real pace, against Syncthing alone. Five
# modes run side by side (row 5, bound by CPU, one after another), each on
# its own pair of Syncthing instances:
#
#   alone     the writer works in Syncthing's folder
#   generic   uds-plus with the paper's policy (t 5 s, c 250 KB, f 30 s)
#   profile   uds-plus --client syncthing (t, f from the watcher delay,
#             pushes at Syncthing's own ticks, a lone change after d plus
#             the hash time; watcher on, a scan of the pushed paths asked
#             after a push)
#   nohint    the profile with --no-syncthing-hint (the watcher alone
#             picks the push up, after its delay)
#   scan      uds-plus --client syncthing --syncthing-scan
#
# Per workload and mode: the writer-side Syncthing's syncs (new versions
# of the file in its REST events), the bytes it sent, the delay from the
# last write until the far side is byte-identical, and for the large file
# the CPU time of the writer's Syncthing and uds-plus and the bytes
# uds-plus read per push, and uds-plus's pushes by what fired them. The
# machine is shared: compare within a row.
#
# Usage: bench/uds-syncthing.sh            (about 25 minutes)
#        UDS_ST_ROWS="1 3" bench/uds-syncthing.sh   (some rows only)
#        UDS_ST_MODES="alone profile" bench/uds-syncthing.sh
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
PATH=${UDS_ST_BIN:-$top/build/bin}:$PATH
ROWS=${UDS_ST_ROWS:-1 2 3 4 5 6}
MODES=${UDS_ST_MODES:-alone generic profile nohint scan}
DL_KB=${UDS_ST_DOWNLOAD_KB:-5000}	# row 2: the paper's 5 MB
EDITS=${UDS_ST_EDITS:-60}		# row 6: edits (the paper: an hour)

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

# uds-plus's pushes so far by what fired them: timer (less the lone
# and tick ones), counter, fail-safe, lone, Syncthing's tick.
reasons() {
	local t c f l k
	t=$(sed -n 's/^pushes_timer=//p' "$ST_W/status")
	c=$(sed -n 's/^pushes_counter=//p' "$ST_W/status")
	f=$(sed -n 's/^pushes_failsafe=//p' "$ST_W/status")
	l=$(sed -n 's/^pushes_lone=//p' "$ST_W/status")
	k=$(sed -n 's/^pushes_tick=//p' "$ST_W/status")
	echo "$((t - l - ${k:-0})) $c $f $l ${k:-0}"
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
		if [ $row = 6 ]; then	# the paper's 1 MB of random ASCII
			python3 -c 'import random, string, sys
r = random.Random(6)
sys.stdout.write("".join(r.choice(string.ascii_letters) for _ in range(1 << 20)))' >"$dir/$name"
		fi
		if [ $mode != alone ]; then
			local opts=
			case $mode in
			profile) opts="--client syncthing --syncthing-config $ST_W/A/config.xml" ;;
			nohint) opts="--client syncthing --syncthing-config $ST_W/A/config.xml --no-syncthing-hint" ;;
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
		if [ $row = 5 ] || [ $row = 6 ]; then
			st_wait_same "$dir/$name" "$B/$name" 600 >/dev/null
			sleep $((delay * 3))
		fi
		local syncs0 sent0 cpu0 ucpu0=0 read0=0 push0=0 i t_last t_same
		local why0="0 0 0 0 0" why="-" last="-"
		syncs0=$(st_syncs A $name)
		sent0=$(st_sent A)
		cpu0=$(cpu_ticks $spid)
		if [ -n "$UDS_PID" ]; then
			kill -USR1 $UDS_PID; sleep 0.3
			ucpu0=$(sed -n 's/^cpu_seconds=//p' "$ST_W/status")
			read0=$(sed -n 's/^bytes_read=//p' "$ST_W/status")
			push0=$(sed -n 's/^pushes=//p' "$ST_W/status")
			why0=$(reasons)
		fi
		# Each loop waits before a write, not after: the last thing it
		# does is the last write, which the delay is measured from.
		# Seeded, so that every mode gets the same gaps (row 1) and
		# offsets (row 5), and its bytes compare with the others'.
		RANDOM=$((row + 15))
		case $row in
		0) for i in $(seq 1 10); do [ $i = 1 ] || sleep 0.1
			printf x >>"$dir/$name"; done ;;
		1) for i in $(seq 1 100); do r=$((RANDOM % 1001 + 500))
			[ $i = 1 ] || sleep "$((r / 1000)).$(printf %03d $((r % 1000)))"
			printf x >>"$dir/$name"; done ;;
		2) for i in $(seq 1 "$DL_KB"); do [ $i = 1 ] || sleep 0.1
			head -c 1024 /dev/urandom >>"$dir/$name"; done ;;
		3) for i in $(seq 1 100); do [ $i = 1 ] || sleep 1
			printf x >>"$dir/$name"; done ;;
		4) for i in $(seq 1 300); do [ $i = 1 ] || sleep 0.2
			printf x >>"$dir/$name"; done ;;
		5) for i in $(seq 1 20); do [ $i = 1 ] || sleep 1
			dd if=/dev/urandom of="$dir/$name" bs=4096 count=1 conv=notrunc \
				seek=$((RANDOM * 2)) status=none; done ;;
		6) python3 - "$dir/$name" "$EDITS" <<'EOF'
# The paper's collaborative edit (section 4.2; one of its two users,
# whose edits are the ones the writer's side pushes): every 0-10 s,
# 1-10 random letters, written over a random place or appended (even
# odds), in place as an editor that saves in place would. Seeded: the
# same gaps and edits in every mode.
import os, random, string, sys, time
path, n = sys.argv[1], int(sys.argv[2])
random.seed(15)
for i in range(n):
    if i:
        time.sleep(random.uniform(0, 10))
    data = "".join(random.choice(string.ascii_letters)
                   for _ in range(random.randint(1, 10))).encode()
    fd = os.open(path, os.O_WRONLY)
    size = os.fstat(fd).st_size
    x = size if random.random() < 0.5 else random.randrange(size)
    os.pwrite(fd, data, x)
    os.close(fd)
EOF
			;;
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
			# shellcheck disable=SC2046,SC2086
			why=$(echo $(reasons) $why0 | awk '{ printf "%d/%d/%d/%d/%d", $1 - $6, $2 - $7, $3 - $8, $4 - $9, $5 - $10 }')
			# The last push: ms from the last change to its start,
			# the start planned, the cost expected, what it took.
			last=$(sed -n 's/^last_push_\(quiet\|plan\|cost\|took\)_ms=//p' \
				"$ST_W/status" | paste -sd/)
			kill -TERM $UDS_PID; wait $UDS_PID 2>/dev/null
			UDS_PID=
		fi
		echo "$row $mode $delay $syncs $sent $(( (t_same - t_last) )) $cpu $ucpu $rd $pu $why ${last:--}" >>"$out"
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
# The rows that keep pace run side by side; row 5 (a 256 MiB file that
# every Syncthing hashes and uds-plus reads) is bound by CPU, not by pace,
# so its modes run one after another: side by side on 2 CPUs, each mode's
# delay measured the other modes' hashing (up to 24 s against 2.5 s).
pids=
for mode in $MODES; do
	UDS_ST_ROWS=$(echo " $ROWS " | sed 's/ 5 / /') \
		nice -n 5 "$0" --worker $mode "$res/rows" &
	pids="$pids $!"
done
for p in $pids; do wait $p; done
if [[ " $ROWS " == *" 5 "* ]]; then
	for mode in $MODES; do
		UDS_ST_ROWS=5 nice -n 5 "$0" --worker $mode "$res/rows"
	done
fi

echo "# uds-plus in front of Syncthing $(syncthing --version | cut -d' ' -f2), fallback mode, $(nproc) CPUs (shared)"
echo "# row: workload; d: Syncthing's watcher delay; syncs: new versions the"
echo "# writer's Syncthing made; sent: its bytes to the far side; delay: last"
echo "# write until the far side was identical; cpu: writer-side Syncthing,"
echo "# uds-plus; read/push: bytes uds-plus read per push; t/c/f/l/k: its"
echo "# pushes by the timer, counter, fail-safe, lone-change rule, and at"
echo "# the tick at which Syncthing alone would have scanned; last q/p/c/r:"
echo "# the last push's start after the last change, the start planned"
echo "# (t less its expected cost), that cost, and what it took, in ms"
printf '%-4s %-8s %3s %6s %10s %9s %8s %8s %12s %-11s %s\n' row mode d syncs sent delay_ms st_cpu uds_cpu read/push t/c/f/l/k "last q/p/c/r"
sort -k1,1n -k2,2 "$res/rows" | while read -r row mode d syncs sent dl cpu ucpu rd pu why last; do
	rpp=-
	[ "$pu" -gt 0 ] 2>/dev/null && rpp=$((rd / pu))
	printf '%-4s %-8s %3s %6s %10s %9s %8s %8s %12s %-11s %s\n' "$row" "$mode" "$d" \
		"$syncs" "$sent" "$dl" "$cpu" "$ucpu" "$rpp" "$why" "$last"
done
echo "# rows: 1 = 1 B every 0.5-1.5 s, 100 times; 2 = a $DL_KB KiB download at"
echo "# 80 kbit/s (1 KiB every 0.1 s, appended as wget does); 3 = 1 B every"
echo "# 1 s, 100 times; 4 = 1 B every 0.2 s, 300 times; 5 = 20 random 4 KiB"
echo "# writes, 1 s apart, into a 256 MiB file; 6 = the paper's collaborative"
echo "# edit, $EDITS edits of 1-10 B, 0-10 s apart, into a 1 MB file"
