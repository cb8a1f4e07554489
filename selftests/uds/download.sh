#!/bin/sh
# A slow download written in small chunks (the paper's wget at a low
# rate): random, incompressible 1-4 KB chunks every few tens of ms. The
# counter c fires as the compressed pending bytes pass it; the result is
# byte for byte the downloaded file.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1.5}
UDS_C=${UDS_C:-16K}
. "$(dirname "$0")/lib.sh"
uds_require

uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
t0=$(now_ms)
total=0
while [ $total -lt 200000 ]; do
	n=$((1024 + $(rnd 3072)))
	tick_update
	head -c $n /dev/urandom >>"$S/download.part"
	total=$((total + n))
	sleep 0.03
done
mv "$S/download.part" "$S/download.bin"
t1=$(now_ms)
if uds_wait_synced; then ok "SYNCFOLDER equals SAVINGBOX"; else
	not_ok "SYNCFOLDER equals SAVINGBOX"; fi
pushes=$(uds_status pushes)
counter=$(uds_status pushes_counter)
diag "$total bytes in $((t1 - t0)) ms: $(uds_status updates) updates," \
	"$pushes pushes ($counter counter, $(uds_status pushes_failsafe)" \
	"fail-safe, $(uds_status pushes_timer) timer)"
# The counter fires only if the chunks come faster than t. On a machine
# that paused for t between most of them (TCG under load), the timer
# pushes each one first; that is right, and nothing to check the
# counter by.
if [ "$UDS_GAPS" -lt $(($(uds_status updates) / 4)) ]; then
	check "the counter fired" [ "$counter" -ge 1 ]
else
	diag "this machine paused for t $UDS_GAPS times: no counter check"
fi
# Random data does not compress: at most one counter push per c bytes.
check_between "counter pushes within what c allows" "$counter" 0 \
	$((total / 16384 + 2))
check_between "pushes within what t, c and f allow" "$pushes" 1 \
	"$(push_bound $((t1 - t0)) $UDS_GAPS "$counter")"
check "the rename to the final name was replayed, not copied again" \
	[ "$(uds_status bytes_pushed)" -le $((total + total / 2)) ]
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
