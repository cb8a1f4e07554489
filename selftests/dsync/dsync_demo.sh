#!/bin/sh
# make demo: a real incremental sync of ext4 on dm-track, with the bytes
# sent against the size of the device.
DSYNC_DEV_MB=256
. "$(dirname "$0")/dsync-lib.sh"
need_track
setup

mount $SRC $MNT || bail "mount $SRC"
workload base 32
umount $MNT
echo "dsync demo: seeding the replica $DST from $SRC (dmsync --all)"
dmsync --all --state $STATE $NAME $DST || bail "seeding"
size=$(blockdev --getsize64 $SRC)
for i in 1 2 3; do
	mount $SRC $MNT || bail "mount $SRC"
	dd if=/dev/urandom of=$MNT/hour$i bs=1M count=$((i * 4)) 2>/dev/null
	umount $MNT
	echo "dsync demo: sync $i, after writing a $((i * 4)) MiB file:"
	dmextract -v $NAME 2>$T/err | tee $T/stream |
		dmmerge --state $STATE $DST || bail "sync $i"
	sed 's/^/  /' $T/err
	bytes=$(wc -c <$T/stream)
	pm=$((bytes * 10000 / size))
	echo "  sent $bytes bytes of a $size-byte device" \
		"($((pm / 100)).$((pm / 10 % 10))$((pm % 10))%)"
	cmp $SRC $DST >/dev/null && echo "  replica identical: yes" ||
		bail "replica differs after sync $i"
	ok "sync $i"
done
done_testing
