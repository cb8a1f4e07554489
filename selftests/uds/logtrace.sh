#!/bin/sh
# A log file growing by a replayed trace (the paper's active-user log
# experiment, section 4.1, scaled down 50x): bursts of short appends with
# pauses longer than t between them. Each pause may end a batch (timer);
# bursts longer than f are cut by the fail-safe; nothing more.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1.5}
UDS_C=${UDS_C:-64K}
. "$(dirname "$0")/lib.sh"
uds_require

trace=$UDS_DIR/logtrace.txt
[ -f "$trace" ] || skip_all "logtrace.txt is missing"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
line=$(printf '%0400d' 0 | tr 0 x)
t0=$(now_ms)
grep -v '^#' "$trace" >"$W/trace"
while read -r delay bytes; do
	sleep "$(awk -v m="$delay" 'BEGIN { printf "%.3f", m / 1000 }')"
	tick_update
	printf '%s\n' "$(echo "$line" | cut -c1-$((bytes - 1)))" \
		>>"$S/activity.log"
done <"$W/trace"
t1=$(now_ms)
gaps=$UDS_GAPS
updates=$(wc -l <"$W/trace")
if uds_wait_synced; then ok "SYNCFOLDER equals SAVINGBOX"; else
	not_ok "SYNCFOLDER equals SAVINGBOX"; fi
pushes=$(uds_status pushes)
diag "$updates appends in $((t1 - t0)) ms, $gaps pauses of t or more" \
	"($(grep -v '^#' "$trace" | awk '$1 >= 300' | wc -l) in the trace):" \
	"$pushes pushes ($(uds_status pushes_timer) timer," \
	"$(uds_status pushes_failsafe) fail-safe," \
	"$(uds_status pushes_counter) counter)"
check "the timer pushed after pauses" [ "$(uds_status pushes_timer)" -ge 1 ]
check_between "pushes within what t, c and f allow" "$pushes" 1 \
	"$(push_bound $((t1 - t0)) "$gaps" "$(uds_status pushes_counter)")"
check "at least 3 appends per push" [ $((pushes * 3)) -le "$updates" ]
check "bytes pushed are the bytes appended" \
	[ "$(uds_status bytes_pushed)" = "$(file_size "$S/activity.log")" ]
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
