# shellcheck shell=sh
# Helpers of the uds-plus tests (sourced). The same test scripts run on the
# host, in fallback mode (tests/uds-*.sh call them), and in the test VM on
# the patched kernel, in ranges mode (selftests/uds/tests.list passes
# --ranges). POSIX sh plus $RANDOM: bash and busybox ash both have it.
#
# A script sets up a SAVINGBOX ($S) and a SYNCFOLDER ($D), starts uds-plus
# with small t/c/f so it runs in seconds, runs a workload, and checks:
# after quiescing the two trees are the same byte for byte (treecmp, a
# helper independent of uds-plus), and the number of pushes stays within
# what t, c and f allow. Timing is never asserted exactly: only bounds.
#
# Output is TAP; exit 0 passes, 1 fails, $UDS_SKIP_RC skips (4 in the VM,
# 77 on the host).

UDS_DIR=$(cd "$(dirname "$0")" && pwd)
UDS_SKIP_RC=${UDS_SKIP_RC:-4}
UDS_TREECMP=${UDS_TREECMP:-$UDS_DIR/treecmp}
UDS_BIN=${UDS_BIN:-uds-plus}
UDS_WANT_RANGES=0
for _a in "$@"; do
	[ "$_a" = --ranges ] && UDS_WANT_RANGES=1
done

# Batching for the tests: the paper's 5 s / 250 KB / 30 s, scaled down.
UDS_T=${UDS_T:-0.3}
UDS_C=${UDS_C:-64K}
UDS_F=${UDS_F:-1.5}
UDS_PULL=${UDS_PULL:-0.2}

W=$(mktemp -d "${TMPDIR:-/tmp}/uds-test.XXXXXX")
S=$W/savingbox
D=$W/syncfolder
mkdir -p "$S" "$D" "$W/state"
UDS_PID=
UDS_STARTS=0

_uds_cleanup() {
	if [ -n "$UDS_PID" ]; then
		kill -9 "$UDS_PID" 2>/dev/null
		wait "$UDS_PID" 2>/dev/null
	fi
	if [ "${UDS_KEEP:-0}" = 1 ]; then
		echo "# kept $W" >&2
	else
		chmod -R u+rwx "$W" 2>/dev/null
		rm -rf "$W"
	fi
}
trap _uds_cleanup EXIT
trap 'exit 1' INT TERM

# --- TAP ---------------------------------------------------------------

_n=0
_failed=0

ok() {
	_n=$((_n + 1))
	echo "ok $_n - $*"
}

not_ok() {
	_n=$((_n + 1))
	_failed=$((_failed + 1))
	echo "not ok $_n - $*"
}

diag() {
	echo "# $*"
}

check() {
	_name=$1
	shift
	if "$@"; then ok "$_name"; else not_ok "$_name"; fi
}

skip_all() {
	echo "1..0 # SKIP $*"
	exit "$UDS_SKIP_RC"
}

# Show the daemon's log when something failed.
done_testing() {
	echo "1..$_n"
	if [ $_failed != 0 ]; then
		diag "uds-plus log (last 40 lines):"
		grep -v ' stats: ' "$W/log" 2>/dev/null | tail -n 40 |
			sed 's/^/#   /'
		exit 1
	fi
	exit 0
}

# --- environment ---------------------------------------------------------

uds_require() {
	command -v "$UDS_BIN" >/dev/null || skip_all "$UDS_BIN is not built"
	[ -x "$UDS_TREECMP" ] || skip_all "treecmp is not built"
	if [ $UDS_WANT_RANGES = 1 ]; then
		# fanotify's ranges, or inotify's (LIBTRACK_WATCH_BACKEND=inotify)
		_m=$(inotify-range --mode 2>/dev/null)
		[ "$_m" = ranges ] || [ "$_m" = fanotify ] ||
			skip_all "this kernel reports no write ranges (FAN_REPORT_RANGE, IN_REPORT_RANGE)"
	fi
}

