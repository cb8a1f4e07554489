#!/bin/bash
# timeout: 480
# uds-plus in front of a real Syncthing pair on loopback (Debian's
# syncthing; tests/uds-syncthing-lib.sh), fallback mode. The same
# time-compressed append workload (watcher delay 1 s; 1 byte every 0.1 s
# for about 10 s, longer than Syncthing's 6 s hold-back) goes through
# Syncthing alone, through uds-plus with the Syncthing profile, and
# through uds-plus in scan mode; then an edit comes back from the far
# side, and both sides edit one file at once. Asserted: the far side is
# byte-identical, uds-plus echoes nothing, a conflict keeps both
# versions on both sides, and with the Syncthing profile the writer's
# Syncthing makes no more syncs (new versions of the file, from its REST
# events) than Syncthing alone. The profile's policy is checked too: a
# fail-safe of 120 s, over ten times Syncthing's own hold-back (7 s at
# d = 1 s: the paper's workloads' 10x), and, with the watcher left on, a scan asked
# after each push, so a push does not wait Syncthing's watcher delay on
# top of the timer (with a 600 s delay: there at once, and not without
# the hint).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/uds-syncthing-lib.sh"

st_require
[ -x "$BUILD/bin/uds-plus" ] || skip_all "build/bin/uds-plus is not built"
UDS_PID=
cleanup() {
	[ -n "$UDS_PID" ] && kill -9 "$UDS_PID" 2>/dev/null
	st_stop
	rm -rf "$TMP" "$ST_W"
}
trap cleanup EXIT

DELAY=1
N=${UDS_ST_APPENDS:-100}
st_setup $DELAY || { not_ok "set up two Syncthing homes"; done_testing; }
st_start || { not_ok "two Syncthing instances connect on loopback"; done_testing; }
ok "two Syncthing instances connect on loopback"
A=$ST_W/A-folder
B=$ST_W/B-folder
SB=$TMP/savingbox
mkdir -p "$SB"

# N appends of one byte, 0.1 s apart.
appends() {
	local i=0
	while [ $i -lt "$N" ]; do
		printf 'x' >>"$1"
		sleep 0.1
		i=$((i + 1))
	done
}

# Let both Syncthings finish: the file equal on both sides, then quiet.
settle() {
	st_wait_same "$1" "$2" 60 || return 1
	sleep $((DELAY * 3))
}

uds_start() {
	rm -f "$TMP/status"
	uds-plus --client syncthing --syncthing-config "$ST_W/A/config.xml" \
		--state-dir "$TMP/state" --status-file "$TMP/status" \
		--log-level debug --pull-delay 0.3 --hostname writer "$@" \
		"$SB" "$A" 2>>"$TMP/log" &
	UDS_PID=$!
	for _ in $(seq 1 100); do
		[ -f "$TMP/status" ] && return 0
		kill -0 $UDS_PID 2>/dev/null || break
		sleep 0.1
	done
	UDS_PID=
	return 1
}

uds_stop() {
	kill -TERM "$UDS_PID" && wait "$UDS_PID"
	local rc=$?
	UDS_PID=
	return $rc
}

uds_status() {
	kill -USR1 "$UDS_PID"
	sleep 0.3
	sed -n "s/^$1=//p" "$TMP/status"
}

watcher() {
	st_api A GET /rest/config/folders/uds |
		python3 -c 'import sys, json; print(str(json.load(sys.stdin)["fsWatcherEnabled"]).lower())'
}

# 1. Syncthing alone: the writer works in Syncthing's folder.
appends "$A/alone.log"
settle "$A/alone.log" "$B/alone.log" && ok "Syncthing alone: the far side is identical" ||
	not_ok "Syncthing alone: the far side is identical"
n0=$(st_syncs A alone.log)
diag "Syncthing alone: $n0 syncs of $N appends"

# 2. uds-plus in front, the Syncthing profile (watcher on).
uds_start || { not_ok "uds-plus --client syncthing starts"; done_testing; }
grep -q "client syncthing: folder 'uds', watcher delay 1 s" "$TMP/log" &&
	ok "the profile read the folder's watcher delay from config.xml" ||
	not_ok "the profile read the folder's watcher delay from config.xml"
check "the profile's fail-safe is 120 s, over ten times Syncthing's hold-back at d = 1 s" \
	grep -q "at the latest 120 s after the first change" "$TMP/log"
check "with the watcher on, it asks Syncthing to scan what it pushed" \
	grep -q "asking Syncthing to scan the pushed paths (watcher on)" "$TMP/log"
pulls0=$(uds_status pulls)
appends "$SB/watch.log"
settle "$SB/watch.log" "$B/watch.log" && ok "profile: the far side is identical" ||
	not_ok "profile: the far side is identical"
n1=$(st_syncs A watch.log)
check "profile: no more syncs than Syncthing alone ($n1 <= $n0)" [ "$n1" -le "$n0" ]
check "profile: nothing echoed back into the SavingBox" \
	[ "$(uds_status pulls)" = "$pulls0" ]
# A file that never stays quiet for 35 s (appends every 0.1 s): Syncthing
# alone would scan it every 7 s, the paper's fail-safe every 30 s; the
# profile pushes it once, after the last append.
fs0=$(uds_status pushes_failsafe)
p0=$(uds_status pushes)
N=350 appends "$SB/long.log"
settle "$SB/long.log" "$B/long.log" || not_ok "profile: long.log reaches the far side"
check "profile: 35 s of appends, no fail-safe push" \
	[ "$(uds_status pushes_failsafe)" = "$fs0" ]
