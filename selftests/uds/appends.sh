#!/bin/sh
# The paper's pathological case, scaled down in time: 1-byte appends at a
# steady interval shorter than t. The timer never fires; the fail-safe
# pushes every f; after the last append SYNCFOLDER equals SAVINGBOX, with
# far fewer pushes than updates.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1}
UDS_C=${UDS_C:-64K}
. "$(dirname "$0")/lib.sh"
uds_require

uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
t0=$(now_ms)
i=0
while [ $i -lt 150 ]; do
	tick_update
	printf x >>"$S/append.log"
	sleep 0.02
	i=$((i + 1))
done
t1=$(now_ms)
uds_refresh
if [ $UDS_GAPS = 0 ]; then
	check "the fail-safe pushed while the appends kept resetting the timer" \
		[ "$(uds_status pushes_failsafe)" -ge 1 ]
else
	diag "this machine paused $UDS_GAPS times for t: no fail-safe check"
fi
if uds_wait_synced; then ok "SYNCFOLDER equals SAVINGBOX"; else
	not_ok "SYNCFOLDER equals SAVINGBOX"; fi
pushes=$(uds_status pushes)
updates=$(uds_status updates)
diag "150 appends in $((t1 - t0)) ms (longest pause $UDS_MAXGAP ms):" \
	"$updates updates, $pushes pushes ($(uds_status pushes_failsafe)" \
	"fail-safe, $(uds_status pushes_timer) timer)"
check_between "pushes within what t, c and f allow" "$pushes" 1 \
	"$(push_bound $((t1 - t0)) $UDS_GAPS 0)"
# 150 appends 20 ms apart take 3 s; the fail-safe pushes once per f
# whatever the machine does, so "far fewer" holds only if it kept pace.
if [ $((t1 - t0)) -le 9000 ]; then
	check "far fewer pushes than updates" [ "$pushes" -lt $((updates / 5)) ]
else
	diag "the appends took $((t1 - t0)) ms, not 3 s: no ratio check"
fi
check "the counter never fired (c is far away)" \
	[ "$(uds_status pushes_counter)" = 0 ]
check "bytes pushed are the bytes appended" \
	[ "$(uds_status bytes_pushed)" = 150 ]
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
