#!/bin/bash
# timeout: 240
# Syncthing's timeout case, in front of a real Syncthing pair on loopback
# (tests/uds-syncthing-lib.sh), fallback mode: a file that keeps changing
# is held by Syncthing's watcher until it has been pending for
# notifyTimeout (6 d; 6 s at d = 1 s), then scanned while it still
# changes. A burst of 1 B every 0.2 s for 10 s is written into the
# folder (Syncthing alone), then into SAVINGBOX with the Syncthing
# profile in front; checked: the far side is byte-identical, and
# through uds-plus there are no more syncs than alone (its fail-safe,
# 120 s, does not split what the timeout scan would have batched), and
# no more delay than alone plus t (5 s at d = 1 s), the last push
# started as planned. Then Syncthing's hash rate, which the profile
# measures from the scan it asks for after a push of a large file.
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

st_setup 1 || { not_ok "set up two Syncthing homes"; done_testing; }
st_start || { not_ok "two Syncthing instances connect on loopback"; done_testing; }
ok "two Syncthing instances connect on loopback"
A=$ST_W/A-folder
B=$ST_W/B-folder
SB=$TMP/savingbox
mkdir -p "$SB"
for _ in $(seq 1 50); do
	grep -q 'fsWatcherDelayS="1"' "$ST_W/A/config.xml" && break
	sleep 0.1
done
check "the watcher delay is 1 s" grep -q 'fsWatcherDelayS="1"' "$ST_W/A/config.xml"

ms() {
	local up
	read -r up _ </proc/uptime
	echo $((${up%.*}${up#*.}0))
}

# 1 B every 0.2 s, 50 times: 10 s, longer than notifyTimeout (6 s).
burst() {
	local i
	for i in $(seq 1 50); do
		[ $i = 1 ] || sleep 0.2
		printf x >>"$1"
	done
}

# Milliseconds from now until FILE_B is the same as FILE_A.
arrival() {
	local t0
	t0=$(ms)
	st_wait_same "$1" "$2" 60 >/dev/null || { echo 99999; return; }
	echo $(($(ms) - t0))
}

t0=$(ms)
burst "$A/alone.txt"
took=$(($(ms) - t0))
lat_alone=$(arrival "$A/alone.txt" "$B/alone.txt")
sleep 4
n_alone=$(st_syncs A alone.txt)
diag "Syncthing alone: a ${took} ms burst, $n_alone syncs, on the far side $lat_alone ms after its last change"
check "the burst is longer than Syncthing's timeout (${took} ms > 6000)" [ "$took" -gt 6000 ]
check "Syncthing alone synced it while it was still changing ($n_alone >= 2)" [ "$n_alone" -ge 2 ]

rm -f "$TMP/status"
uds-plus --client syncthing --syncthing-config "$ST_W/A/config.xml" \
	--state-dir "$TMP/state" --status-file "$TMP/status" \
	--log-level debug "$SB" "$A" 2>>"$TMP/log" &
UDS_PID=$!
for _ in $(seq 1 100); do
	[ -f "$TMP/status" ] && break
	sleep 0.1
done
check "uds-plus --client syncthing starts" [ -f "$TMP/status" ]
check "with the fail-safe well beyond Syncthing's timeout" \
	grep -q "at the latest 120 s after the first change" "$TMP/log"
p0=$(sed -n 's/^pushes=//p' "$TMP/status")
sleep 1
burst "$SB/burst.txt"
lat=$(arrival "$SB/burst.txt" "$B/burst.txt")
sleep 4
n=$(st_syncs A burst.txt)
rm -f "$TMP/status"
kill -USR1 "$UDS_PID"
for _ in $(seq 1 50); do
	[ -f "$TMP/status" ] && break
	sleep 0.05
done
p=$(( $(sed -n 's/^pushes=//p' "$TMP/status") - p0 ))
quiet=$(sed -n 's/^last_push_quiet_ms=//p' "$TMP/status")
plan=$(sed -n 's/^last_push_plan_ms=//p' "$TMP/status")
diag "through uds-plus: $p pushes, $n syncs, on the far side $lat ms after the last change (push planned $plan ms after it, started after $quiet ms)"
check "the far side is byte-identical" cmp "$SB/burst.txt" "$B/burst.txt"
check "no more syncs than Syncthing alone ($n <= $n_alone)" [ "$n" -le "$n_alone" ]
check "one push" [ "$p" = 1 ]
check "planned no later than t = 5 s after the last change (${plan:-none} <= 5000)" \
	[ "${plan:-99999}" -le 5000 ]
check "on the far side no later than with Syncthing alone + 5 s ($lat <= $lat_alone + 5000)" \
	[ "$lat" -le $((lat_alone + 5000)) ]
# The hash time the profile waits for is Syncthing's, measured from the
# scan it asks for after a push of a large file (64 MiB/s until then).
check "Syncthing's hash rate is not known before a large push" \
	[ "$(sed -n 's/^client_hash_rate=//p' "$TMP/status")" = 0 ]
head -c $((32 << 20)) /dev/urandom >"$SB/large.bin"
st_wait_same "$SB/large.bin" "$B/large.bin" 120 >/dev/null ||
	not_ok "a 32 MiB file reaches the far side"
sleep 1
rm -f "$TMP/status"
kill -USR1 "$UDS_PID"
for _ in $(seq 1 50); do
	[ -f "$TMP/status" ] && break
	sleep 0.05
done
rate=$(sed -n 's/^client_hash_rate=//p' "$TMP/status")
diag "Syncthing hashed the 32 MiB file at ${rate:-?} bytes/s, as measured"
check "it is measured from the scan of a 32 MiB push (0 < ${rate:-?} <= 1 GiB/s)" \
	[ "${rate:-0}" -gt 0 ] && [ "$rate" -le $((1 << 30)) ]
kill -TERM "$UDS_PID" && wait "$UDS_PID"
check "uds-plus exits cleanly" [ $? = 0 ]
UDS_PID=
if [ "$_failed" != 0 ]; then
	diag "uds-plus log (last 30 lines):"
	tail -n 30 "$TMP/log" | sed 's/^/#   /'
fi
done_testing