check "profile: 35 s of appends, one push" [ $(($(uds_status pushes) - p0)) = 1 ]
uds_stop || not_ok "uds-plus exits cleanly"

# 3. Scan mode: uds-plus turns the watcher off and asks for scans.
uds_start --syncthing-scan || { not_ok "uds-plus --syncthing-scan starts"; done_testing; }
check "scan mode: Syncthing's watcher is off" [ "$(watcher)" = false ]
pulls0=$(uds_status pulls)
appends "$SB/scan.log"
settle "$SB/scan.log" "$B/scan.log" && ok "scan mode: the far side is identical" ||
	not_ok "scan mode: the far side is identical"
n2=$(st_syncs A scan.log)
check "scan mode: no more syncs than Syncthing alone ($n2 <= $n0)" [ "$n2" -le "$n0" ]
check "scan mode: one sync per push" \
	[ "$n2" = "$(grep -c "pushed 'scan.log'" "$TMP/log")" ]
check "scan mode: nothing echoed back" [ "$(uds_status pulls)" = "$pulls0" ]

# 4. The reverse edit: the far side changes a file; it arrives in the
# SavingBox and does not bounce back.
pushes0=$(uds_status pushes)
printf 'edited on B\n' >"$B/.edit.tmp" && mv "$B/.edit.tmp" "$B/watch.log"
st_wait_same "$B/watch.log" "$SB/watch.log" 60 &&
	ok "an edit on the far side arrives in the SavingBox" ||
	not_ok "an edit on the far side arrives in the SavingBox"
sleep $((DELAY * 3))
check "and is not pushed back (no echo)" [ "$(uds_status pushes)" = "$pushes0" ]
check "and the far side keeps it" grep -qx 'edited on B' "$B/watch.log"

# 5. Both sides change one file at once: both versions are kept, on
# both sides (uds-plus's conflict copy, or Syncthing's own).
printf 'base\n' >"$SB/notes.txt"
st_wait_same "$SB/notes.txt" "$B/notes.txt" 60 || not_ok "notes.txt reaches B"
sleep $((DELAY * 2))
printf 'theirs\n' >"$B/.n.tmp" && mv "$B/.n.tmp" "$B/notes.txt"
printf 'mine\n' >"$SB/notes.txt"
both() {
	grep -rlx mine "$1" | grep -q notes && grep -rlx theirs "$1" | grep -q notes
}
for _ in $(seq 1 300); do
	both "$SB" && both "$B" && both "$A" && break
	sleep 0.2
done
check "conflict: both versions in the SavingBox" both "$SB"
check "conflict: both versions on the far side" both "$B"
diag "conflict copies: $(cd "$B" && ls | grep -v '\.log$' | tr '\n' ' ')"
uds_stop || not_ok "uds-plus exits cleanly"
check "scan mode: Syncthing's watcher is on again after exit" [ "$(watcher)" = true ]

# Killed before it could turn the watcher on again: the next uds-plus on
# these folders does it at its exit.
uds_start --syncthing-scan || not_ok "uds-plus --syncthing-scan starts again"
kill -9 "$UDS_PID"; wait "$UDS_PID" 2>/dev/null; UDS_PID=
check "after kill -9 the watcher is still off" [ "$(watcher)" = false ]
uds_start --syncthing-scan || not_ok "uds-plus --syncthing-scan starts after kill -9"
uds_stop || not_ok "uds-plus exits cleanly"
check "the next uds-plus turns the watcher on again at exit" [ "$(watcher)" = true ]

# 6. The watcher on, with a long delay (600 s: Syncthing alone would hold
# a change for 300-900 s). The push (after an explicit 1 s timer) is
# followed by a scan request: the far side has it within seconds. With
# --no-syncthing-hint it would wait the watcher's delay: not there after
# 15 s, which shows this check runs where the promise breaks.
st_api A PATCH /rest/config/folders/uds '{"fsWatcherDelayS":600}' >/dev/null ||
	not_ok "set the watcher delay to 600 s"
sleep 1
uds_start --timer 1 --failsafe 5 --no-syncthing-hint ||
	not_ok "uds-plus --no-syncthing-hint starts"
printf 'no hint\n' >"$SB/nohint.txt"
sleep 15
check "without the hint, a push waits Syncthing's 600 s watcher delay" \
	[ ! -e "$B/nohint.txt" ]
uds_stop || not_ok "uds-plus exits cleanly"
uds_start --timer 1 --failsafe 5 || not_ok "uds-plus starts (hint)"
printf 'hinted\n' >"$SB/hint.txt"
st_wait_same "$SB/hint.txt" "$B/hint.txt" 30 &&
	ok "with the hint, the push is on the far side within 30 s (watcher delay 600 s)" ||
	not_ok "with the hint, the push is on the far side within 30 s (watcher delay 600 s)"
check "and the watcher stayed on" [ "$(watcher)" = true ]
uds_stop || not_ok "uds-plus exits cleanly"
if [ "$_failed" != 0 ]; then
	diag "uds-plus log (last 30 lines):"
	tail -n 30 "$TMP/log" | sed 's/^/#   /'
fi
done_testing
