#!/bin/sh
# No added delay when there is nothing to batch: a lone change after a
# quiet period (2 t) reaches SYNCFOLDER after --lone-delay (500 ms), not
# after the timer t; a burst (changes closer than that) is still batched
# by t, and a lone change costs one push. Changes whose gaps straddle t
# (the paper's collaborative edit) are not taken for lone ones.
UDS_T=${UDS_T:-4}
UDS_F=${UDS_F:-20}
. "$(dirname "$0")/lib.sh"
uds_require

echo "start" >"$S/notes.txt"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
uds_wait_synced || not_ok "the first sync"
sleep $((UDS_T * 2))

# Time until SYNCFOLDER has LINE in FILE, in ms (gives up after 3 t).
arrival_ms() {
	_t0=$(now_ms)
	while ! grep -qx "$2" "$D/$1" 2>/dev/null; do
		[ $(($(now_ms) - _t0)) -gt $((UDS_T_MS * 3)) ] && break
		sleep 0.05
	done
	echo $(($(now_ms) - _t0))
}

uds_refresh
p0=$(uds_status pushes)
echo "lone edit" >>"$S/notes.txt"
t_lone=$(now_ms)
lat=$(arrival_ms notes.txt "lone edit")
check_between "a lone change arrives well before t ($UDS_T s) (ms)" \
	"$lat" 0 $((UDS_T_MS - 1500))
uds_refresh
check "it took one push" [ $(($(uds_status pushes) - p0)) = 1 ]
check "counted as lone" [ "$(uds_status pushes_lone)" -ge 1 ]

# A change 1.5 t after the last one: more than t of quiet, less than
# 2 t. A writer with gaps around t (edits every 0-10 s at t = 5 s) would
# pay an extra push after every such gap if it went out alone: it waits
# for the timer, and the one after it within t is batched with it.
uds_refresh
l1=$(uds_status pushes_lone)
p1=$(uds_status pushes)
while [ $(($(now_ms) - t_lone)) -lt $((UDS_T_MS * 3 / 2)) ]; do
	sleep 0.05
done
echo "edit 1" >>"$S/notes.txt"
sleep 1
echo "edit 2" >>"$S/notes.txt"
uds_wait_synced || not_ok "the two edits are synced"
uds_refresh
check "a change after t (not 2 t) of quiet is not pushed alone" \
	[ "$(uds_status pushes_lone)" = "$l1" ]
check "and the two edits are one push" [ $(($(uds_status pushes) - p1)) = 1 ]

# A burst after the quiet: 20 appends 100 ms apart. Batched: the first
# one does not go out alone.
sleep $((UDS_T * 2))
uds_refresh
p1=$(uds_status pushes)
i=0
gap=0
last=$(now_ms)
while [ $i -lt 20 ]; do
	echo "burst $i" >>"$S/notes.txt"
	sleep 0.1
	now=$(now_ms)
	[ $((now - last)) -gt $gap ] && gap=$((now - last))
	last=$now
	i=$((i + 1))
done
uds_wait_synced || not_ok "the burst is synced"
uds_refresh
# A machine that paused for half the lone delay inside the burst made its
# first change a lone one: then the first may go alone.
if [ $gap -lt 250 ]; then
	check_between "a burst is one push, as before" \
		$(($(uds_status pushes) - p1)) 1 1
else
	diag "the burst paused $gap ms: one push, or two"
	check_between "a burst is one or two pushes" \
		$(($(uds_status pushes) - p1)) 1 2
fi
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
