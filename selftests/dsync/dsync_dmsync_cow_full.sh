#!/bin/sh
# dmsync in snapshot mode (its default) while the application overwrites
# the frozen blocks faster than a slow receiver takes the copy, with a
# memory limit of 16 blocks and a COW device of 16 more: the sync fails
# with a message that names the COW device, exits 1, and aborts the epoch
# (its blocks stay dirty); no application write fails; the next dmsync
# converges on an identical replica.
. "$(dirname "$0")/dsync-lib.sh"
need_track
dmsetup targets | grep -q '^track-view ' ||
	skip_all "no track-view target: no snapshot mode"
setup
COW=/dev/mapper/dsync-cow

dmsetup remove --noudevsync $NAME &&
	dmsetup create --noudevsync dsync-cow --table "0 128 linear /dev/vdb 0" &&
	dmtrack create --cow-dev $COW $NAME $SRC_DISK 2>$T/err ||
	bail "a track device with a COW device of 16 blocks"
dmsync --all --state $STATE $NAME $DST 2>$T/err ||
	bail "seeding the replica: $(cat $T/err)"

slow_merge

# the whole device: more than dmextract reads ahead of the receiver
dd if=/dev/urandom of=$SRC bs=1M count=$DEV_MB oflag=direct 2>/dev/null ||
	bail "writing the blocks to sync"
committed=$(status committed_epoch)
dmsync --snapshot=64K --dmmerge $T/slowmerge --state $STATE $NAME $DST \
	2>$T/err &
sync_pid=$!
wait_frozen
# the copy reads from the start: overwrite the last 16 MiB, which it
# reaches last
dd if=/dev/urandom of=$SRC bs=1M count=16 seek=$((DEV_MB - 16)) \
	oflag=direct 2>$T/dd
wrc=$?
wait $sync_pid
rc=$?
sed 's/^/# dmsync: /' $T/err
[ $wrc = 0 ] && ok "no application write failed during the copy" ||
	not_ok "an application write failed: $(cat $T/dd)"
[ $rc = 1 ] && grep -q "snapshot of epoch .* failed.*COW device" $T/err &&
	ok "dmsync exits 1 and names the COW device" ||
	not_ok "dmsync exited $rc"
dmesg | grep -q 'the COW device is full' &&
	ok "the kernel log says the COW device is full" ||
	not_ok "no 'COW device is full' in the kernel log"
[ "$(status frozen_epoch)" = 0 ] &&
	[ "$(status committed_epoch)" = "$committed" ] &&
	[ "$(status dirty_active)" -ge $((DEV_MB * 256)) ] &&
	ok "the epoch is aborted and its blocks stay dirty" ||
	not_ok "after the failure: frozen $(status frozen_epoch), committed $(status committed_epoch), dirty $(status dirty_active)"

dmsync --state $STATE $NAME $DST 2>$T/err ||
	{ sed 's/^/# /' $T/err; not_ok "the next dmsync"; }
check "the next dmsync makes the replica identical" identical
[ "$(status dirty_active)" = 0 ] && [ "$(status frozen_epoch)" = 0 ] &&
	ok "nothing is left dirty or frozen" ||
	not_ok "dirty $(status dirty_active), frozen $(status frozen_epoch)"

done_testing
