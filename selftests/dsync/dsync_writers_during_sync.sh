#!/bin/sh
# Writers keep writing while incremental syncs run: two through ext4 on the
# dm-track device, one with O_DIRECT straight into the device's last
# quarter (outside the file system). Every sync succeeds, and once the
# writers stop and the file system is unmounted, one more sync makes the
# replica byte-identical: no write made during a sync is ever lost.
. "$(dirname "$0")/dsync-lib.sh"
need_track
setup $((DEV_MB * 3 / 4))M
# the raw writer's blocks: the last quarter, less 16 for its longest write
raw_first=$((DEV_MB * 256 * 3 / 4))
raw_span=$((DEV_MB * 256 / 4 - 16))

mount $SRC $MNT || bail "mount $SRC"
workload w0 8
xpipe --all || { xpipe_diag; bail "seeding while mounted"; }

# writer N: rewrite random 4 KiB pieces of its files, and add new ones
writer() {
	mkdir -p $MNT/writer$1
	_j=0
	while [ ! -f $T/stop ]; do
		dd if=/dev/urandom of=$MNT/writer$1/f$((_j % 8)) bs=4k \
			count=$((1 + _j % 17)) seek=$((_j * 7 % 300)) \
			conv=notrunc 2>/dev/null
		[ $((_j % 10)) = 0 ] && sync
		_j=$((_j + 1))
	done
}
# raw writer: O_DIRECT writes of 1 to 16 blocks into the last quarter
raw_writer() {
	_j=0
	while [ ! -f $T/stop ]; do
		dd if=/dev/urandom of=$SRC bs=4k count=$((1 + _j % 16)) \
			seek=$((raw_first + (_j * 4099) % raw_span)) oflag=direct \
			conv=notrunc 2>/dev/null
		_j=$((_j + 1))
	done
}
writer 1 &
w1=$!
writer 2 &
w2=$!
raw_writer &
w3=$!
sleep 1

fails=0
for i in 1 2 3 4 5; do
	if xpipe; then
		diag "sync $i during writes: $(cat $T/stream-bytes) bytes"
	else
		xpipe_diag
		fails=$((fails + 1))
	fi
done
[ $fails = 0 ] && ok "five syncs while writers run all succeed" ||
	not_ok "$fails of five syncs during writes failed"

touch $T/stop
wait $w1 $w2 $w3
umount $MNT || bail "umount after the writers stopped"

xpipe || { xpipe_diag; bail "the final sync"; }
check "after the writers stop, one more sync makes the replica identical" \
	identical
check "and the replica is a clean ext4 with the same files" \
	replica_fs_matches
[ "$(status dirty_active)" = 0 ] && [ "$(status frozen_epoch)" = 0 ] &&
	ok "nothing is left dirty or frozen" ||
	not_ok "left: $(status dirty_active) dirty, frozen $(status frozen_epoch)"

done_testing
