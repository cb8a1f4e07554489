#!/bin/sh
# Two "users" editing the same document (the paper's collaborative editing
# workload): each modifies or appends 1-10 random bytes at a random offset
# every 0-100 ms. After they stop SYNCFOLDER equals SAVINGBOX. (A pause of
# the two together is a pause of each, so user 1's pauses bound the
# timer's pushes.)
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1}
UDS_C=${UDS_C:-64K}
. "$(dirname "$0")/lib.sh"
uds_require

head -c 49152 /dev/urandom | base64 >"$S/shared.txt"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
uds_wait_synced || not_ok "the document is synced first"
before=$(uds_status pushes)

user() {
	_end=$(($(now_ms) + 3000))
	while [ "$(now_ms)" -lt $_end ]; do
		tick_update
		_l=$((1 + $(rnd 10)))
		if [ "$(rnd 2)" = 0 ]; then
			head -c $_l /dev/urandom >>"$S/shared.txt"
		else
			write_at "$S/shared.txt" \
				"$(rnd "$(file_size "$S/shared.txt")")" $_l
		fi
		rnd_sleep 100
	done
	echo $UDS_GAPS >"$W/gaps.$1"
}
t0=$(now_ms)
user 1 &
u1=$!
user 2 &
u2=$!
wait $u1 $u2
t1=$(now_ms)
if uds_wait_synced; then ok "SYNCFOLDER equals SAVINGBOX"; else
	not_ok "SYNCFOLDER equals SAVINGBOX"; fi
pushes=$(($(uds_status pushes) - before))
diag "two users for $((t1 - t0)) ms: $(uds_status updates) updates," \
	"$pushes pushes"
check_between "pushes within what t, c and f allow" "$pushes" 1 \
	"$(push_bound $((t1 - t0)) "$(cat "$W/gaps.1")" \
		"$(uds_status pushes_counter)")"
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