# Milliseconds since boot (10 ms resolution; enough for bounds). No
# external command: /proc/uptime is "SECONDS.CC".
# Milliseconds since boot into $_ms, without a subshell (under TCG a fork
# per update of a workload shows); now_ms prints them.
clock_ms() {
	read -r _up _rest </proc/uptime
	_ms=${_up%.*}${_up#*.}0
}

now_ms() {
	clock_ms
	echo "$_ms"
}

UDS_T_MS=$(awk -v t="$UDS_T" 'BEGIN { printf "%d", t * 1000 }')
UDS_GAPS=0
UDS_MAXGAP=0
UDS_LAST=0

# Call before each update of a workload: it counts the pauses long enough
# for the timer to fire (with 100 ms of margin for scheduling), which the
# push bound then allows for; however slow the machine, the bound holds.
tick_update() {
	clock_ms
	_now=$_ms
	if [ "$UDS_LAST" != 0 ]; then
		_g=$((_now - UDS_LAST))
		[ $_g -gt "$UDS_MAXGAP" ] && UDS_MAXGAP=$_g
		[ $_g -ge $((UDS_T_MS - 100)) ] && UDS_GAPS=$((UDS_GAPS + 1))
	fi
	UDS_LAST=$_now
}

# Random integer in [0, N).
rnd() {
	echo $(((RANDOM * 32768 + RANDOM) % $1))
}

# Sleep a random time in [0, MS) milliseconds.
rnd_sleep() {
	_ms=$(rnd "$1")
	sleep "$(awk -v m="$_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
}

# Write LEN random bytes at OFFSET into FILE (in place).
write_at() {
	dd if=/dev/urandom of="$1" bs=1 count="$3" seek="$2" conv=notrunc \
		2>/dev/null
}

file_size() {
	wc -c <"$1" | tr -d ' '
}

# --- the daemon ------------------------------------------------------------

# Start uds-plus on $S and $D with the test settings and any extra options.
uds_start() {
	rm -f "$W/status"
	"$UDS_BIN" --state-dir "$W/state" --status-file "$W/status" \
		--log-level debug -t "$UDS_T" -c "$UDS_C" -f "$UDS_F" \
		--pull-delay "$UDS_PULL" --hostname testbox "$@" "$S" "$D" \
		2>>"$W/log" &
	UDS_PID=$!
	UDS_STARTS=$((UDS_STARTS + 1))
	_i=0
	# The status file appears once the start-up comparison is done.
	while [ ! -f "$W/status" ] && [ $_i -lt 600 ]; do
		if ! kill -0 "$UDS_PID" 2>/dev/null; then
			diag "uds-plus exited at start"
			UDS_PID=
			return 1
		fi
		sleep 0.05
		_i=$((_i + 1))
	done
	[ -f "$W/status" ]
}

# Stop it the normal way (SIGTERM pushes what is pending, then exits).
uds_stop() {
	[ -n "$UDS_PID" ] || return 0
	kill -TERM "$UDS_PID"
	wait "$UDS_PID"
	_rc=$?
	UDS_PID=
	return $_rc
}

# Kill it without a chance to clean up.
uds_kill9() {
	kill -9 "$UDS_PID"
	wait "$UDS_PID" 2>/dev/null
	UDS_PID=
}

# Ask for a fresh status file (SIGUSR1) and wait for it.
uds_refresh() {
	[ -n "$UDS_PID" ] || return 0
	rm -f "$W/status"
	kill -USR1 "$UDS_PID" 2>/dev/null || return 1
	_i=0
	while [ ! -f "$W/status" ] && [ $_i -lt 100 ]; do
		sleep 0.02
		_i=$((_i + 1))
	done
}

# The value of KEY in the status file.
uds_status() {
	sed -n "s/^$1=//p" "$W/status" 2>/dev/null
}

# Wait until nothing is pending and the trees are equal (up to $1 s, 60 by
# default: it returns as soon as they are).
uds_wait_synced() {
	_deadline=$(($(now_ms) + ${1:-60} * 1000))
	while [ "$(now_ms)" -lt $_deadline ]; do
		uds_refresh
		if [ "$(uds_status pending_files)" = 0 ] &&
			[ "$(uds_status pending_remote)" = 0 ] &&
			"$UDS_TREECMP" -q "$S" "$D"; then
			return 0
		fi
		sleep 0.2
	done
	"$UDS_TREECMP" "$S" "$D"
	diag "pending_files=$(uds_status pending_files)" \
		"pending_remote=$(uds_status pending_remote)"
	return 1
}

# The trees are equal right now.
trees_equal() {
	"$UDS_TREECMP" "$S" "$D"
}

# ok/not_ok for a number within [LO, HI].
check_between() {
	_name=$1 _v=$2 _lo=$3 _hi=$4
	if [ "$_v" -ge "$_lo" ] 2>/dev/null && [ "$_v" -le "$_hi" ]; then
		ok "$_name ($_v in [$_lo, $_hi])"
	else
		not_ok "$_name ($_v not in [$_lo, $_hi])"
	fi
}

# Upper bound on pushes for a workload of DURATION ms with TIMER_GAPS
# pauses long enough for the timer and COUNTER pushes by the counter: one
# fail-safe push per f, one per pause, the counter's, the final one, and
# slack for the start.
push_bound() {
	awk -v d="$1" -v gaps="$2" -v c="$3" -v f="$UDS_F" \
		'BEGIN { printf "%d\n", d / (f * 1000) + gaps + c + 3 }'
}

# The mode uds-plus reports, and a check that it is the one wanted.
check_mode() {
	_mode=$(uds_status mode)
	diag "uds-plus mode: $_mode"
	if [ $UDS_WANT_RANGES = 1 ]; then
		check "uds-plus uses the kernel's write ranges" [ "$_mode" = ranges ]
	fi
}
