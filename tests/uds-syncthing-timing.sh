#!/bin/bash
# timeout: 300
# When the Syncthing profile pushes, in front of a real Syncthing pair on
# loopback (tests/uds-syncthing-lib.sh), fallback mode, against Syncthing
# alone on the same writes:
#  - watcher delay d = 2 s: two changes 1.5 s apart after a quiet period
#    are one push (Syncthing alone holds a change made within d/2 of its
#    first tick, d after the first change); the old lone rule pushed the
#    first after d/2 alone. A lone change is pushed after d, and is on
#    the far side no later than with Syncthing alone plus the paper's
#    t (5 s);
#  - d = 10 s: a burst of 9 changes 1 s apart is pushed at the tick at
#    which Syncthing alone would have scanned it (20 s after its first
#    change), not t = 1.5 d = 15 s after its last; on the far side no
#    later than with Syncthing alone plus 5 s;
#  - 300 files in one push are handed to Syncthing as 300 paths, not as a
#    scan of the whole folder.
# In every case no more syncs than Syncthing alone.
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

st_setup 2 || { not_ok "set up two Syncthing homes"; done_testing; }
st_start || { not_ok "two Syncthing instances connect on loopback"; done_testing; }
ok "two Syncthing instances connect on loopback"
A=$ST_W/A-folder
B=$ST_W/B-folder
SB=$TMP/savingbox
mkdir -p "$SB"

ms() {
	local up
	read -r up _ </proc/uptime
	echo $((${up%.*}${up#*.}0))
}

uds_start() {
	rm -f "$TMP/status"
	uds-plus --client syncthing --syncthing-config "$ST_W/A/config.xml" \
		--state-dir "$TMP/state" --status-file "$TMP/status" \
		--log-level debug --pull-delay 0.3 "$@" "$SB" "$A" \
		2>>"$TMP/log" &
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
	rm -f "$TMP/status"
	kill -USR1 "$UDS_PID"
	for _ in $(seq 1 50); do
		[ -f "$TMP/status" ] && break
		sleep 0.05
	done
	sed -n "s/^$1=//p" "$TMP/status"
}

# Milliseconds from now until FILE_B is the same as FILE_A.
arrival() {
	local t0
	t0=$(ms)
	st_wait_same "$1" "$2" 60 >/dev/null || { echo 99999; return; }
	echo $(($(ms) - t0))
}

# 1. d = 2 s. Syncthing alone: a change, another 1.5 s later; a lone one.
printf x >"$A/pair-alone.txt"
sleep 1.5
printf y >>"$A/pair-alone.txt"
st_wait_same "$A/pair-alone.txt" "$B/pair-alone.txt" 60 || not_ok "pair-alone.txt reaches B"
sleep 6
n_alone=$(st_syncs A pair-alone.txt)
printf z >"$A/lone-alone.txt"
lat_alone=$(arrival "$A/lone-alone.txt" "$B/lone-alone.txt")
diag "Syncthing alone, d = 2 s: $n_alone syncs of the pair; a lone change on the far side after $lat_alone ms"

uds_start || { not_ok "uds-plus --client syncthing starts"; done_testing; }
check "the profile's lone delay is the watcher delay (2 s)" \
	grep -q "a lone change after 2 s" "$TMP/log"
sleep 11				# 2 t of quiet: t = 5 s
p0=$(uds_status pushes)
l0=$(uds_status pushes_lone)
printf x >"$SB/pair.txt"
sleep 1.5
printf y >>"$SB/pair.txt"
st_wait_same "$SB/pair.txt" "$B/pair.txt" 60 || not_ok "pair.txt reaches B"
sleep 6
check "d = 2 s: two changes 1.5 s apart are one push" \
	[ $(($(uds_status pushes) - p0)) = 1 ]
check "and not a lone one" [ "$(uds_status pushes_lone)" = "$l0" ]
n=$(st_syncs A pair.txt)
check "no more syncs than Syncthing alone ($n <= $n_alone)" [ "$n" -le "$n_alone" ]
sleep 11
l0=$(uds_status pushes_lone)
printf z >"$SB/lone.txt"
lat=$(arrival "$SB/lone.txt" "$B/lone.txt")
check "a lone change is pushed lone" [ "$(uds_status pushes_lone)" = $((l0 + 1)) ]
check "not before d (${lat} ms >= 1900)" [ "$lat" -ge 1900 ]
check "and on the far side no later than with Syncthing alone + 5 s ($lat <= $lat_alone + 5000)" \
	[ "$lat" -le $((lat_alone + 5000)) ]
uds_stop || not_ok "uds-plus exits cleanly"

# 2. d = 10 s: 9 changes 1 s apart.
for side in A B; do
	st_api $side PATCH /rest/config/folders/uds '{"fsWatcherDelayS":10}' >/dev/null ||
		not_ok "set the watcher delay of $side to 10 s"
done
for _ in $(seq 1 50); do
	grep -q 'fsWatcherDelayS="10"' "$ST_W/A/config.xml" && break
	sleep 0.1
done
sleep 1
burst() {
	local i
	for i in 1 2 3 4 5 6 7 8 9; do
		[ $i = 1 ] || sleep 1
		printf '%s\n' $i >>"$1"
	done
}
burst "$A/burst-alone.txt"
lat_alone=$(arrival "$A/burst-alone.txt" "$B/burst-alone.txt")
sleep 15
n_alone=$(st_syncs A burst-alone.txt)
diag "Syncthing alone, d = 10 s: $n_alone syncs of the burst, on the far side $lat_alone ms after its last change"

uds_start || { not_ok "uds-plus --client syncthing starts (d = 10 s)"; done_testing; }
t0=$(uds_status pushes_tick)
burst "$SB/burst.txt"
lat=$(arrival "$SB/burst.txt" "$B/burst.txt")
diag "through uds-plus: on the far side $lat ms after the last change"
check "d = 10 s: pushed at Syncthing's tick (pushes_tick)" \
	[ "$(uds_status pushes_tick)" = $((${t0:-0} + 1)) ]
check "before t = 15 s ($lat < 14000)" [ "$lat" -lt 14000 ]
check "on the far side no later than with Syncthing alone + 5 s ($lat <= $lat_alone + 5000)" \
	[ "$lat" -le $((lat_alone + 5000)) ]
sleep 15
n=$(st_syncs A burst.txt)
check "no more syncs than Syncthing alone ($n <= $n_alone)" [ "$n" -le "$n_alone" ]

# 3. 300 files in one push: 300 paths in the scan requests.
mkdir "$SB/many"
for i in $(seq 1 300); do printf '%s\n' $i >"$SB/many/f$i"; done
for _ in $(seq 1 600); do
	[ "$(ls "$B/many" 2>/dev/null | wc -l)" = 300 ] && break
	sleep 0.1
done
check "300 new files reach the far side" [ "$(ls "$B/many" | wc -l)" = 300 ]
check "and were asked for as paths, not as a scan of the whole folder" \
	grep -q "asked Syncthing to scan 30[01] paths of folder 'uds': [0-9]* ms$" "$TMP/log"
uds_stop || not_ok "uds-plus exits cleanly"
if [ "$_failed" != 0 ]; then
	diag "uds-plus log (last 30 lines):"
	grep -v "scan.*paths" "$TMP/log" | tail -n 30 | sed 's/^/#   /'
fi
done_testing
