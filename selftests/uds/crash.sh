#!/bin/sh
# kill -9 with changes pending, changes on both sides while it is down,
# kill -9 in the middle of pushes: at the next start nothing is lost,
# nothing is duplicated, and no false conflict appears.
UDS_T=${UDS_T:-0.3}
UDS_F=${UDS_F:-1.5}
. "$(dirname "$0")/lib.sh"
uds_require

head -c 2000000 /dev/urandom >"$S/big.bin"
echo "synced" >"$S/old.txt"
echo "doomed" >"$S/doomed.txt"
echo "remote target" >"$S/remote.txt"
uds_start || { not_ok "uds-plus starts"; done_testing; }
check_mode
uds_wait_synced || not_ok "the first sync"
uds_stop

# Pending when it dies: the timer is far away.
UDS_T=30 UDS_F=60 uds_start || not_ok "uds-plus starts again"
echo "new while running" >"$S/new.txt"
write_at "$S/big.bin" 1000000 5000
sleep 0.5
check "the changes are still pending (t = 30 s)" [ ! -e "$D/new.txt" ]
uds_kill9
# While it is down: both sides change.
echo "offline edit" >>"$S/old.txt"
rm "$S/doomed.txt"
echo "remote while down" >>"$D/remote.txt"
uds_start || not_ok "uds-plus starts after kill -9"
if uds_wait_synced; then ok "after kill -9: the trees are equal"; else
	not_ok "after kill -9: the trees are equal"; fi
check "the change pending at the kill arrived" [ -f "$D/new.txt" ]
check "the offline edit arrived" grep -q "offline edit" "$D/old.txt"
check "the offline delete arrived" [ ! -e "$D/doomed.txt" ]
check "the remote change came back" grep -q "remote while down" "$S/remote.txt"
check "no conflict" [ "$(uds_status conflicts)" = 0 ]

# kill -9 at random moments while a big file is being changed and pushed.
round=0
while [ $round -lt 5 ]; do
	i=0
	while [ $i -lt 20 ]; do
		write_at "$S/big.bin" "$(rnd 2000000)" 100
		i=$((i + 1))
	done
	rnd_sleep 600
	uds_kill9
	uds_start || not_ok "restart $round"
	round=$((round + 1))
done
if uds_wait_synced; then ok "after 5 kills mid-push: the trees are equal"; else
	not_ok "after 5 kills mid-push: the trees are equal"; fi
check "no conflict copy appeared" \
	[ -z "$(ls "$S" "$D" | grep conflicted)" ]
check "no temporary file was left" \
	[ -z "$(ls -A "$S" "$D" | grep uds-plus-tmp)" ]
check "uds-plus exits cleanly on SIGTERM" uds_stop
done_testing
